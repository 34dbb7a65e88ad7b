"""The ``nasrlm`` command line: spaces, objectives, export, measure, data, train, predict, eval, search, demo.

Bad input (unknown space, malformed id, unknown objective, missing file) prints one line on
stderr and exits with status 2; anything else that goes wrong is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import search_spaces
from exporters.latency import DeviceProfile
from nasrlm import __version__
from nasrlm.data import available_objectives, load_table, resolve_data_dir
from nasrlm.presets import FINE_TUNE, SIZES, TRAIN

#: ``--prior``: the ``prior_kind`` values of ``RLMPredictor.fit`` (kept here so the CLI starts without numpy's
#: heavier neighbours; a test checks it against ``nasrlm.feature_prior.PRIOR_KINDS``)
PRIOR_KINDS = ("line", "auto", "forest", "ridge", "trend-forest")

#: Exit status for bad input, as argparse uses.
USAGE_ERROR = 2
#: ``nasrlm search --sampler`` choices (kept in step with :data:`nasrlm.search.SAMPLERS` by a test).
SAMPLER_NAMES = ("rlm", "random", "nsga2", "nsga3", "tpe", "tpe-mv", "gp")
#: ``nasrlm pretrain --minutes`` default.
PRETRAIN_MINUTES = 30.0
#: Latency store used when ``--db`` is not given.
DEFAULT_DB = "latency.db"
#: Plug-ins (module names or .py files, comma-separated) imported before every command, like ``--plugin``.
PLUGINS_ENV = "NASRLM_PLUGINS"


class CliError(Exception):
    """A problem with what the user asked for; printed as one line."""


# --- helpers ---------------------------------------------------------------------------------------
def _space(name: str) -> search_spaces.SearchSpace:
    try:
        return search_spaces.get_space(name)
    except search_spaces.UnknownSpaceError as error:
        raise CliError(f"{error}. A space of your own? Load it with 'nasrlm --plugin my_space.py ...' "
                       f"(or ${PLUGINS_ENV}), or install it under the entry-point group "
                       f"{search_spaces.ENTRY_POINT_GROUP}") from None


def load_plugins(plugins: Sequence[str]) -> None:
    """Import each plug-in so that its ``register_space`` calls run: spaces without an installed package.

    A plug-in is a module name (found on ``sys.path``) or the path of a ``.py`` file. A file is imported
    under its stem, with its folder put first on ``sys.path`` as when Python runs a script, so it can
    import modules beside it. Each is imported once per process, however often it is named.
    """
    for plugin in dict.fromkeys(p.strip() for p in plugins if p.strip()):
        if plugin.endswith(".py") or os.sep in plugin or (os.altsep and os.altsep in plugin):
            _import_file(Path(plugin))
            continue
        try:
            importlib.import_module(plugin)
        except ModuleNotFoundError as error:
            if error.name != plugin.split(".")[0] and error.name != plugin:
                raise  # the plug-in itself failed to import something: its traceback is what helps
            raise CliError(f"plug-in module {plugin!r} not found on the Python path; pass the file instead "
                           f"(--plugin path/to/{plugin.rsplit('.', 1)[-1]}.py)") from None


def _import_file(path: Path) -> None:
    if not path.is_file():
        raise CliError(f"plug-in file {str(path)!r} not found")
    path = path.resolve()
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if getattr(loaded, "__file__", None) and Path(loaded.__file__).resolve() == path:
            return
        raise CliError(f"plug-in {str(path)!r}: a module named {name!r} is already imported "
                       f"(from {getattr(loaded, '__file__', 'built-in')}); rename the file")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise


def _arch_ids(space: search_spaces.SearchSpace, args: argparse.Namespace) -> list[str]:
    """The ids named by ``--arch``, ``--random N --seed S`` or ``--all``, validated and canonical."""
    if args.arch:
        return [space.arch_id(space.parse(a)) for a in args.arch]
    if getattr(args, "all", False):
        if space.size is None:
            raise CliError(f"search space {space.name!r} is not enumerable; use --random N")
        return [space.arch_id(a) for a in space.enumerate()]
    if args.random < 1:
        raise CliError(f"--random needs a positive count, got {args.random}")
    return space.sample_ids(args.random, seed=args.seed)


def _add_selection(p: argparse.ArgumentParser, allow_all: bool = False) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--arch", action="append", metavar="ID",
                       help="architecture id (repeat for several); quote it, ids contain '|'")
    group.add_argument("--random", type=int, metavar="N", help="N distinct random architectures")
    if allow_all:
        group.add_argument("--all", action="store_true", help="every architecture of a finite space")
    p.add_argument("--seed", type=int, default=0, help="seed for --random (default 0)")


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N, or auto (default: CUDA where torch sees a GPU, else CPU)")


def _db_default() -> str:
    return os.environ.get("NASRLM_DB", DEFAULT_DB)


# --- commands -------------------------------------------------------------------------------------
def cmd_spaces(args: argparse.Namespace) -> int:
    rows = [_space(name).describe() for name in search_spaces.available_spaces()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for row in rows:
        size = f"{row['size']:,}" if row["size"] is not None else "unbounded"
        shape = "x".join(map(str, row["input_shape"]))
        print(f"{row['name']:<12} {size:>12} archs  input {shape:<12} {row['doc']}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    space = _space(args.space)
    ids = _arch_ids(space, args)
    bar = tqdm(ids, desc=f"export {space.name}", unit="arch", disable=len(ids) < 50 or args.quiet)
    if args.format == "onnx":
        if args.output is None:
            raise CliError("--format onnx writes binary files: give -o FILE (one arch) or -o DIR (several)")
        import onnx

        if len(ids) == 1:
            onnx.save_model(space.to_onnx(space.parse(ids[0])), args.output)
            print(f"wrote {args.output}", file=sys.stderr)
            return 0
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "index.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["file", "arch_id"])
            for k, arch_id in enumerate(bar):
                name = f"{space.name}_{k:05d}.onnx"
                onnx.save_model(space.to_onnx(space.parse(arch_id)), out / name)
                writer.writerow([name, arch_id])
        print(f"wrote {len(ids)} models and index.csv to {out}", file=sys.stderr)
        return 0
    stream = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115 - stdout is not ours to close
    try:
        for arch_id in bar:
            text = space.to_text(space.parse(arch_id))
            if args.format == "jsonl":
                stream.write(json.dumps({"space": space.name, "arch_id": arch_id, "text": text}) + "\n")
            elif len(ids) == 1:
                stream.write(text)
            else:
                stream.write(f"# {arch_id}\n{text}\n")
    finally:
        if stream is not sys.stdout:
            stream.close()
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    from nasrlm.measure import LatencyStore, measure_archs

    space = _space(args.space)
    profile = DeviceProfile.parse(args.device)
    ids = _arch_ids(space, args)
    with LatencyStore(args.db) as store:
        before = len(store.missing(space.name, ids, profile))
        results = measure_archs(space, ids, profile, store, warmup=args.warmup, runs=args.runs,
                                progress=not args.quiet)
    if args.json:
        for arch_id, r in results.items():
            print(json.dumps({"arch_id": arch_id, "profile": r.profile, "median_ms": r.median_ms,
                              "p10_ms": r.p10_ms, "p90_ms": r.p90_ms, "batch": r.batch,
                              "threads": r.threads, "provider": r.provider}))
    elif len(results) <= 20:
        for arch_id, r in results.items():
            print(f"{r.median_ms:9.3f} ms  [{r.p10_ms:.3f}, {r.p90_ms:.3f}]  {arch_id}")
    medians = sorted(r.median_ms for r in results.values())
    print(f"{profile.name}: {before} measured now, {len(ids) - before} already in {args.db}; "
          f"median latency {medians[len(medians) // 2]:.3f} ms (batch {profile.batch}, "
          f"range {medians[0]:.3f}-{medians[-1]:.3f} ms)", file=sys.stderr)
    return 0


def _comma_list(text: str) -> list[str]:
    """``"acc, pixel3,"`` -> ``["acc", "pixel3"]``: names of a comma-separated option, blanks dropped."""
    return [n.strip() for n in text.split(",") if n.strip()]


def cmd_data(args: argparse.Namespace) -> int:
    space = _space(args.space)
    names = _comma_list(args.objectives)
    if not names:
        raise CliError("--objectives needs at least one name, e.g. --objectives acc,pixel3")
    extra = {}
    from nasrlm.measure import is_profile

    measured = [n for n in names if is_profile(n)]
    if measured:
        from nasrlm.measure import LatencyStore, measured_objective

        if not Path(args.db).exists():
            raise CliError(f"objective {measured[0]!r} is a measured profile but latency store {args.db} "
                           f"does not exist; run 'nasrlm measure {space.name} --device {measured[0]} ...'")
        with LatencyStore(args.db) as store:
            for name in measured:
                extra[name] = measured_objective(store, space.name, name)
    table = load_table(space.name, names, args.data_dir, extra=extra)
    if args.output == "-":
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = table.to_csv(Path(tmp) / "table.csv")
            sys.stdout.write(path.read_text())
    else:
        table.to_csv(args.output)
        print(f"wrote {len(table.ids):,} rows x {len(names)} objectives to {args.output} "
              f"(+ {args.output}.meta.json)", file=sys.stderr)
    for objective in table.objectives:
        present = int((~np.isnan(table.column(objective.name))).sum())
        print(f"  {objective.header:<24} {present:>6,} values  source: {objective.source}", file=sys.stderr)
    return 0


def cmd_objectives(args: argparse.Namespace) -> int:
    for objective in available_objectives(args.space, args.data_dir):
        print(f"{objective.header:<28} {objective.description}")
    print("cpu-<T>t-b<B>, cuda-b<B>      latency measured by 'nasrlm measure' (read from --db)")
    return 0


def _texts(space: search_spaces.SearchSpace, ids: Sequence[str]) -> list[str]:
    return [space.to_text(space.parse(i)) for i in ids]


def cmd_train(args: argparse.Namespace) -> int:
    from nasrlm.data import BenchmarkTable
    from nasrlm.free_labels import FREE_OBJECTIVES, texts_and_free_labels
    from nasrlm.predictor import RLMPredictor
    from nasrlm.training import TrainConfig

    table = BenchmarkTable.read_csv(args.data)
    space = _space(args.space or table.space)
    names = _comma_list(args.objectives) if args.objectives else table.names
    objectives = [table.objective(n) for n in names]
    values = np.stack([table.column(n) for n in names], axis=1)
    keep = ~np.isnan(values).all(axis=1)
    ids = [i for i, k in zip(table.ids, keep, strict=True) if k]
    values = values[keep]
    if len(ids) < 2:
        raise CliError(f"{args.data} has fewer than two rows with a value for {', '.join(names)}")
    if args.init and args.pretrain:
        raise CliError("--init and --pretrain: a base model is already pre-trained; give one of them")
    torch_threads(args.threads)
    device = _device(args.device)
    if args.init:
        predictor = _load_base(args.init, objectives, space.name)
        new = [n for n in names if n not in predictor.normalizers]
        print(f"fine-tuning {args.init} on {len(ids):,} architectures of {space.name}: {', '.join(names)}"
              + (f" (new: {', '.join(new)})" if new else ""), file=sys.stderr)
    else:
        print(f"training on {len(ids):,} architectures of {space.name}: {', '.join(names)}", file=sys.stderr)
        predictor = RLMPredictor.from_scratch(objectives, size=args.size, seed=args.seed)
    predictor.to(device)
    schedule = FINE_TUNE if args.init else TRAIN
    settings = schedule.settings(len(ids), args.batch_size)
    settings.update({k: v for k, v in (("max_epochs", args.epochs), ("learning_rate", args.lr)) if v})
    config = TrainConfig(batch_size=args.batch_size, seed=args.seed, max_minutes=args.max_minutes,
                         progress=not args.quiet, **settings)
    if args.pretrain:
        pre_ids = space.sample_ids(args.pretrain, seed=args.seed + 1)
        pre_texts, labels = texts_and_free_labels(space, pre_ids, progress=not args.quiet)
        print(f"pre-training on free labels of {len(pre_ids):,} architectures", file=sys.stderr)
        predictor.fit(pre_texts, labels, [o.name for o in FREE_OBJECTIVES], config)
    derived_from = None
    if args.equivalents:
        ids, values, derived_from = _with_equivalents(space, ids, values, objectives, args)
    prior = None if args.prior == "none" else args.prior
    if prior:
        print(f"{prior} prior on the free labels{'' if prior == 'line' else ' and graph labels'}: the model "
              "learns what it leaves unexplained", file=sys.stderr)
    # a base keeps the normalisers of what it knows (the free labels decoded first among them); prior
    # residuals and new columns get their own
    refit = list(names) if prior else (new if args.init else True)
    report = predictor.fine_tune(space, ids, values, names, config, prior=prior, refit_normalizers=refit,
                                 derived_from=derived_from, progress=not args.quiet)
    predictor.to("cpu").save(args.output)
    print(f"saved {args.output}: best epoch {report.best_epoch + 1} of {len(report.train_loss)} "
          f"({report.stopped_by}), {report.seconds:.0f} s", file=sys.stderr)
    if predictor.residual_weights:
        from nasrlm.predictor import MIN_VALIDATION_ROWS

        rows = len(report.validation_rows)
        source = (f"weighed on {rows} validation rows" if rows >= MIN_VALIDATION_ROWS else
                  f"not trusted: {rows} validation rows, {MIN_VALIDATION_ROWS} are needed to weigh it")
        print(f"share of the model's residual kept over the prior ({source}): "
              + ", ".join(f"{k} {v:.2f}" for k, v in predictor.residual_weights.items()), file=sys.stderr)
    return 0


def _load_base(path: str, objectives: Sequence[Any], space: str) -> Any:
    """``--init``/``--base``: a base model directory, or a one-line error naming it."""
    from nasrlm.predictor import RLMPredictor

    try:
        return RLMPredictor.from_base(path, objectives, space=space)
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CliError(f"{path}: not a usable base model ({error})") from None


def cmd_pretrain(args: argparse.Namespace) -> int:
    from nasrlm.predictor import RLMPredictor
    from nasrlm.pretraining import (
        ROWS_FILE,
        PretrainConfig,
        PretrainState,
        collect_tasks,
        fit_normalizers,
        load_tasks,
        parse_exclude,
        pretrain,
        save_tasks,
    )

    output = Path(args.output)
    device = _device(args.device)
    torch_threads(args.threads)
    exclude = parse_exclude(args.exclude or "")
    config = PretrainConfig(minutes=args.minutes, max_steps=args.max_steps, batch_size=args.batch_size,
                            learning_rate=args.lr, seed=args.seed, progress=not args.quiet)
    log = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    if args.resume:
        state = _resumable(output)
        if state.exclude != exclude:
            before, now = ",".join(state.exclude) or "(none)", ",".join(exclude) or "(none)"
            raise CliError(f"--resume: {output} was pre-trained with --exclude {before}, not {now}")
        predictor, tasks = RLMPredictor.load(output), load_tasks(output / ROWS_FILE)
        state.finished = False
        config.minutes += state.seconds / 60  # the budget counts what the earlier runs spent
        log(f"resuming {output} at step {state.step:,} ({state.seconds / 60:.1f} min spent)")
    else:
        _check_new_directory(output, "-o")
        spaces = _comma_list(args.spaces) if args.spaces else None
        for name in spaces or []:
            _space(name)
        data_dir = resolve_data_dir(args.data_dir)  # --data-dir, else $NASRLM_DATA
        if data_dir is None:
            log("no data directory (--data-dir or $NASRLM_DATA): pre-training on free labels only")
        tasks, objectives = collect_tasks(data_dir, exclude=exclude, spaces=spaces,
                                          free_rows=args.free_rows, max_rows=args.max_rows, seed=args.seed,
                                          progress=not args.quiet, log=log)
        predictor = RLMPredictor.from_scratch(objectives, size=args.size, seed=args.seed)
        fit_normalizers(predictor, tasks)
        output.mkdir(parents=True, exist_ok=True)
        save_tasks(tasks, output / ROWS_FILE)
        state = PretrainState.start(tasks, config, exclude)
    tags = {o for t in tasks for o in t.objectives}
    rows = sum(len(t.texts) for t in tasks)
    log(f"pre-training on {rows:,} rows of {len(tasks)} spaces, {len(tags)} tags, "
        f"for {config.minutes:.0f} min on {device}")
    state = pretrain(predictor, tasks, config, output=output, state=state, device=device)
    print(f"saved base model {output}: {state.step:,} steps in {state.seconds / 60:.1f} min, "
          f"final loss {state.loss[-1]:.3f}", file=sys.stderr)
    return 0


def _resumable(output: Path) -> Any:
    from nasrlm.pretraining import PRETRAINING_FILE, ROWS_FILE, PretrainState

    if not (output / PRETRAINING_FILE).is_file() or not (output / ROWS_FILE).is_file():
        raise CliError(f"--resume: {output} holds no pre-training run ({PRETRAINING_FILE}, {ROWS_FILE})")
    try:
        return PretrainState.load(output)
    except (ValueError, TypeError) as error:
        raise CliError(f"--resume: {output / PRETRAINING_FILE} is not readable: {error}") from None


def _check_new_directory(path: Path, option: str) -> None:
    """An output directory must be new or empty, so that nothing of an earlier run is overwritten."""
    if path.exists() and not path.is_dir():
        raise CliError(f"{option} {path}: exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        raise CliError(f"{option} {path}: directory is not empty (pick a new one, or --resume a "
                       "pre-training)")


def _device(name: str) -> str:
    """``--device``: ``cpu``, ``cuda`` (``cuda:N``), or ``auto`` (CUDA where torch sees a GPU)."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise CliError(f"--device {name}: torch sees no CUDA GPU on this machine (use --device cpu)")
    if name != "cpu" and not name.startswith("cuda"):
        raise CliError(f"--device {name!r}: expected cpu, cuda, cuda:N or auto")
    return name


