"""Few-shot transfer from a pre-trained base model (issue 20's bars), against the baselines that beat it.

    nasrlm pretrain --data-dir ../shared/data -o BASE --exclude 'nb201:*acc*,*:titan_rtx_*,...'
    python experiments/transfer_benchmark.py --data-dir ../shared/data --base BASE --seeds 0,1,2

Two tasks, each on fixed splits (seed s: a permutation of the table drawn with ``default_rng(s)``):

- ``acc``: NAS-Bench-201 CIFAR-10 test accuracy (200 epochs; NAS-Bench-101's with ``--acc-spaces``)
  from N labelled cells, Kendall τ on 5,000 other cells. The base must have excluded every accuracy
  column of that space (checked: no ``nb201:*acc*`` tag).
- ``unseen``: latency on a device the base never saw (every one of its tags excluded, checked), from 20
  measured architectures, Spearman ρ on 3,000 others (NB201) or on the rest of the 5,000 (FBNet).

Methods: ``rlm`` (the base fine-tuned: ``RLMPredictor.from_base`` + ``fit``, the language model alone, its
encoder frozen as ``nasrlm train --prior none`` keeps it unless ``--train-encoder``), ``rlm-prior`` (the same,
learning the residual of the free-label line prior), ``rlm-graph`` (accuracy: the residual of a feature prior
on the free and graph labels, ``--prior-kind``, default ``auto``; for a device too: what ``nasrlm train`` does
with a new device column), ``rlm-ctx`` (devices: the residual of a feature prior on the latencies of the
devices the base saw, measured on the same architectures; ``rlm-ctx-free`` also on the free labels; all three
also report the prior alone), ``rlm-read`` (devices: the language model alone, decoding the new device after
its own greedy decoding of every device the base saw, as pre-training decodes one device after another:
``fit(reads=)``; ``rlm-readK``, e.g. ``rlm-read5``: of the K devices whose reading ranks the measured
architectures best, ``choose_reads``; ``rlm-readfK``: the parameter count and MACs before them, as
pre-training decodes every column after those; ``rlm-blend-read[K]``: the same in ``rlm-blend``;
``rlm-blend-ctx-read[K]``: blended with a prior on the source devices' latencies alone, as ``nasrlm train
--inputs`` fits one),
``zero-shot`` (accuracy: the base's ``accuracy_rank`` with no label, ``RLMPredictor.zero_shot`` as ``nasrlm
predict`` with no model directory), ``forest`` (a random forest on the free and graph labels read off the ONNX
graph, ``nasrlm.free_labels``), ``transfer-forest`` (the same forest plus the prediction of a cross-space
accuracy forest, ``--transfer``: what other spaces' published accuracies say of each cell; ``transfer-alone``
ranks by that prediction alone, no label used), ``rlm-given-forest`` (accuracy: ``rlm`` reading first, as a
given column, the ``transfer-forest``'s prediction, out of bag on the labelled rows so that it carries the
errors a new row's would: the prior as something the model reads, not a sum it is weighted out of),
``rank-blend`` (accuracy, with ``forest`` and ``rlm``:
their normal ranks averaged at each model weight of ``RANK_BLEND_WEIGHTS``, as ``forest·rlm W``: whether any
share of the language model alone would lift the forest; the best weight, chosen on the test cells, bounds
what a blend could gain), ``cell-forest`` (the same forest on GRAF-style features of the NB201 cell,
space-specific: what the generic labels miss), ``paths-forest`` (NB101: the forest on the graph
labels plus the cell's path encoding, BANANAS's count of input-to-output paths per sequence of operations,
space-specific: what order along a path adds), ``gbdt`` (gradient-boosted trees on the one-hot encoding of the
cell or blocks plus the free labels), ``ctx-forest`` (the forest on the graph labels plus the base's own
predictions of every accuracy tag it has and of NB201's latencies: what the base knows, as features) and, for
devices, ``ridge`` (ridge regression of the log latency on the log latencies of every device the base did see,
measured on the same architectures: HELP's "source devices"), ``ridge-free`` (the same plus the log parameter
count and MACs) and ``ctx-ridge`` (the same on the base's *predictions* of those devices, which exist for any
architecture); ``prior-ridge`` and ``prior-ridge-free`` fit those two with the predictor's own ridge prior
(``FeaturePrior``, ``kind="ridge"``), which is what ``rlm-ctx`` returns when its residual is not kept.
``--select farthest`` measures the architectures spread farthest apart over the source devices' latencies
instead of random ones (the test rows stay the same). Prints markdown tables for experiments/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import platform
import statistics
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

import numpy as np
import torch
from _common import encoded, gbdt_predict
from scipy import stats

from nasrlm.data import load_table
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.priors.feature_prior import FeaturePrior
from nasrlm.priors.transfer import ACCURACY_RANK, AccuracyTransfer
from nasrlm.rlm.augment import EQUIVALENT_READINGS
from nasrlm.rlm.calibration import CALIBRATION_FOLDS, central_coverage
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import PRETRAINING_FILE, is_excluded, tag
from nasrlm.rlm.recipes import ALONE_TUNE, DECODER_TUNE, FINE_TUNE
from nasrlm.rlm.tuning import sample_archs
from nasrlm.selection import farthest_first
from search_spaces import SearchSpace, get_space

FREE = tuple(o.name for o in ALL_FREE_OBJECTIVES[:2])
#: The methods that read the base model (the others ignore ``--base``).
BASE_METHODS = {"rlm", "rlm-prior", "rlm-graph", "rlm-blend", "rlm-ctx", "rlm-ctx-free", "forest+rlm",
                "ctx-forest", "ctx-ridge", "rlm-read", "zero-shot", "rlm-given-forest"}
#: The methods that read the cross-space accuracy forest of ``--transfer``.
TRANSFER_METHODS = {"transfer-forest", "transfer-alone", "rlm-given-forest"}
#: The model's weights at which ``rank-blend`` averages the forest's and the language model's normal ranks.
RANK_BLEND_WEIGHTS = (0.05, 0.1, 0.2, 0.5)
#: The devices of HELP's NB201 test split (our base excludes each on every space).
DEVICES = {"nb201": ("titan_rtx_1", "gold_6226", "pixel2", "raspi4", "eyeriss", "fpga"),
           "fbnet": ("titan_rtx_1", "gold_6226", "pixel2", "raspi4", "eyeriss", "fpga")}


# --- data, cached -----------------------------------------------------------------------------------
def one_hot(space: SearchSpace, ids: list[str]) -> np.ndarray:
    """The usual hand-made encoding: NB201 one-hot ops per edge, FBNet one-hot blocks per layer."""
    if space.name == "nb201":
        from search_spaces.nasbench201 import OPS

        return np.array([[float(op == o) for op in space.parse(i).ops for o in OPS] for i in ids])
    from search_spaces.fbnet import BLOCKS

    return np.array([[float(b == o) for b in space.parse(i).blocks for o in BLOCKS] for i in ids])


def cell_features(space: SearchSpace, ids: list[str]) -> np.ndarray:
    """GRAF-style features of the NB201 *cell* (space-specific, for comparison with the generic graph
    labels): op counts, live input-to-output paths of the cell, paths through each op, shortest and
    longest path in edges and in convolutions."""
    from search_spaces.nasbench201 import OPS

    edges = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
    rows = []
    for arch_id in ids:
        ops = space.parse(arch_id).ops
        paths: list[list[str]] = []

        def walk(node: int, path: list[str], ops=ops, paths=paths) -> None:
            if node == 3:
                paths.append(path)
                return
            for (a, b), op in zip(edges, ops, strict=True):
                if a == node and op != "none":
                    walk(b, [*path, op], ops, paths)

        walk(0, [])
        convs = [sum(op.startswith("nor_conv") for op in p) for p in paths] or [0]
        lengths = [len(p) for p in paths] or [0]
        rows.append([ops.count(o) for o in OPS] + [len(paths)] + [sum(o in p for p in paths) for o in OPS[1:]]
                    + [min(lengths), max(lengths), min(convs), max(convs)])
    return np.array(rows, dtype=np.float64)


def path_encoding(space: SearchSpace, ids: list[str]) -> np.ndarray:
    """NB101 cells' input-to-output paths counted per sequence of operations (BANANAS's path encoding:
    every sequence of the three operations of length 0 to 5, one column each)."""
    from search_spaces.nasbench101 import OPS

    sequences = [s for n in range(6) for s in itertools.product(range(len(OPS)), repeat=n)]
    column = {s: k for k, s in enumerate(sequences)}
    out = np.zeros((len(ids), len(sequences)))
    for row, arch_id in enumerate(ids):
        cell = space.parse(arch_id)
        last = len(cell.ops) - 1
        stack: list[tuple[int, tuple[int, ...]]] = [(0, ())]
        while stack:
            node, ops = stack.pop()
            for nxt in range(node + 1, last + 1):
                if not cell.matrix[node][nxt]:
                    continue
                if nxt == last:
                    out[row, column[ops]] += 1
                else:
                    stack.append((nxt, (*ops, OPS.index(cell.ops[nxt]))))
    return out


# --- methods ----------------------------------------------------------------------------------------
def forest(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int,
           out_of_bag: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Predictions on ``x_test``; with ``out_of_bag``, also each training row's out-of-bag prediction
    (what the forest says of it without having seen it: the residual a model stacked on it will meet)."""
    from sklearn.ensemble import RandomForestRegressor

    model = RandomForestRegressor(n_estimators=300, max_features=0.5, random_state=seed, n_jobs=1,
                                  oob_score=out_of_bag)
    predicted = model.fit(x_train, y_train).predict(x_test)
    return (predicted, model.oob_prediction_) if out_of_bag else predicted


