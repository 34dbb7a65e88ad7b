"""``nasrlm pretrain``: one base model on every published table."""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from nasrlm.cli._common import (
    CliError,
    Command,
    _add_base,
    _add_device,
    _add_label_options,
    _add_threads,
    _check_new_directory,
    _check_output_dir,
    _comma_list,
    _count,
    _device,
    _number,
    _positive_float,
    _positive_int,
    torch_threads,
)
from nasrlm.cli._inputs import _space
from nasrlm.data import resolve_data_dir
from nasrlm.rlm.bases import base_directory
from nasrlm.rlm.recipes import PRETRAIN_SIZE, SIZES

#: ``nasrlm pretrain``: the most of ``--minutes`` that describing architectures may take, and the least
#: that training gets however long the rows took.
LABEL_SHARE = 0.5
MIN_TRAINING_SHARE = 0.1


class Pretrain(Command):
    name = "pretrain"
    help = "pre-train one base model on every published table (then: train --base)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.rlm.recipes import PretrainConfig

        config = PretrainConfig()
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
        p.add_argument("-o", "--output", required=True, help="base model directory to write (new or empty)")
        p.add_argument("--exclude", metavar="GLOBS",
                       help="columns to leave out, comma-separated globs over space:objective, "
                            "e.g. 'nb201:*acc*,*:pixel3' (a bare space name leaves out all its columns)")
        p.add_argument("--spaces", help="comma-separated spaces (default: every registered one)")
        p.add_argument("--minutes", type=_positive_float, default=config.minutes,
                       help=f"time budget of the whole run (default {config.minutes:g}): describing the "
                            f"architectures the label cache lacks takes at most {LABEL_SHARE:g} of it "
                            f"(rows not described by then are left out of this run, and those described "
                            f"are cached for the next), training the rest (at least {MIN_TRAINING_SHARE:g} "
                            f"of it); the learning rate decays over the training")
        p.add_argument("--max-steps", type=_positive_int, help="stop after this many steps")
        p.add_argument("--max-rows", type=_positive_int, help="labelled rows per space (default: all)")
        p.add_argument("--free-rows", type=_count, default=500,
                       help="random architectures per space with free labels only (default 500)")
        p.add_argument("--size", choices=list(SIZES), default=PRETRAIN_SIZE,
                       help=f"model size (default {PRETRAIN_SIZE})")
        p.add_argument("--batch-size", type=_positive_int, default=config.batch_size)
        p.add_argument("--lr", type=_positive_float, default=config.learning_rate,
                       help=f"peak learning rate (default {_number(config.learning_rate)})")
        p.add_argument("--resume", action="store_true",
                       help="continue the run saved in -o for --minutes more")
        _add_base(p, "a new run that starts from the weights, tokenizer and normalisers of BASE ('shipped' "
                     "or a directory: a base model pre-trained with the same --exclude) instead of at "
                     "random, with a learning-rate schedule of its own; --size is BASE's")
        p.add_argument("--encoder-layers", type=_positive_int, metavar="N",
                       help="with --base: deepen BASE's encoder to N layers, its own evenly spread and the "
                            "new ones starting as identities (a larger model going on from BASE's weights)")
        p.add_argument("--graph-labels", choices=("every-batch", "drawn"),
                       default="every-batch" if config.every_graph_label else "drawn",
                       help="decode every graph label that varies over a space's rows in each of its "
                            "batches, or draw them with its table's columns (default %(default)s)")
        p.add_argument("--ship", metavar="DIR",
                       help="when the run ends, also write the model into DIR with weights in float16 and "
                            "its pretraining.json (no optimiser state or rows): how the base shipped in the "
                            "package is made")
        _add_device(p)
        p.add_argument("--seed", type=_count, default=0)
        _add_threads(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.rlm.predictor import RLMPredictor
        from nasrlm.rlm.pretraining import (
            PRETRAINING_FILE,
            ROWS_FILE,
            PretrainState,
            collect_tasks,
            fit_normalizers,
            fit_transfer,
            load_tasks,
            parse_exclude,
            pretrain,
            save_tasks,
        )
        from nasrlm.rlm.recipes import PretrainConfig

        started = time.monotonic()
        output = Path(args.output)
        if args.ship:
            _check_output_dir(args.ship, "--ship")
        device = _device(args.device)
        torch_threads(args.threads)
        exclude = parse_exclude(args.exclude or "")
        config = PretrainConfig(minutes=args.minutes, max_steps=args.max_steps, batch_size=args.batch_size,
                                learning_rate=args.lr, seed=args.seed, progress=not args.quiet,
                                every_graph_label=args.graph_labels == "every-batch")
        log = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
        if args.resume and args.base:
            raise CliError("--resume continues the run in -o; --base starts a new one: give one of them")
        if args.encoder_layers and not args.base:
            raise CliError("--encoder-layers deepens the --base base: give --base (a new model: --size)")
        base = base_directory(args.base) if args.base else None
        if args.resume:
            _check_output_dir(output, "-o")
            state = _recorded_run("--resume", output, ROWS_FILE)
            _same_exclude("--resume", output, state, exclude)
            predictor, tasks = RLMPredictor.load(output), load_tasks(output / ROWS_FILE)
            state.finished = False
            config.minutes += state.seconds / 60  # the budget counts what the earlier runs spent
            log(f"resuming {output} at step {state.step:,} ({state.seconds / 60:.1f} min spent)")
        else:
            _check_new_directory(output, "-o")
            parent = None
            if base is not None:  # checked before the rows are collected, which may take half the budget
                parent = _recorded_run("--base", base)
                _same_exclude("--base", base, parent, exclude)
            spaces = _comma_list(args.spaces) if args.spaces else None
            for name in spaces or []:
                _space(name)
            data_dir = resolve_data_dir(args.data_dir)  # --data-dir, else $NASRLM_DATA
            if data_dir is None:
                log("no data directory (--data-dir or $NASRLM_DATA): pre-training on free labels only")
            budget = 60 * args.minutes
            tasks, objectives = collect_tasks(data_dir, exclude=exclude, spaces=spaces,
                                              free_rows=args.free_rows, max_rows=args.max_rows,
                                              seed=args.seed, progress=not args.quiet,
                                              until=started + LABEL_SHARE * budget, log=log)
            if base is not None:
                predictor = _initial(base, tasks)
                if args.encoder_layers:
                    predictor.lm.model = _deepened(predictor.lm.model, args.encoder_layers)
                    log(f"encoder deepened to {args.encoder_layers} layers")
                kept = dict(predictor.lm.normalizers)  # the weights decode the digits these normalisers wrote
                fit_normalizers(predictor, tasks)
                predictor.lm.normalizers.update(kept)
            else:
                predictor = RLMPredictor.from_scratch(objectives, size=args.size, seed=args.seed)
                fit_normalizers(predictor, tasks)
            output.mkdir(parents=True, exist_ok=True)
            save_tasks(tasks, output / ROWS_FILE)
            transfer = fit_transfer(tasks, objectives, seed=args.seed)
            if transfer is not None:  # saved with the model at every checkpoint from now on
                predictor.transfer = transfer
                log("transfer forests: " + ", ".join(f"{s.space} ({s.rows:,} rows of {', '.join(s.tags)})"
                                                     for s in transfer.sources))
            left = budget - (time.monotonic() - started)  # the rows took their share: training the rest
            config.minutes = max(left, MIN_TRAINING_SHARE * budget) / 60
            state = PretrainState.start(tasks, config, exclude)
            if parent is not None:
                state.started_from(base, parent)
                if args.encoder_layers:  # the record says the weights were deepened after they were read
                    state.init["encoder_layers"] = args.encoder_layers
        tags = {o for t in tasks for o in t.objectives}
        rows = sum(len(t.texts) for t in tasks)
        log(f"pre-training on {rows:,} rows of {len(tasks)} spaces, {len(tags)} tags, "
            f"for {config.minutes:.1f} min on {device}")
        try:
            state = pretrain(predictor, tasks, config, output=output, state=state, device=device)
        except KeyboardInterrupt as interrupt:  # pretrain saved where it stood and says so
            raise KeyboardInterrupt(f"{interrupt.args[0]}; the same command with --resume continues "
                                    "it") from None
        print(f"saved base model {output}: {state.step:,} steps in {state.seconds / 60:.1f} min, "
              f"final loss {state.loss[-1]:.3f}", file=sys.stderr)
        if args.ship:  # the model, and what it saw (the rows and optimiser state stay behind)
            shipped = predictor.to("cpu").save(args.ship, half=True)
            shutil.copyfile(output / PRETRAINING_FILE, shipped / PRETRAINING_FILE)
            size = sum(f.stat().st_size for f in shipped.iterdir()) / 2**20
            print(f"shipped {shipped}: {size:.1f} MiB", file=sys.stderr)
        return 0


def _deepened(model: Any, layers: int) -> Any:
    """``--encoder-layers``: ``model`` (the ``--base`` base's) deepened, or a clear error."""
    try:
        return model.deepened(layers)
    except ValueError as error:
        raise CliError(f"--encoder-layers: {error}") from None


def _recorded_run(option: str, path: Path, *files: str) -> Any:
    """The :class:`PretrainState` of the run ``option`` names (it and ``files`` must be in ``path``)."""
    from nasrlm.rlm.pretraining import PRETRAINING_FILE, PretrainState

    needed = (PRETRAINING_FILE, *files)
    if not all((path / name).is_file() for name in needed):
        raise CliError(f"{option}: {path} holds no pre-training run ({', '.join(needed)})")
    try:
        return PretrainState.load(path)
    except (ValueError, TypeError) as error:
        raise CliError(f"{option}: {path / PRETRAINING_FILE} is not readable: {error}") from None


def _same_exclude(option: str, path: Path, state: Any, exclude: list[str]) -> None:
    """Refuse a run pre-trained with another ``--exclude``: going on from it, the new steps would have seen
    what this command leaves out, or the record would no longer say all the model saw."""
    if state.exclude != exclude:
        before, now = ",".join(state.exclude) or "(none)", ",".join(exclude) or "(none)"
        raise CliError(f"{option}: {path} was pre-trained with --exclude {before}, not {now}")


def _initial(base: Path, tasks: list) -> Any:
    """The base ``--base`` names (its ``--exclude`` already checked), with a tag for every column of
    ``tasks``."""
    from nasrlm.rlm.predictor import RLMPredictor

    predictor = RLMPredictor.load(base)
    missing = sorted({o for t in tasks for o in t.objectives} - set(predictor.lm.model.config.objectives))
    if missing:
        raise CliError(f"--base: {base} has no tag for {len(missing)} column(s) of this run "
                       f"({', '.join(missing[:5])}{', ...' if len(missing) > 5 else ''})")
    return predictor