def _with_equivalents(space: search_spaces.SearchSpace, ids: list[str], values: np.ndarray,
                      objectives: Sequence[Any], args: argparse.Namespace
                      ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``ids`` and ``values`` followed by ``--equivalents`` rows, and their ``derived_from``."""
    from nasrlm.augment import equivalent_rows

    names = [o.name for o in objectives]
    if args.carry is not None:
        carried = _comma_list(args.carry)
    else:
        carried = [o.name for o in objectives if o.unit == "%"]
    absent = sorted(set(carried) - set(names))
    if absent:
        raise CliError(f"--carry: {', '.join(absent)} not among the objectives trained ({', '.join(names)})")
    if not carried:
        raise CliError(f"--equivalents: no objective is in % ({', '.join(names)}); name those equivalent "
                       "architectures share with --carry, e.g. --carry acc")
    extra = equivalent_rows(space, ids, values, names, carried, copies=args.equivalents, seed=args.seed)
    print(f"{len(extra.arch_ids):,} equivalent architectures of {len(set(extra.derived_from)):,} labelled "
          f"ones carry {', '.join(carried)}", file=sys.stderr)
    return extra.joined(ids, values)


def torch_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def cmd_predict(args: argparse.Namespace) -> int:
    from nasrlm.predictor import RLMPredictor

    device = _device(args.device)
    predictor = RLMPredictor.load(args.model).to(device)
    space = _space(args.space)
    ids = _arch_ids(space, args)
    predictions = predictor.predict(_texts(space, ids), num_samples=args.samples, seed=args.seed,
                                    **predictor.known_labels(space, ids))
    out = {i: {k: v.to_dict() for k, v in p.items()} for i, p in zip(ids, predictions, strict=True)}
    print(json.dumps(out, indent=2))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from scipy import stats

    from nasrlm.data import BenchmarkTable
    from nasrlm.predictor import RLMPredictor

    device = _device(args.device)
    predictor = RLMPredictor.load(args.model).to(device)
    table = BenchmarkTable.read_csv(args.data)
    space = _space(args.space or table.space)
    names = ([n.strip() for n in args.objectives.split(",")] if args.objectives
             else [n for n in table.names if n in predictor.trained_objectives])
    if not names:
        raise CliError(f"none of {args.data}'s columns ({', '.join(table.names)}) is predicted by "
                       f"{args.model}")
    truth = np.stack([table.column(n) for n in names], axis=1)
    samples = predictor.sample(_texts(space, table.ids), names, num_samples=args.samples, seed=args.seed,
                               progress=not args.quiet, **predictor.known_labels(space, table.ids))
    median = np.median(samples, axis=1)
    result = {}
    for k, name in enumerate(names):
        known = ~np.isnan(truth[:, k])
        result[name] = {"kendall": float(stats.kendalltau(median[known, k], truth[known, k]).statistic),
                        "spearman": float(stats.spearmanr(median[known, k], truth[known, k]).statistic),
                        "n": int(known.sum())}
    print(json.dumps(result, indent=2))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from nasrlm.search import search_job, summary

    space = _space(args.space)
    names = _comma_list(args.objectives)
    compare = _comma_list(args.compare or "")
    unknown = [n for n in compare if n not in SAMPLER_NAMES]
    if unknown:
        raise CliError(f"--compare: unknown sampler {unknown[0]!r}; choose from {', '.join(SAMPLER_NAMES)}")
    torch_threads(args.threads)
    out = Path(args.out or f"runs/{space.name}-{args.sampler}-seed{args.seed}")
    options = _rlm_options(args.rlm_option)
    if args.base:
        _load_base(args.base, [], space.name)  # a bad base is a one-line error now, not at the first fit
        options["base"] = args.base
    if args.device != "cpu":
        options["device"] = _device(args.device)
    job = search_job(space, names, budget=args.budget, out_dir=out, sampler=args.sampler, seed=args.seed,
                     storage=args.storage, study_name=args.study_name, data_dir=args.data_dir, db=args.db,
                     compare=compare, sampler_options=options, progress=not args.quiet,
                     command=" ".join(["nasrlm", *sys.argv[1:]]))
    for line in summary(job):
        print(line)
    return 0


def _rlm_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values are JSON where they parse (2.5, true, {"d_model": 32}), else strings."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--rlm-option takes KEY=VALUE, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def cmd_demo(args: argparse.Namespace) -> int:
    import time

    from nasrlm.search import search_job, summary

    start = time.perf_counter()
    data_dir = resolve_data_dir(args.data_dir)
    space = _space("nb201")
    names = ["acc", "pixel3"] if data_dir is not None else ["acc", "cpu-1t-b1"]
    where = (f"published tables in {data_dir}" if data_dir is not None else
             "accuracy from analog-nasbench, latency measured live on this CPU")
    print(f"nasrlm demo: NAS-Bench-201, maximise {names[0]} and minimise {names[1]} ({where}); "
          f"{args.budget} evaluations with the RLM sampler, random search for comparison", file=sys.stderr)
    torch_threads(args.threads)
    job = search_job(space, names, budget=args.budget, out_dir=args.out, sampler="rlm", seed=args.seed,
                     data_dir=data_dir, compare=["random"], progress=not args.quiet,
                     command=" ".join(["nasrlm", *sys.argv[1:]]))
    for line in summary(job):
        print(line)
    seconds = time.perf_counter() - start
    print(f"done in {seconds:.0f} s; open {job.files['pareto']} and {job.files['report']}")
    return 0


# --- parser ---------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nasrlm", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"nasrlm {__version__}")
    plugin_help = ("import this module or .py file first, so the search spaces it registers exist "
                   f"(repeatable; also ${PLUGINS_ENV}, comma-separated)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE|FILE.py", help=plugin_help)
    # the same option after the command (`nasrlm search --plugin my.py ...`), collected separately
    # because a subparser's default would overwrite what was given before the command
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--plugin", action="append", default=[], dest="command_plugins",
                         metavar="MODULE|FILE.py", help=plugin_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, **options: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[plugins], **options)

    p = command("spaces", help="list the search spaces")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_spaces)

    p = command("export", help="architecture -> canonical ONNX text or ONNX model")
    p.add_argument("space")
    _add_selection(p)
    p.add_argument("--format", choices=["text", "jsonl", "onnx"], default="text",
                   help="text (default; '# id' headers between several), jsonl, or onnx files")
    p.add_argument("-o", "--output", help="file (or directory for several onnx models); default stdout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_export)

    p = command("measure", help="time architectures with onnxruntime on this machine (resumable)")
    p.add_argument("space")
    p.add_argument("--device", default="cpu-1t-b1",
                   help="profile 'cpu-<threads>t-b<batch>' or 'cuda-b<batch>' (default cpu-1t-b1)")
    _add_selection(p, allow_all=True)
    p.add_argument("--db", default=_db_default(),
                   help=f"SQLite latency store (default $NASRLM_DB or {DEFAULT_DB})")
    p.add_argument("--warmup", type=int, default=10, help="untimed runs per architecture (default 10)")
    p.add_argument("--runs", type=int, default=50, help="timed runs per architecture (default 50)")
    p.add_argument("--json", action="store_true", help="print one JSON line per architecture")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_measure)

    p = command("data", help="a table of objectives (published or measured), one row per architecture")
    p.add_argument("space")
    p.add_argument("--objectives", required=True, help="comma-separated names, e.g. acc,pixel3,cpu-1t-b1")
    p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
    p.add_argument("--db", default=_db_default(), help="latency store for measured profiles")
    p.add_argument("-o", "--output", required=True, help="CSV file to write ('-' for stdout)")
    p.set_defaults(func=cmd_data)

    p = command("train", help="train a regression language model on a 'nasrlm data' table")
    p.add_argument("--data", required=True, help="CSV written by 'nasrlm data'")
    p.add_argument("-o", "--output", required=True, help="model directory to write")
    p.add_argument("--objectives", help="columns to learn, in decode order (default: all, as in the table)")
    p.add_argument("--space", help="search space (default: the one recorded with the table)")
    p.add_argument("--size", choices=list(SIZES), default="small", help="model size (default small)")
    p.add_argument("--init", metavar="BASE",
                   help="fine-tune the base model in directory BASE ('nasrlm pretrain') instead of training "
                        "from scratch; columns it knows keep their tags, new ones get new tags")
    p.add_argument("--pretrain", type=int, default=0, metavar="N",
                   help="first pre-train on free labels (params, MACs) of N random architectures")
    p.add_argument("--prior", choices=("none", *PRIOR_KINDS), default="forest",
                   help="learn each objective as what a prior leaves unexplained: 'line' (a straight line "
                        "through the best free label: params, MACs), or on the free and graph labels "
                        "'forest', 'ridge', 'trend-forest' (a line plus a forest on what it leaves) or "
                        "'auto' (per objective, forest or ridge, whichever ranks the training rows best out "
                        "of sample); predict/eval compute the labels it reads (default: %(default)s)")
    p.add_argument("--equivalents", type=int, default=0, metavar="K",
                   help="also train on up to K architectures equivalent to each labelled one (e.g. NB201 "
                        "cells differing only in dead edges), labelled with the --carry objectives only")
    p.add_argument("--carry", help="objectives equivalent architectures share (default: those in %%)")
    p.add_argument("--epochs", type=int,
                   help=f"maximum epochs, early stopping picks the best (default {TRAIN.max_epochs}; "
                        f"with --init, enough for {FINE_TUNE.steps} steps)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, help=f"peak learning rate (AdamW; default {TRAIN.learning_rate:g}, "
                                            f"{FINE_TUNE.learning_rate:g} with --init)")
    p.add_argument("--max-minutes", type=float, help="time budget per training phase")
    _add_device(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_train)

    p = command("pretrain", help="pre-train one base model on every published table (then: train --init)")
    p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
    p.add_argument("-o", "--output", required=True, help="base model directory to write (new or empty)")
    p.add_argument("--exclude", metavar="GLOBS",
                   help="columns to leave out, comma-separated globs over space:objective, "
                        "e.g. 'nb201:*acc*,*:pixel3' (a bare space name leaves out all its columns)")
    p.add_argument("--spaces", help="comma-separated spaces (default: every registered one)")
    p.add_argument("--minutes", type=float, default=PRETRAIN_MINUTES,
                   help=f"time budget (default {PRETRAIN_MINUTES:g}); the learning rate decays over it")
    p.add_argument("--max-steps", type=int, help="stop after this many steps")
    p.add_argument("--max-rows", type=int, help="labelled rows per space (default: all)")
    p.add_argument("--free-rows", type=int, default=500,
                   help="random architectures per space with free labels only (default 500)")
    p.add_argument("--size", choices=list(SIZES), default="small", help="model size (default small)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-4, help="peak learning rate (default 5e-4)")
    p.add_argument("--resume", action="store_true", help="continue the run saved in -o for --minutes more")
    _add_device(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_pretrain)

    p = command("predict", help="predicted distribution of every objective, as JSON")
    p.add_argument("model", help="model directory written by 'nasrlm train'")
    p.add_argument("--space", required=True)
    _add_selection(p)
    p.add_argument("--samples", type=int, default=64, help="decoder samples per architecture")
    _add_device(p)
    p.set_defaults(func=cmd_predict)

    p = command("eval", help="rank correlation of predictions with a 'nasrlm data' table, as JSON")
    p.add_argument("model")
    p.add_argument("--data", required=True)
    p.add_argument("--space", help="search space (default: the one recorded with the table)")
    p.add_argument("--objectives", help="columns to evaluate (default: every one the model predicts)")
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    _add_device(p)
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_eval)

    p = command("objectives", help="list the objectives 'nasrlm data' knows for a space")
    p.add_argument("space")
    p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
    p.set_defaults(func=cmd_objectives)

    p = command("search", help="multi-objective architecture search; writes plots and a report")
    p.add_argument("space")
    p.add_argument("--objectives", required=True,
                   help="comma-separated, e.g. acc,pixel3 (tables) or acc,cpu-1t-b1 (measured live)")
    p.add_argument("--budget", type=int, required=True, help="objective evaluations (completed trials)")
    p.add_argument("--sampler", choices=list(SAMPLER_NAMES), default="rlm",
                   help="default rlm; tpe-mv: multivariate TPE; gp: Optuna's Gaussian-process sampler")
    p.add_argument("--compare", metavar="NAMES", help="also run these samplers, e.g. random,nsga2,tpe")
    p.add_argument("--rlm-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an RLMSampler setting, e.g. num_candidates=4000 or temperature=2 (repeatable; "
                        "see the README)")
    p.add_argument("--base", metavar="BASE",
                   help="start every refit of the rlm sampler from this base model ('nasrlm pretrain')")
    p.add_argument("--device", default="cpu",
                   help="where the rlm sampler's model runs: cpu (default), cuda, cuda:N or auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--storage", help="Optuna storage URL, e.g. sqlite:///study.db (resumes); default memory")
    p.add_argument("--study-name", help="default <space>-<sampler>-seed<seed>")
    p.add_argument("--out", help="output directory (default runs/<space>-<sampler>-seed<seed>)")
    p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
    p.add_argument("--db", help="latency store for measured objectives (default <out>/latency.db)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_search)

    p = command("demo", help="the main job: NB201 accuracy vs latency search, plots in runs/demo")
    p.add_argument("--budget", type=int, default=100, help="evaluations (default 100)")
    p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
    p.add_argument("--data-dir", help="use published tables (acc, pixel3) instead of live measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        load_plugins([*os.environ.get(PLUGINS_ENV, "").split(","), *args.plugin, *args.command_plugins])
        return args.func(args)
    except (CliError, ValueError, KeyError, FileNotFoundError, RuntimeError) as error:
        message = str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)
        print(f"nasrlm: error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:  # e.g. `nasrlm export ... | head`
        return 0