def ridge(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import RidgeCV

    return RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(x_train, y_train).predict(x_test)


def factors(source: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` principal-component scores of the standardised source-device log latencies of
    every row: the few directions in which devices disagree, read off the whole published table."""
    z = (source - source.mean(axis=0)) / source.std(axis=0)
    u, s, _ = np.linalg.svd(z, full_matrices=False)
    return u[:, :k] * s[:k]


def fine_tuned(base: Path, space: SearchSpace, name: str, texts: list[str], train: np.ndarray, y: np.ndarray,
               test: np.ndarray, a: argparse.Namespace, seed: int, *, kind: str | None = None,
               given: dict[str, np.ndarray] | None = None, features: dict[str, np.ndarray] | None = None,
               mode: str = "residual", reads: tuple[str, ...] = (), k: int = 0, ids: list[str] | None = None,
               new_tags: tuple[str, ...] = ()) -> tuple[np.ndarray, np.ndarray | None, float, np.ndarray]:
    """The base fine-tuned on ``train``: its median predictions on ``test``, its prior's alone (or
    ``None``), the fine-tune's seconds, and the decoded samples (test rows, samples).

    ``given`` columns (every row) are decoded before ``name``; with a prior ``kind`` they are its
    inputs, with ``features`` (every row, not decoded) beside them; ``mode="blend"``: the model learns
    ``name`` itself, decoder only, beside the prior on ``features`` (``nasrlm train``'s default).
    ``reads``: labels of the base it reads first (``fit(reads=)``), the ``k`` whose reading ranks the
    labelled rows best (``choose_reads``; 0: all). ``new_tags``: ``given`` columns the base has no tag for,
    each a new accuracy-like tag (started as the base's accuracy rank). With ``ids`` (the texts'
    architectures) and no prior, the test rows are read as ``nasrlm predict`` reads them
    (``sample_archs``: an accuracy through up to ``--equivalents`` texts of each one's equivalence class).
    """
    from nasrlm.data import Objective

    given, features = given or {}, features or {}
    # as nasrlm train reads a table: an accuracy is a percentage, which a base starts as its accuracy rank
    objective = Objective(name, "%" if name == "acc" else "", "target", "benchmark", True)
    extra = [Objective(t, "%", "given", "benchmark", True) for t in new_tags]
    predictor = RLMPredictor.from_base(base, [*extra, objective], space=space.name)
    # nasrlm train's rule and schedule with --prior none and, from a base, with a feature prior
    frozen = (kind is None or mode == "blend") and not a.train_encoder
    # however few the rows
    steps = {} if a.steps is None else {"steps": a.steps, "unvalidated_steps": None, "steps_per_row": None}
    schedule = (ALONE_TUNE if kind is None else DECODER_TUNE) if frozen else FINE_TUNE
    overrides = {} if a.members is None else {"members": a.members}
    if a.state_dropout is not None and frozen:
        overrides["state_dropout"] = a.state_dropout
    if a.lr is not None:
        overrides["learning_rate"] = a.lr
    schedule = dataclasses.replace(schedule, **steps, **overrides)
    config = schedule.config(len(train), seed=seed, progress=False, freeze_encoder=frozen)
    values = np.column_stack([*(v[train] for v in given.values()), y])
    prior = {"prior_from": tuple(given), "prior_inputs": {k: v[train] for k, v in features.items()},
             "prior": kind, "prior_mode": mode} if kind else {}
    refit = True if kind == "line" else [name]  # the line prior's free labels were measured refitted
    start = time.perf_counter()
    if reads and k:
        first = tuple(r for r in reads if r in FREE)  # the free labels, always read (rlm-readfK)
        rest = tuple(r for r in reads if r not in FREE)
        reads = (*first, *predictor.lm.choose_reads([texts[i] for i in train], y, rest, k))
    predictor.fit([texts[i] for i in train], values, [*given, name], config, refit_normalizers=refit,
                  calibration_folds=a.calibration_folds, reads=reads, **prior)
    seconds = time.perf_counter() - start
    if mode == "blend":
        print(f"  {name}: the language model's share {predictor.prior_part.weights[name]:.2f}", flush=True)
    start = time.perf_counter()
    if ids is not None and not kind:
        draws = sample_archs(predictor, space, [ids[i] for i in test], [name], equivalents=a.equivalents,
                             num_samples=a.samples, batch_size=64, seed=seed)
    else:
        draws = predictor.sample([texts[i] for i in test], [name],
                                 given={c: v[test] for c, v in given.items()},
                                 features={c: v[test] for c, v in features.items()}, num_samples=a.samples,
                                 batch_size=64, seed=seed)
    speed = f"{len(test) / (time.perf_counter() - start):.0f} archs/s"
    print(f"  {name}: " + (f"read first {', '.join(reads)}; " if reads else "") + speed, flush=True)
    alone = None
    if kind:
        x = np.column_stack([*(given[k][test] for k in given), *(features[k][test] for k in features)])
        alone = predictor.prior_part.prior.mean(x)[:, 0]
    return np.median(draws, axis=1)[:, 0], alone, seconds, draws[..., 0]


def base_predictions(base: Path, space: SearchSpace, texts: list[str], tags: list[str], cache: Path
                     ) -> np.ndarray:
    """The base's greedy predictions of its own ``tags`` (as named in the base) for ``texts``, cached.

    What the base knows about each architecture, as features: e.g. its predicted latency on every
    device it saw, read for architectures no table covers.
    """
    stamp = str((base / "model.safetensors").stat().st_mtime_ns)
    key = hashlib.sha256("\n".join([str(base.resolve()), stamp, *tags, *texts]).encode()).hexdigest()[:16]
    path = cache / f"base-{space.name}-{key}.npy"
    if path.exists():
        return np.load(path)
    predictor = RLMPredictor.load(base)
    out = predictor.sample(texts, tags, num_samples=1, temperature=0.0, batch_size=128, progress=True)[:, 0]
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


# --- tasks ------------------------------------------------------------------------------------------
def base_tags(base: Path) -> list[str]:
    """The base's tags in its own order (the order a fit reads them in, and so the same in every run)."""
    return list(json.loads((base / "config.json").read_text())["model"]["objectives"])


def run_accuracy(a, space_name: str, seed: int, record) -> None:
    space = get_space(space_name)
    tags = base_tags(a.base) if a.base else set()
    leaked = sorted(t for t in tags if is_excluded(t, [f"{space_name}:*acc*"]))
    if leaked and a.methods & BASE_METHODS:
        raise SystemExit(f"base {a.base} saw {space_name} accuracy columns {leaked}: pre-train it with "
                         "--exclude")
    table = load_table(space_name, ["acc"], a.data_dir, ids=_rows(space, a))
    texts, free = encoded(space, list(table.ids))
    transferred = None
    if a.methods & TRANSFER_METHODS:
        transfer = AccuracyTransfer.find(a.transfer)
        leaked = sorted(t for t in transfer.tags if t.startswith(f"{space_name}:"))
        if leaked:
            raise SystemExit(f"transfer {a.transfer} was fitted on {space_name} accuracies {leaked}: "
                             "pre-train it with --exclude")
        transfer = transfer.narrowed(free)  # the source whose graphs are most like these (no label read)
        print(f"  transfer from {transfer.sources[0].space} ({transfer.sources[0].rows:,} rows)", flush=True)
        transferred = np.column_stack([free, transfer.predict(free)])
    y_all = table.column("acc")
    order = np.random.default_rng(seed).permutation(len(table.ids))
    nb201 = space_name == "nb201"  # the hand-made encodings and the latency context are NB201's
    x_hot = None
    if nb201 and "gbdt" in a.methods:
        x_hot = np.hstack([one_hot(space, list(table.ids)), free[:, :2]])
    cells = cell_features(space, list(table.ids)) if nb201 and "cell-forest" in a.methods else None
    paths = None
    if space_name == "nb101" and "paths-forest" in a.methods:
        paths = np.hstack([free, path_encoding(space, list(table.ids))])
    context = None
    if nb201 and "ctx-forest" in a.methods:  # what the base says of each cell: other accuracies, latencies
        units = {o["name"]: o["unit"] for o in json.loads((a.base / "config.json").read_text())["objectives"]}
        tags = sorted(t for t in base_tags(a.base) if ":" in t
                      and (units.get(t) == "%" or (t.startswith("nb201:") and units.get(t) == "ms")))
        print(f"  context: the base's predictions of {len(tags)} tags: {', '.join(tags)}", flush=True)
        context = np.hstack([free, base_predictions(a.base, space, texts, tags, a.cache)])
    zero_shot = None
    if "zero-shot" in a.methods:  # nasrlm predict with no model directory: accuracy_rank, no label read
        rows = order[: max(a.sizes) + a.test]
        predictor = RLMPredictor.zero_shot(space_name, a.base)
        if predictor.predicts != (ACCURACY_RANK.name,):
            raise SystemExit(f"base {a.base} has no {ACCURACY_RANK.name} tag to rank accuracy zero-shot with")
        start = time.perf_counter()
        draws = sample_archs(predictor, space, [table.ids[i] for i in rows], equivalents=a.equivalents,
                             num_samples=a.samples, batch_size=64, seed=seed)
        speed = len(rows) / (time.perf_counter() - start)
        print(f"  {space_name} zero-shot: {speed:.0f} archs/s", flush=True)
        zero_shot = np.full(len(order), np.nan)
        zero_shot[rows] = np.median(draws, axis=1)[:, 0]
    for n in a.sizes:
        train, test = order[:n], order[n : n + a.test]
        y, truth = y_all[train], y_all[test]
        runs = {}
        if zero_shot is not None:
            runs["zero-shot"] = zero_shot[test]
        if "forest" in a.methods:
            runs["forest"] = forest(free[train], y, free[test], seed)
        if "transfer-forest" in a.methods:
            runs["transfer-forest"] = forest(transferred[train], y, transferred[test], seed)
        if "transfer-alone" in a.methods:
            runs["transfer-alone"] = transferred[test, -1]
        if cells is not None:
            runs["cell-forest"] = forest(cells[train], y, cells[test], seed)
        if paths is not None:
            runs["paths-forest"] = forest(paths[train], y, paths[test], seed)
        if x_hot is not None:
            runs["gbdt"] = gbdt_predict(x_hot[train], y[:, None], x_hot[test], seed)[:, 0]
        if context is not None:
            runs["ctx-forest"] = forest(context[train], y, context[test], seed)
        if "rlm-given-forest" in a.methods:
            predicted, oob = forest(transferred[train], y, transferred[test], seed, out_of_bag=True)
            column = np.zeros(len(order))
            column[train], column[test] = oob, predicted
            runs["rlm-given-forest"], _, seconds, _ = fine_tuned(
                a.base, space, "acc", texts, train, y, test, a, seed, given={"acc_prior": column},
                new_tags=("acc_prior",))
            print(f"  {space_name} acc N={n} seed {seed} rlm-given-forest: fine-tune {seconds:.0f} s",
                  flush=True)
        if "forest+rlm" in a.methods:  # the base learns what the forest leaves over (out of bag)
            predicted, oob = forest(free[train], y, free[test], seed, out_of_bag=True)
            residual, _, seconds, _ = fine_tuned(a.base, space, "acc", texts, train, y - oob, test, a, seed)
            runs["forest+rlm"], runs["forest+rlm/2"] = predicted + residual, predicted + residual / 2
            print(f"  {space_name} acc N={n} seed {seed} forest+rlm: fine-tune {seconds:.0f} s", flush=True)
        free_given = {f: free[:, k] for k, f in enumerate(FREE)}
        graph = {o.name: free[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES) if k >= len(FREE)}
        labels = {o.name: free[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES)}
        for method, kind, given, features, mode in (
                ("rlm", None, None, None, "residual"), ("rlm-prior", "line", free_given, None, "residual"),
                ("rlm-graph", a.prior_kind, free_given, graph, "residual"),
                ("rlm-blend", a.prior_kind, None, labels, "blend")):
            if method in a.methods:
                runs[method], alone, seconds, draws = fine_tuned(
                    a.base, space, "acc", texts, train, y, test, a, seed, kind=kind, given=given,
                    features=features, mode=mode, ids=list(table.ids))
                record(f"{space_name} acc: central-80% coverage", f"N={n}", method,
                       float(central_coverage(draws[..., None], truth[:, None])[0]))
                if a.also_mean:
                    runs[f"{method}, mean of samples"] = draws.mean(axis=1)
                if features is not None and method != "rlm-blend":
                    runs[f"{method} (prior alone)"] = alone
                print(f"  {space_name} acc N={n} seed {seed} {method}: fine-tune {seconds:.0f} s", flush=True)
        if "rank-blend" in a.methods and {"forest", "rlm"} <= runs.keys():
            forest_ranks, model_ranks = normal_ranks(runs["forest"]), normal_ranks(runs["rlm"])
            for w in RANK_BLEND_WEIGHTS:
                runs[f"forest·rlm {w}"] = (1 - w) * forest_ranks + w * model_ranks
        for method, pred in runs.items():
            record(f"{space_name} acc", f"N={n}", method, float(stats.kendalltau(pred, truth).statistic))


def normal_ranks(values: np.ndarray) -> np.ndarray:
    """``values``' ranks, centred and scaled to unit variance: two rankings on one scale to average."""
    ranks = stats.rankdata(values)
    return (ranks - ranks.mean()) / ranks.std()


def run_unseen(a, seed: int, record) -> None:
    tags = base_tags(a.base)
    for space_name, devices in DEVICES.items():
        if space_name not in a.spaces:
            continue
        space = get_space(space_name)
        seen_devices = [t.split(":", 1)[1] for t in tags if t.startswith(f"{space_name}:")]
        for device in devices:
            if tag(space_name, device) in tags:
                raise SystemExit(f"base {a.base} saw {tag(space_name, device)}: pre-train it with --exclude")
        table = load_table(space_name, [*devices, *[d for d in seen_devices if _latency(space_name, d, a)]],
                           a.data_dir, ids=_rows(space, a))
        keep = np.flatnonzero(np.isfinite(table.values).all(axis=1))
        ids = [table.ids[k] for k in keep]
        values = table.values[keep]
        texts, free = encoded(space, ids)
        source = np.log(values[:, len(devices):])
        predicted = None
        if "ctx-ridge" in a.methods:  # the base's own predictions of the same source devices
            seen = [tag(space_name, d) for d in table.names[len(devices):]]
            predicted = np.log(base_predictions(a.base, space, texts, seen, a.cache))
            known = [stats.spearmanr(predicted[:, k], source[:, k]).statistic for k in range(len(seen))]
            spread = f"mean ρ of {len(seen)} (min {min(known):.2f}, max {max(known):.2f})"
            record(f"{space_name}: the base on the devices it was trained on", spread, "base",
                   float(np.mean(known)))
        x_hot = np.hstack([one_hot(space, ids), np.log(free[:, :2])]) if "gbdt" in a.methods else None
        for device in devices:
            y_all = values[:, devices.index(device)]
            order = np.random.default_rng(seed).permutation(len(ids))
            train, test = order[: a.measured], order[a.measured : a.measured + a.test]
            if a.select == "farthest":  # the same test rows; the measured ones spread over the sources
                pool = np.setdiff1d(order, test)
                train = pool[farthest_first(source[pool], a.measured, seed=seed)]
            y, truth = y_all[train], y_all[test]
            runs = {}
            if "ridge" in a.methods:
                runs["ridge"] = ridge(source[train], np.log(y), source[test])
            for method in sorted(m for m in a.methods if m.startswith("pcr")):  # e.g. pcr3
                scores = factors(source, int(method[3:]))
                runs[method] = ridge(scores[train], np.log(y), scores[test])
            if "ridge-free" in a.methods:  # the sources and the architecture's own size
                with_free = np.hstack([source, np.log(free[:, :2])])
                runs["ridge-free"] = ridge(with_free[train], np.log(y), with_free[test])
            for method, inputs in (("prior-ridge", np.exp(source)),
                                   ("prior-ridge-free", np.hstack([np.exp(source), free[:, :2]]))):
                if method in a.methods:  # the predictor's own ridge prior: what rlm-ctx returns from 20 rows
                    prior, _ = FeaturePrior.fit(inputs[train], y[:, None], kind="ridge")
                    runs[method] = prior.mean(inputs[test])[:, 0]
            if "ctx-ridge" in a.methods:
                runs["ctx-ridge"] = ridge(predicted[train], np.log(y), predicted[test])
            if "forest" in a.methods:
                runs["forest"] = forest(free[train], np.log(y), free[test], seed)
            if x_hot is not None:
                runs["gbdt"] = gbdt_predict(x_hot[train], np.log(y)[:, None], x_hot[test], seed)[:, 0]
            free_given = {f: free[:, k] for k, f in enumerate(FREE)}
            sources = {d: values[:, len(devices) + k] for k, d in enumerate(table.names[len(devices):])}
            with_free = {**sources, **free_given}
            graph = {o.name: free[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES) if k >= len(FREE)}
            labels = {o.name: free[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES)}
            reading = [(m, None, None, None) for m in a.methods if m.startswith("rlm-read")]
            reading += [(m, a.prior_kind, None, sources if m.startswith("rlm-blend-ctx") else labels)
                        for m in a.methods if m.startswith(("rlm-blend-read", "rlm-blend-ctx-read"))]
            for method, kind, given, features in (("rlm", None, None, None), *reading,
                                                  ("rlm-prior", "line", free_given, None),
                                                  ("rlm-graph", a.prior_kind, free_given, graph),
                                                  ("rlm-blend", a.prior_kind, None, labels),
                                                  ("rlm-ctx", a.prior_kind, None, sources),
                                                  ("rlm-ctx-free", a.prior_kind, None, with_free)):
                if method not in a.methods:
                    continue
                blend = method.startswith("rlm-blend")  # rlm-blend-readK: the default, reading first
                reads, k = (), 0
                if "-read" in method:  # the devices the base saw, K of them (all without a number)
                    count = method.split("-read")[1]
                    reads, k = tuple(table.names[len(devices):]), int(count.lstrip("f") or 0)
                    if count.startswith("f"):  # rlm-readfK: the free labels first, as pre-training decodes
                        reads = (*FREE, *reads)
                runs[method], alone, seconds, draws = fine_tuned(
                    a.base, space, device, texts, train, y, test, a, seed, kind=kind, given=given,
                    features=features, mode="blend" if blend else "residual", reads=reads, k=k)
                record(f"{space_name} unseen device: central-80% coverage", device, method,
                       float(central_coverage(draws[..., None], truth[:, None])[0]))
                if a.also_mean:
                    runs[f"{method}, mean of samples"] = draws.mean(axis=1)
                if method.startswith(("rlm-ctx", "rlm-graph", "rlm-blend-ctx")):
                    runs[f"{method} (prior alone)"] = alone
                print(f"  {space_name} {device} seed {seed} {method}: fine-tune {seconds:.0f} s",
                      flush=True)
            for method, pred in runs.items():
                record(f"{space_name} unseen device", device, method,
                       float(stats.spearmanr(pred, truth).statistic))


def _rows(space: SearchSpace, a) -> list[str] | None:
    """Every row of the table, or with ``--smoke`` a few hundred (NB201's first ids; FBNet's sampled)."""
    if not a.smoke:
        return None
    if space.name == "nb201":
        return [space.arch_id(arch) for _, arch in zip(range(300), space.enumerate(), strict=False)]
    return [i for i in load_table(space.name, ["params_m"], a.data_dir).ids[:300]]


def _latency(space: str, name: str, a) -> bool:
    """Whether a tag the base saw is one of the space's device latencies (not an accuracy or a proxy)."""
    from nasrlm.data import available_objectives

    units = {o.name: o.unit for o in available_objectives(space, a.data_dir)}
    return units.get(name) == "ms"


# --- report -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--base", type=Path, help="base model directory (nasrlm pretrain); needed by the "
                   "methods that read it and by the unseen-device task (its source devices)")
    p.add_argument("--tasks", default="acc,unseen")
    p.add_argument("--methods", default="rlm,rlm-prior,ctx-forest,ctx-ridge,forest,cell-forest,gbdt,ridge")
    p.add_argument("--spaces", default="nb201,fbnet", help="spaces of the unseen-device task")
    p.add_argument("--acc-spaces", default="nb201", help="spaces of the accuracy task: nb201, nb101")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--sizes", default="100,1000", help="labelled cells of the accuracy task")
    p.add_argument("--measured", type=int, default=20, help="measurements of an unseen device")
    p.add_argument("--select", choices=("random", "farthest"), default="random",
                   help="which architectures are measured on an unseen device: random (HELP's protocol) or "
                        "spread over the source devices' latencies (nasrlm.selection.farthest_first)")
    p.add_argument("--test", type=int, default=None, help="held-out rows (default 5,000 acc, 3,000 devices)")
    p.add_argument("--steps", type=int, help="fine-tuning optimiser steps, however many rows (default: as "
                   f"nasrlm train: {ALONE_TUNE.steps_per_row} a row up to {ALONE_TUNE.steps} for rlm, "
                   f"{DECODER_TUNE.steps} blended, {FINE_TUNE.steps} for the others)")
    p.add_argument("--lr", type=float, help="fine-tuning peak learning rate (default: the schedule's, as "
                   f"nasrlm train: {ALONE_TUNE.learning_rate:g} alone, {DECODER_TUNE.learning_rate:g} "
                   f"blended, {FINE_TUNE.learning_rate:g} the whole model, as with a residual prior)")
    p.add_argument("--calibration-folds", type=int, default=CALIBRATION_FOLDS,
                   help="cross-fits that calibrate the spread where the validation rows are too few, as "
                        "nasrlm train (0: the samples as decoded; the fine-tune's seconds include them)")
    p.add_argument("--members", type=int, help=f"decoders pooled (default: {ALONE_TUNE.members} for the "
                   "language model alone, as nasrlm train --prior none, 1 blended or with a prior)")
    p.add_argument("--state-dropout", type=float, help="dropout on the frozen encoder's states while a "
                   "decoder fine-tunes (default: the schedule's, as nasrlm train)")
    p.add_argument("--train-encoder", action="store_true",
                   help="rlm: train the encoder too (nasrlm train --prior none keeps a base's frozen)")
    p.add_argument("--samples", type=int, default=32, help="decoded samples per test architecture")
    p.add_argument("--equivalents", type=int, default=EQUIVALENT_READINGS, help="zero-shot and rlm: texts "
                   "of its equivalence class each accuracy is read through, pooled, as nasrlm predict reads "
                   "it (1: its own text only)")
    p.add_argument("--also-mean", action="store_true", help="also score each language model's mean of its "
                   "samples (nasrlm reads their median)")
    p.add_argument("--transfer", type=Path, help="a base model directory or transfer file (nasrlm "
                   "pretrain writes one) for transfer-forest and transfer-alone")
    p.add_argument("--prior-kind", default="auto", help="the feature prior of rlm-graph and rlm-ctx")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cache", type=Path, default=Path(".cache/experiments"),
                   help="where the base models' predictions are kept once computed")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny configuration (300 rows, one seed, 3 steps, 2 cross-fits): checks the "
                        "script, no numbers")
    a = p.parse_args(argv)
    if a.smoke:
        a.seeds, a.sizes, a.test, a.measured, a.steps, a.samples = "0", "20", 100, 10, 3, 2
        a.calibration_folds = min(a.calibration_folds, 2)  # the forests of five take most of its time
    torch.set_num_threads(a.threads)
    a.methods = set(a.methods.split(","))
    if a.base is None and (a.methods & BASE_METHODS or "unseen" in a.tasks):
        p.error(f"--base is needed by {', '.join(sorted(a.methods & BASE_METHODS)) or 'the unseen task'}")
    if a.methods & TRANSFER_METHODS and a.transfer is None:
        p.error(f"--transfer is needed by {', '.join(sorted(a.methods & TRANSFER_METHODS))}")
    if "rank-blend" in a.methods and not {"forest", "rlm"} <= a.methods:
        p.error("rank-blend averages the ranks of forest and rlm: name both in --methods")
    a.spaces = a.spaces.split(",")
    a.acc_spaces = a.acc_spaces.split(",")
    a.sizes = [int(n) for n in a.sizes.split(",")]
    results: dict[tuple[str, str, str], list[float]] = defaultdict(list)

    def record(task: str, column: str, method: str, value: float) -> None:
        results[(task, column, method)].append(value)
        print(f"  {task} {column} {method}: {value:.3f}", flush=True)

    started = time.perf_counter()
    for seed in (int(s) for s in a.seeds.split(",")):
        if "acc" in a.tasks:
            a.test = a.test or 5000
            for space_name in a.acc_spaces:
                run_accuracy(a, space_name, seed, record)
        if "unseen" in a.tasks:
            saved, a.test = a.test, 3000 if a.test in (None, 5000) else a.test
            run_unseen(a, seed, record)
            a.test = saved
    print(f"\n{date.today()}, {platform.machine()} {platform.processor() or ''}, torch threads {a.threads}, "
          f"{(time.perf_counter() - started) / 60:.0f} min; "
          + (f"base {a.base} ({json.loads((a.base / PRETRAINING_FILE).read_text())['exclude']}); "
             if a.base else "no base; ") + f"steps {a.steps or 'default'}, lr {a.lr or 'default'}, "
          f"samples {a.samples}, seeds {a.seeds}\n")
    for task in dict.fromkeys(t for t, _, _ in results):
        methods = list(dict.fromkeys(m for t, _, m in results if t == task))
        print(f"| {task} | " + " | ".join(methods) + " |")
        print("|---|" + "---|" * len(methods))
        columns = list(dict.fromkeys(c for t, c, _ in results if t == task))
        means = defaultdict(list)
        for column in columns:
            cells = []
            for m in methods:
                v = results.get((task, column, m), [])
                means[m].append(statistics.mean(v) if v else float("nan"))
                spread = f" ± {statistics.stdev(v):.3f}" if len(v) > 1 else ""
                cells.append(f"{statistics.mean(v):.3f}{spread}" if v else "–")
            print(f"| {column} | " + " | ".join(cells) + " |")
        if len(columns) > 1:
            bold = [f"**{statistics.mean(means[m]):.3f}**" for m in methods]
            print("| **mean** | " + " | ".join(bold) + " |")
        print()


if __name__ == "__main__":
    main()
