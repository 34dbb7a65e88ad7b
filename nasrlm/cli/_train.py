"""``nasrlm train`` (a regression language model on a table) and ``nasrlm fit`` (one architecture's
network on image data)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import search_spaces
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
from nasrlm.cli._inputs import (
    _check_table_ids,
    _input_columns,
    _load_base,
    _parse_arch,
    _read_table,
    _space,
    _table_columns,
    _table_space,
)
from nasrlm.rlm.bases import SHIPPED
from nasrlm.rlm.recipes import (
    ALONE_TUNE,
    DECODER_TUNE,
    FINE_TUNE,
    READ_LATENCIES,
    SIZES,
    TRAIN,
    TRAIN_SIZE,
    TrainConfig,
    fine_tune_recipe,
)


class Train(Command):
    name = "train"
    help = "train a regression language model on a 'nasrlm data' table"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.priors.feature_prior import DEFAULT_PRIOR, PRIOR_KINDS  # RLMPredictor.fit's priors

        p.add_argument("--data", required=True, help="CSV written by 'nasrlm data'")
        p.add_argument("-o", "--output", required=True, help="model directory to write")
        p.add_argument("--objectives",
                       help="columns to learn, in decode order (default: all, as in the table)")
        p.add_argument("--space", help="search space (default: the one recorded with the table)")
        start = p.add_mutually_exclusive_group()
        _add_base(start, "the base model to fine-tune: 'shipped' (the default, the one in the package) or a "
                         "directory 'nasrlm pretrain' wrote; columns it knows keep their tags, new ones get "
                         "new tags")
        start.add_argument("--scratch", action="store_true",
                           help="no base: train a fresh model instead of fine-tuning one")
        start.add_argument("--size", choices=list(SIZES),
                           help=f"train a fresh model of this size (implies --scratch; its default is "
                                f"{TRAIN_SIZE})")
        p.add_argument("--pretrain", type=_count, default=0, metavar="N",
                       help="first pre-train a fresh model on free labels (params, MACs) of N random "
                            "architectures (implies --scratch)")
        p.add_argument("--prior", choices=("none", *PRIOR_KINDS), default=DEFAULT_PRIOR,
                       help="a prior beside the language model: on the free and graph labels (or "
                            "--inputs) 'forest', 'ridge', 'trend-forest' (a line plus a forest on what it "
                            "leaves), 'gp' (a Gaussian process) or 'auto' (per objective the simplest of a "
                            "line through one label, ridge, gp and forest that ranks the training rows out "
                            "of sample within noise of the best): fine-tuning a base, "
                            "the model learns each objective from the text alone and each prediction blends "
                            "it with the prior by the share that ranks rows it did not train on best; from "
                            "scratch, the model learns what the prior leaves unexplained, as it does with "
                            "'line' (a straight line through the best free label: params, MACs); 'none': "
                            "the language model alone; predict/eval compute the labels a prior reads "
                            "(default: %(default)s)")
        p.add_argument("--inputs", metavar="COLS",
                       help="comma-separated columns of the table known for every row (the latencies of "
                            "devices already measured) that the prior reads instead of the free and graph "
                            "labels; eval and predict then need them too")
        p.add_argument("--read", type=_count, default=READ_LATENCIES, metavar="K",
                       help="for a latency column the base never decoded (a new device), the model first "
                            "reads K of the latencies of this space it does decode, those whose reading "
                            "ranks the labelled rows best, and predicts the new one after them (0: none; "
                            "default: %(default)s)")
        p.add_argument("--equivalents", type=_count, default=0, metavar="K",
                       help="also train on up to K architectures equivalent to each labelled one (e.g. NB201 "
                            "cells differing only in dead edges), labelled with the --carry objectives only")
        p.add_argument("--carry", help="objectives equivalent architectures share (default: those in %%)")
        p.add_argument("--epochs", type=_positive_int,
                       help=f"maximum epochs, early stopping picks the best (default: enough for "
                            f"{DECODER_TUNE.steps} steps when fine-tuning a base ("
                            f"{DECODER_TUNE.unvalidated_steps} below "
                            f"{DECODER_TUNE.min_validation_rows} rows; "
                            f"{FINE_TUNE.steps} with --prior line; with --prior none "
                            f"{ALONE_TUNE.steps_per_row:g} a row up to {ALONE_TUNE.steps:,}, no early stop, "
                            f"the last epoch kept), {TRAIN.max_epochs} from scratch)")
        p.add_argument("--batch-size", type=_positive_int, default=TrainConfig.batch_size)
        p.add_argument("--lr", type=_positive_float,
                       help=f"peak learning rate (AdamW; default {FINE_TUNE.learning_rate:g} when "
                            f"fine-tuning a base, {ALONE_TUNE.learning_rate:g} with --prior none, "
                            f"{TRAIN.learning_rate:g} from scratch)")
        p.add_argument("--max-minutes", type=_positive_float,
                       help=f"time budget per training phase (per decoder where --prior none pools "
                            f"{ALONE_TUNE.members}, from {ALONE_TUNE.members_from} rows)")
        _add_device(p)
        p.add_argument("--seed", type=_count, default=0)
        _add_threads(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.free_labels import FREE_OBJECTIVES, texts_and_free_labels
        from nasrlm.rlm.predictor import RLMPredictor
        from nasrlm.rlm.tuning import fine_tune

        _check_output_dir(args.output, "-o")  # before training, not after
        table = _read_table(args.data)
        space = _table_space(args.space, table, args.data)
        read = _table_columns(table, args.inputs, args.data, "--inputs") if args.inputs else []
        if read and args.prior in ("none", "line"):
            raise CliError(f"--inputs is read by a feature prior, not by --prior {args.prior}")
        names = [n for n in _table_columns(table, args.objectives, args.data) if n not in read]
        if not names:
            raise CliError(f"--inputs names every column of {args.data}: nothing is left to learn")
        objectives = [table.objective(n) for n in names]
        values = np.stack([table.column(n) for n in names], axis=1)
        keep = ~np.isnan(values).all(axis=1)
        ids = [i for i, k in zip(table.ids, keep, strict=True) if k]
        values = values[keep]
        _check_table_ids(space, ids, args.data)
        inputs = _input_columns(table, read, ids, args.data, "--data", "--inputs") if read else None
        if len(ids) < 2:
            raise CliError(f"{args.data} has fewer than two rows with a value for {', '.join(names)}")
        for name, column in zip(names, values.T, strict=True):
            if np.count_nonzero(~np.isnan(column)) < 2:
                raise CliError(f"{args.data}: column {name!r} has fewer than two values (leave it out with "
                               f"--objectives)")
            infinite = np.flatnonzero(np.isinf(column))
            if infinite.size:  # a model would learn it as the column's best or worst value
                raise CliError(f"{args.data}: column {name!r} of {ids[infinite[0]]} is "
                               f"{column[infinite[0]]:g}, which is not a measurement (leave a missing value "
                               "empty)")
        scratch = args.scratch or args.size is not None or args.pretrain > 0
        if args.base and args.pretrain:
            raise CliError("--base and --pretrain: a base model is already pre-trained; give one of them")
        torch_threads(args.threads)
        device = _device(args.device)
        if not scratch:
            base = args.base or SHIPPED
            predictor = _load_base(base, objectives, space.name)
            new = [n for n in names if n not in predictor.lm.normalizers]
            named = "the shipped base model" if base == SHIPPED else base
            print(f"fine-tuning {named} on {len(ids):,} architectures of {space.name}: {', '.join(names)}"
                  + (f" (new: {', '.join(new)})" if new else ""), file=sys.stderr)
        else:
            print(f"training on {len(ids):,} architectures of {space.name}: {', '.join(names)}",
                  file=sys.stderr)
            predictor = RLMPredictor.from_scratch(objectives, size=args.size or TRAIN_SIZE, seed=args.seed)
        predictor.to(device)
        # fine-tuning a base, the language model reads the text as the base learned to and learns to decode
        # each objective from it (the decoder alone), alone or blended with a feature prior beside it: the
        # recipe fine_tune follows by default
        blend = not scratch and args.prior not in ("none", "line")
        given = {k: v for k, v in (("max_epochs", args.epochs), ("learning_rate", args.lr)) if v}
        fields = {"seed": args.seed, "max_minutes": args.max_minutes, "progress": not args.quiet, **given}
        recipe = TRAIN if scratch else fine_tune_recipe(alone=args.prior == "none", blend=blend)
        config = recipe.config(len(ids), batch_size=args.batch_size, **fields)
        if args.pretrain:
            pre_ids = space.sample_ids(args.pretrain, seed=args.seed + 1)
            pre_texts, labels = texts_and_free_labels(space, pre_ids, progress=not args.quiet)
            print(f"pre-training on free labels of {len(pre_ids):,} architectures", file=sys.stderr)
            predictor.fit(pre_texts, labels, [o.name for o in FREE_OBJECTIVES], config)
        derived_from = None
        if args.equivalents and read:
            raise CliError("--equivalents and --inputs: an equivalent architecture's --inputs are not known")
        if args.equivalents:
            ids, values, derived_from = _with_equivalents(space, ids, values, objectives, args)
        prior = None if args.prior == "none" else args.prior
        on = (", ".join(read) if read else
              f"the free labels{'' if prior == 'line' else ' and graph labels'}")
        if blend:
            print(f"{prior} prior on {on} beside the language model, which learns each objective from the "
                  "text alone", file=sys.stderr)
        elif prior:
            print(f"{prior} prior on {on}: the model learns what it leaves unexplained", file=sys.stderr)
        # a base keeps the normalisers of what it knows (the free labels decoded first among them); prior
        # residuals and new columns get their own
        refit = list(names) if prior and not blend else (True if scratch else new)
        report = fine_tune(predictor, space, ids, values, names, config, prior=prior, inputs=inputs,
                           prior_mode="blend" if blend else "residual", refit_normalizers=refit,
                           derived_from=derived_from, progress=not args.quiet,
                           read_latencies=args.read)
        if predictor.lm.reads_first:
            reads = ", ".join(predictor.lm.reads_first)
            print(f"the model reads {reads} first (the latencies it knows whose "
                  "reading ranks the labelled rows best) and predicts after them", file=sys.stderr)
        if prior not in (None, "line") and not read and predictor.transfer is not None:
            print(f"the prior also reads what {predictor.transfer.sources[0].space}'s published accuracy "
                  "says of each architecture (the base's transfer forest of the space most like this one)",
                  file=sys.stderr)
        predictor.to("cpu").save(args.output)
        print(f"saved {args.output}: best epoch {report.best_epoch + 1} of {len(report.train_loss)} "
              f"({report.stopped_by}), {report.seconds:.0f} s", file=sys.stderr)
        if predictor.prior_part is not None:
            from nasrlm.rlm.predictor import MIN_VALIDATION_ROWS

            rows = len(report.validation_rows)
            shares = ", ".join(f"{k} {v:.2f}" for k, v in predictor.prior_part.weights.items())
            if rows >= MIN_VALIDATION_ROWS:
                source = f"weighed on {rows} validation rows"
            elif blend and report.cross_fits:
                source = f"weighed on {report.cross_fits} cross-fits"
            else:
                source = f"not trusted: {rows} validation rows, {MIN_VALIDATION_ROWS} are needed to weigh it"
            what = "the language model's share of each prediction" if blend else \
                "share of the model's residual kept over the prior"
            print(f"{what} ({source}): {shares}", file=sys.stderr)
        return 0


def _with_equivalents(space: search_spaces.SearchSpace, ids: list[str], values: np.ndarray,
                      objectives: Sequence[Any], args: argparse.Namespace
                      ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``ids`` and ``values`` followed by ``--equivalents`` rows, and their ``derived_from``."""
    from nasrlm.rlm.augment import equivalent_rows, shared_by_equivalents

    names = [o.name for o in objectives]
    if args.carry is not None:
        carried = _comma_list(args.carry)
    else:
        carried = [o.name for o in objectives if shared_by_equivalents(o)]
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


