"""``nasrlm predict`` and ``nasrlm eval``: a trained model (or the shipped base) on architectures."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from nasrlm.cli._common import (
    CliError,
    Command,
    _add_device,
    _add_label_options,
    _add_selection,
    _comma_list,
    _count,
    _device,
)
from nasrlm.cli._inputs import (
    _arch_ids,
    _check_table_ids,
    _input_columns,
    _read_table,
    _space,
    _table_columns,
    _table_space,
)
from nasrlm.errors import NasrlmError


def _zero_shot(space: Any) -> Any:
    """The shipped base, predicting ``space`` zero-shot; a one-line error where it has nothing to say."""
    from nasrlm.rlm.predictor import RLMPredictor

    try:
        predictor = RLMPredictor.zero_shot(space.name)
    except NasrlmError as error:
        raise CliError(str(error)) from None
    if not predictor.predicts:
        raise CliError(f"the shipped base model predicts nothing of {space.name} zero-shot: give a model "
                       "directory ('nasrlm train')")
    seen = "" if space.name in predictor.spaces else ", a space it never saw"
    columns = predictor.space_columns()
    print(f"zero-shot with the shipped base model ({space.name}{seen}): {', '.join(predictor.predicts)}"
          + (f"; --objectives may also name {', '.join(columns)}" if columns else ""), file=sys.stderr)
    return predictor


def _predicted(predictor: Any, objectives: str | None, model: str) -> tuple[str, ...]:
    """``--objectives`` of predict: the model's default, or names it was trained on for this space (a base's
    tags of other spaces, ``nb101:acc``, are not), else one line."""
    from nasrlm.priors.transfer import TAG_SEPARATOR  # loaded with the model already

    if not objectives:
        return predictor.predicts
    names = tuple(_comma_list(objectives))
    untrained = [n for n in names if n not in predictor.lm.trained_objectives or TAG_SEPARATOR in n]
    if untrained:
        known = dict.fromkeys((*predictor.predicts, *predictor.space_columns()))
        raise CliError(f"--objectives: {model} was never trained on {', '.join(untrained)} of this space "
                       f"(it predicts {', '.join(known)})")
    return names


def _load_model_for(path: str, space: Any) -> Any:
    """The model at ``path``, refused (one line) if it records the spaces it was trained on and
    ``space`` is not among them."""
    from nasrlm.rlm.predictor import RLMPredictor

    predictor = RLMPredictor.load(path)
    if predictor.spaces and space.name not in predictor.spaces:
        raise CliError(f"{path} was trained on {', '.join(predictor.spaces)} architectures, not "
                       f"{space.name}'s: its predictions for them would be extrapolation")
    return predictor


def _add_equivalents(p: argparse.ArgumentParser) -> None:
    """``--equivalents`` of predict and eval (train's adds training rows instead)."""
    from nasrlm.rlm.augment import EQUIVALENT_READINGS

    p.add_argument("--equivalents", type=_count, default=EQUIVALENT_READINGS, metavar="K",
                   help="read an accuracy through up to K texts of the architecture's equivalence class "
                        "(e.g. NB201 cells differing only in dead edges), samples pooled, so that equivalent "
                        "architectures asked together get one prediction; latencies always through its own "
                        "text (default: %(default)s; 0 or 1: its own text only)")


def _check_samples(samples: int) -> None:
    """``--samples``: at least one decoded sample per architecture (0 fails deep inside torch)."""
    if samples < 1:
        raise CliError(f"--samples {samples}: expected 1 or more decoder samples")


class Predict(Command):
    name = "predict"
    help = "predicted distribution of every objective, as JSON"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("model", nargs="?",
                       help="model directory written by 'nasrlm train' (default: the base model shipped in "
                            "the package, zero-shot)")
        p.add_argument("--space", required=True)
        p.add_argument("--objectives",
                       help="comma-separated objectives to predict, in decode order (default: those the "
                            "model was trained on last; zero-shot, accuracy_rank)")
        _add_selection(p)
        p.add_argument("--samples", type=int, default=64, help="decoder samples per architecture")
        _add_equivalents(p)
        p.add_argument("--inputs", metavar="CSV",
                       help="a 'nasrlm data' table holding, for every architecture predicted, the columns "
                            "the model's prior reads ('nasrlm train --inputs')")
        _add_device(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (on stderr)")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.rlm.tuning import measured_inputs, predict_archs

        _check_samples(args.samples)
        device = _device(args.device)
        space = _space(args.space)
        ids = _arch_ids(space, args)
        if args.model:
            predictor = _load_model_for(args.model, space).to(device)
        else:
            predictor = _zero_shot(space).to(device)
        objectives = _predicted(predictor, args.objectives, args.model or "the shipped base model")
        read, inputs = measured_inputs(predictor), None
        if read and not args.inputs:
            raise CliError(f"{args.model}'s prior reads {', '.join(read)} of every architecture: give a "
                           "table of them with --inputs CSV")
        if read:
            inputs = _input_columns(_read_table(args.inputs), read, ids, args.inputs, "--inputs", args.model)
        predictions = predict_archs(predictor, space, ids, objectives, equivalents=args.equivalents,
                                    num_samples=args.samples, seed=args.seed,
                                    progress=not args.quiet, inputs=inputs)
        out = {i: {k: v.to_dict() for k, v in p.items()} for i, p in zip(ids, predictions, strict=True)}
        print(json.dumps(out, indent=2))
        return 0


class Eval(Command):
    name = "eval"
    help = ("rank correlation of predictions with a 'nasrlm data' table, and the share of its values inside "
            "the central 80%% of the samples, as JSON")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("model")
        p.add_argument("--data", required=True)
        p.add_argument("--space", help="search space (default: the one recorded with the table)")
        p.add_argument("--objectives", help="columns to evaluate (default: every one the model predicts)")
        p.add_argument("--samples", type=int, default=64, help="decoder samples per architecture")
        _add_equivalents(p)
        p.add_argument("--seed", type=_count, default=0)
        _add_device(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true")

    def run(self, args: argparse.Namespace) -> int:
        from scipy import stats

        from nasrlm.rlm.calibration import central_coverage
        from nasrlm.rlm.tuning import measured_inputs, sample_archs

        _check_samples(args.samples)
        device = _device(args.device)
        table = _read_table(args.data)
        space = _table_space(args.space, table, args.data)
        _check_table_ids(space, table.ids, args.data)
        predictor = _load_model_for(args.model, space).to(device)
        if args.objectives:
            names = _table_columns(table, args.objectives, args.data)
            untrained = [n for n in names if n not in predictor.lm.trained_objectives]
            if untrained:
                raise CliError(f"--objectives: {args.model} was never trained on {', '.join(untrained)} "
                               f"(it predicts {', '.join(predictor.lm.trained_objectives)})")
        else:
            names = [n for n in table.names if n in predictor.lm.trained_objectives]
        if not names:
            raise CliError(f"none of {args.data}'s columns ({', '.join(table.names)}) is predicted by "
                           f"{args.model}")
        truth = np.stack([table.column(n) for n in names], axis=1)
        read = measured_inputs(predictor)
        inputs = _input_columns(table, read, table.ids, args.data, "--data", args.model) if read else None
        samples = sample_archs(predictor, space, table.ids, names, equivalents=args.equivalents,
                               num_samples=args.samples, seed=args.seed, progress=not args.quiet,
                               inputs=inputs)
        median = np.median(samples, axis=1)
        coverage = central_coverage(samples, truth)
        result = {}
        for k, name in enumerate(names):
            known = ~np.isnan(truth[:, k])
            predicted, actual = median[known, k], truth[known, k]
            result[name] = {"kendall": _json_number(stats.kendalltau(predicted, actual).statistic),
                            "spearman": _json_number(stats.spearmanr(predicted, actual).statistic),
                            "coverage80": _json_number(coverage[k]),
                            "n": int(known.sum())}
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0


def _json_number(value: float) -> float | None:
    """``value``, or ``None`` (JSON ``null``) where it is undefined: a rank correlation of constant
    predictions, or of fewer than two rows, is NaN, which JSON has no word for."""
    return float(value) if np.isfinite(value) else None