class Fit(Command):
    name = "fit"
    help = "train the network of one architecture on image data (weights, trained ONNX)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.networks import FitRecipe, default_recipe

        recipe, digits = FitRecipe(), default_recipe("digits")
        p.add_argument("space")
        p.add_argument("--arch", required=True, metavar="ID", help="the architecture's id")
        p.add_argument("--dataset", default="digits",
                       help="digits (default: scikit-learn's 8x8 digits, no download), cifar10 or cifar100 "
                            "(extracted Python archives in --data-dir), or a directory with train/ and test/ "
                            "folders of one folder per class")
        p.add_argument("--data-dir", help="the directory holding cifar-10-batches-py/ or cifar-100-python/")
        p.add_argument("-o", "--output", required=True, help="directory to write (new or empty)")
        p.add_argument("--epochs", type=_positive_int, default=recipe.epochs, help="default %(default)s")
        p.add_argument("--batch-size", type=_positive_int,
                       help=f"default {recipe.batch_size} (NAS-Bench-201's), {digits.batch_size} on digits "
                            "(1,347 training images)")
        p.add_argument("--lr", type=_positive_float,
                       help=f"peak learning rate of SGD with Nesterov momentum {recipe.momentum:g}, weight "
                            f"decay {_number(recipe.weight_decay)}, annealed to 0 by a cosine "
                            f"(NAS-Bench-201's schedule; default {_number(recipe.learning_rate)}, "
                            f"{_number(digits.learning_rate)} on digits)")
        p.add_argument("--no-augment", action="store_true",
                       help="no random crops and flips (default: crops, and flips where the data allows)")
        _add_device(p)
        p.add_argument("--seed", type=_count, default=0, help="initial weights, batch order, augmentation")
        _add_threads(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        """Train one architecture's network on image data; save its weights, trained ONNX and a report."""
        from dataclasses import asdict, replace

        import onnx
        from safetensors.torch import save_model

        from nasrlm.images import BUILT_IN, load_images
        from nasrlm.networks import default_recipe, fit_network, trained_onnx

        output = Path(args.output)
        _check_new_directory(output, "-o")
        if args.data_dir is not None and args.dataset not in BUILT_IN[1:]:
            raise CliError(f"--data-dir is where cifar10 / cifar100 are extracted; --dataset {args.dataset} "
                           "does not read it")
        space = _space(args.space)
        arch = _parse_arch(space, args.arch, "--arch")
        torch_threads(args.threads)
        device = _device(args.device)
        input_shape = tuple(space.input_shape_of(arch))
        data = load_images(args.dataset, input_shape[1:], args.data_dir)
        recipe = default_recipe(args.dataset, args.epochs, args.seed)
        recipe = replace(recipe, batch_size=args.batch_size or recipe.batch_size,
                         learning_rate=args.lr or recipe.learning_rate, augment=not args.no_augment)
        arch_id = space.arch_id(arch)
        print(f"training {space.name} {arch_id} on {data!r} ({recipe.epochs} epochs, batch "
              f"{recipe.batch_size}, peak rate {recipe.learning_rate:g}, {device})", file=sys.stderr)
        module = space.to_torch(arch, seed=args.seed)
        result = fit_network(module, data, recipe, device=device, progress=not args.quiet)
        output.mkdir(parents=True, exist_ok=True)
        trained = trained_onnx(module, space.to_onnx(arch, seed=args.seed), (1, *data.image_shape))
        save_model(module, str(output / "weights.safetensors"))
        onnx.save(trained, output / "model.onnx")
        report = {"space": space.name, "arch": arch_id, "dataset": repr(data), "device": device,
                  "recipe": asdict(recipe), **result.to_json()}
        (output / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"test accuracy {result.test_accuracy[-1]:.2f} % after {len(result.test_accuracy)} epochs (the "
              f"weights saved; {result.seconds:.0f} s); wrote {output}/weights.safetensors, model.onnx, "
              "report.json")
        return 0
