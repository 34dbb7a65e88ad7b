"""One RLM across search spaces: pre-train on free labels of every space, then fine-tune per task (issue 5).

    python experiments/cross_space_benchmark.py --data-dir ../shared/data --seeds 0

In one process, on the same splits for every method:

1. **Pre-training.** One model reads ``--pretrain-per-space`` random architectures of *every* registered
   space and learns their free labels (parameters and MACs, read off the ONNX graph). The ONNX tokenizer
   is the default one, learned on samples of every space.
2. **Tasks**, each fine-tuning its own copy of that model, free labels first in the decode order and
   given at inference (so each expensive label is decoded conditioned on them):

   - ``nb101``: NAS-Bench-101 CIFAR-10 validation accuracy (108 epochs), N labelled cells, tested on
     5,000 held-out rows of the 20k table;
   - ``fbnet``: FBNet latency on raspi4, pixel3, eyeriss and fpga, one model for the four, N labelled
     architectures, tested on the remaining rows of the 5,000;
   - ``unseen``: HELP's setting. The model is fine-tuned on 1,000 architectures measured on the
     *source* devices (every FBNet device except the held-out ones), then on ``--adapt`` measurements of
     a held-out device it has never seen, and is tested on that device.

Methods: ``rlm`` (the pre-trained model), ``rlm-prior`` (the same, learning each expensive label as the
residual of the free-label prior: ``RLMPredictor.fit(prior_from=...)``), ``rlm-scratch`` (same
fine-tuning from random weights: does cross-space pre-training help?), ``gbdt`` (gradient-boosted
trees on the one-hot encoding of the architecture plus the two free labels), and for latency tasks
``macs`` (ranking by MACs alone, no training). Prints markdown tables for experiments/README.md.
Texts and free labels are cached under ``--cache``; ``--smoke`` runs a tiny configuration (to check
the script, not to measure).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import os
import platform
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import torch
from _gbdt import gbdt_predict
from scipy import stats

from nasrlm.data import load_table
from nasrlm.free_labels import FREE_LABELS_VERSION, FREE_OBJECTIVES, free_labels
from nasrlm.predictor import NUMBER_FORMAT, RLMPredictor
from nasrlm.presets import SIZES
from nasrlm.tokenizers import OnnxTokenizer
from nasrlm.training import TrainConfig
from search_spaces import SearchSpace, available_spaces, get_space
from search_spaces.fbnet import BLOCKS
from search_spaces.nasbench101 import MAX_VERTICES, OPS

FREE = tuple(o.name for o in FREE_OBJECTIVES)
FBNET_TARGETS = ("raspi4", "pixel3", "eyeriss", "fpga")
#: Held out of the source devices in the unseen-device task: a CPU, a GPU and a phone (our choice).
UNSEEN = ("silver_4114", "titanxp_1", "samsung_a50")


# --- cached texts and free labels ------------------------------------------------------------------
@dataclass
class Encoded:
    texts: list[str]
    free: np.ndarray  # (n, 2)


def encoded(space: SearchSpace, ids: list[str], cache: Path) -> Encoded:
    """Canonical texts and free labels of ``ids``, computed once per (space, ids) and kept in ``cache``."""
    key = hashlib.sha256("\n".join([f"free labels v{FREE_LABELS_VERSION}", *ids]).encode()).hexdigest()[:16]
    path = cache / f"{space.name}-{key}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        return Encoded(list(z["texts"]), z["free"])
    print(f"  {space.name}: texts and free labels of {len(ids):,} architectures", flush=True)
    texts = [space.to_text(space.parse(i)) for i in ids]
    free = free_labels(space, ids, progress=False)
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(path, texts=np.array(texts), free=free)
    return Encoded(texts, free)


# --- baselines ------------------------------------------------------------------------------------
def one_hot(space: SearchSpace, ids: list[str]) -> np.ndarray:
    """The usual hand-made encodings: NB101 padded adjacency + op one-hot, FBNet block one-hot."""
    rows = []
    for arch_id in ids:
        arch = space.parse(arch_id)
        if space.name == "nb101":
            n = arch.num_vertices
            position = list(range(n - 1)) + [MAX_VERTICES - 1]  # pad before the output vertex
            matrix = np.zeros((MAX_VERTICES, MAX_VERTICES))
            matrix[np.ix_(position, position)] = arch.matrix
            ops = np.zeros((MAX_VERTICES, len(OPS)))
            for v, op in zip(position[1:-1], arch.ops[1:-1], strict=True):
                ops[v, OPS.index(op)] = 1
            rows.append(np.concatenate([matrix[np.triu_indices(MAX_VERTICES, 1)], ops[1:-1].ravel()]))
        else:
            rows.append(np.array([float(b == o) for b in arch.blocks for o in BLOCKS]))
    return np.array(rows)


# --- the RLM --------------------------------------------------------------------------------------
def epochs_for(n: int, batch: int, steps: int) -> int:
    """Enough epochs for about ``steps`` optimiser steps, between 10 and 100 passes."""
    return int(min(100, max(10, math.ceil(steps / math.ceil(n / batch)))))


def fine_tune(predictor: RLMPredictor, data: Encoded, train: np.ndarray, values: np.ndarray,
              names: tuple[str, ...], seed: int, steps: int, prior: bool = False,
              learning_rate: float = 1e-3) -> RLMPredictor:
    """A fine-tuned copy: free labels first in the decode order, then ``names`` (residuals if ``prior``)."""
    model = copy.deepcopy(predictor)
    config = TrainConfig(max_epochs=epochs_for(len(train), 32, steps), batch_size=min(32, len(train)),
                         validation_fraction=0.0, learning_rate=learning_rate, seed=seed, progress=False)
    model.fit([data.texts[i] for i in train], np.hstack([data.free[train], values]), (*FREE, *names), config,
              refit_normalizers=names, prior_from=FREE if prior else ())
    return model


def rlm_medians(predictor: RLMPredictor, data: Encoded, test: np.ndarray, names: tuple[str, ...],
                samples: int) -> np.ndarray:
    given = {n: data.free[test, k] for k, n in enumerate(FREE)}
    draws = predictor.sample([data.texts[i] for i in test], names, given=given, num_samples=samples,
                             batch_size=64, seed=0)
    return np.median(draws, axis=1)


def pretrain(predictor: RLMPredictor, per_space: int, epochs: int, seed: int, cache: Path) -> float:
    """Fit free labels of ``per_space`` random architectures of every registered space; seconds taken."""
    texts: list[str] = []
    free = []
    for name in sorted(available_spaces()):
        space = get_space(name)
        data = encoded(space, space.sample_ids(per_space, seed=1000 + seed), cache)
        texts += data.texts
        free.append(data.free)
    start = time.perf_counter()
    config = TrainConfig(max_epochs=epochs, validation_fraction=0.0, learning_rate=1e-3, seed=seed,
                         progress=True)
    predictor.fit(texts, np.vstack(free), FREE, config)
    return time.perf_counter() - start


def scores(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    return (float(stats.kendalltau(pred, truth).statistic), float(stats.spearmanr(pred, truth).statistic))


# --- the tasks ------------------------------------------------------------------------------------
@dataclass
class Task:
    """One row group of the report: a space, its labelled objectives and how a split is drawn."""

    name: str
    space: str
    targets: tuple[str, ...]
    sizes: tuple[int, ...]
    test: int  # held-out rows (at most the table minus the largest N)


def run_task(task: Task, base: RLMPredictor | None, scratch: RLMPredictor | None, methods: set[str],
             seed: int, a: argparse.Namespace, record) -> None:
    space = get_space(task.space)
    table = load_table(task.space, list(task.targets), a.data_dir)
    keep = np.flatnonzero(np.isfinite(table.values).all(axis=1))
    order = np.random.default_rng(seed).permutation(keep)
    test = order[: task.test]
    data = encoded(space, table.ids, a.cache)
    x = one_hot(space, table.ids) if "gbdt" in methods else None
    for n in task.sizes:
        train = order[task.test : task.test + n]
        truth, y = table.values[test], table.values[train]
        runs: dict[str, np.ndarray] = {}
        if "macs" in methods and task.space == "fbnet":
            runs["macs"] = np.repeat(data.free[test, 1:2], len(task.targets), axis=1)
        if x is not None:
            features = np.hstack([x, data.free])
            runs["gbdt"] = gbdt_predict(features[train], y, features[test], seed)
        for method, start in (("rlm", base), ("rlm-prior", base), ("rlm-scratch", scratch)):
            if start is None or method not in methods:
                continue
            t = time.perf_counter()
            tuned = fine_tune(start, data, train, y, task.targets, seed, a.steps, prior=method == "rlm-prior",
                              learning_rate=a.learning_rate)
            runs[method] = rlm_medians(tuned, data, test, task.targets, a.samples)
            print(f"  {task.name} N={n} {method}: {time.perf_counter() - t:.0f} s", flush=True)
        for method, pred in runs.items():
            for k, target in enumerate(task.targets):
                record(task.name, target, n, method, scores(pred[:, k], truth[:, k]))


def run_unseen(base: RLMPredictor | None, scratch: RLMPredictor | None, methods: set[str], seed: int,
               a: argparse.Namespace, record) -> None:
    """Source devices on ``a.source_n`` archs, then ``a.adapt`` measurements of each unseen device."""
    from nasrlm.data import available_objectives

    space = get_space("fbnet")
    devices = [o.name for o in available_objectives("fbnet", a.data_dir) if o.unit == "ms"]
    sources = tuple(d for d in devices if d not in UNSEEN)
    table = load_table("fbnet", [*sources, *UNSEEN], a.data_dir)
    data = encoded(space, table.ids, a.cache)
    order = np.random.default_rng(seed).permutation(len(table.ids))
    source_rows, rest = order[: a.source_n], order[a.source_n :]
    adapt, test = rest[: a.adapt], rest[a.adapt :]
    x = np.hstack([one_hot(space, table.ids), data.free]) if "gbdt" in methods else None
    starts = {"rlm": base, "rlm-prior": base, "rlm-scratch": scratch}
    tuned_sources = {}
    for method, start in starts.items():
        if start is not None and method in methods:
            t = time.perf_counter()
            labels = table.values[source_rows][:, : len(sources)]
            tuned_sources[method] = fine_tune(start, data, source_rows, labels, sources, seed, a.source_steps,
                                              prior=method == "rlm-prior", learning_rate=a.learning_rate)
            print(f"  unseen: {method} on {len(sources)} source devices, {time.perf_counter() - t:.0f} s",
                  flush=True)
    for device in UNSEEN:
        k = table.names.index(device)
        truth, y = table.values[test, k], table.values[adapt, k : k + 1]
        runs: dict[str, np.ndarray] = {}
        if "macs" in methods:
            runs["macs"] = data.free[test, 1]
        if x is not None:
            runs["gbdt"] = gbdt_predict(x[adapt], y, x[test], seed)[:, 0]
        for method, start in starts.items():
            if start is None or method not in methods:
                continue
            prior = method == "rlm-prior"
            tuned = fine_tune(start, data, adapt, y, (device,), seed, a.steps, prior, a.learning_rate)
            runs[f"{method} (no source devices)"] = rlm_medians(tuned, data, test, (device,), a.samples)[:, 0]
            if method in tuned_sources:
                tuned = fine_tune(tuned_sources[method], data, adapt, y, (device,), seed, a.steps, prior,
                                  a.learning_rate)
                medians = rlm_medians(tuned, data, test, (device,), a.samples)
                runs[f"{method} + source devices"] = medians[:, 0]
        for method, pred in runs.items():
            record("unseen", device, a.adapt, method, scores(pred, truth))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--seeds", default="0")
    p.add_argument("--tasks", default="nb101,fbnet,unseen")
    p.add_argument("--methods", default="rlm,rlm-scratch,gbdt,macs")
    p.add_argument("--nb101-sizes", default="100,424,1000")
    p.add_argument("--fbnet-sizes", default="100")
    p.add_argument("--test", type=int, default=5000, help="held-out rows of the nb101 task")
    p.add_argument("--pretrain-per-space", type=int, default=400)
    p.add_argument("--pretrain-epochs", type=int, default=3)
    p.add_argument("--steps", type=int, default=600, help="optimiser steps per fine-tuning (10-100 epochs)")
    p.add_argument("--source-n", type=int, default=1000, help="architectures measured on the source devices")
    p.add_argument("--source-steps", type=int, default=600)
    p.add_argument("--learning-rate", type=float, default=1e-3, help="fine-tuning's peak rate")
    p.add_argument("--adapt", type=int, default=20, help="measurements of the unseen device")
    p.add_argument("--samples", type=int, default=16, help="decoded samples per prediction")
    p.add_argument("--model", choices=list(SIZES), default="compact")
    p.add_argument("--threads", type=int, default=2)
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    p.add_argument("--cache", type=Path, default=tmp / "nasrlm-cross-space", help="texts and free labels")
    p.add_argument("--smoke", action="store_true", help="tiny model and sizes, to check the script")
    a = p.parse_args()
    if a.smoke:
        a.nb101_sizes, a.fbnet_sizes, a.test, a.pretrain_per_space, a.pretrain_epochs = "20", "20", 200, 8, 1
        a.steps, a.source_n, a.source_steps, a.samples, a.model = 20, 40, 20, 4, "tiny"
    torch.set_num_threads(a.threads)
    methods, task_names = set(a.methods.split(",")), a.tasks.split(",")
    tasks = {"nb101": Task("nb101", "nb101", ("acc",), tuple(map(int, a.nb101_sizes.split(","))), a.test),
             "fbnet": Task("fbnet", "fbnet", FBNET_TARGETS, tuple(map(int, a.fbnet_sizes.split(","))),
                           min(a.test, 5000 - max(map(int, a.fbnet_sizes.split(",")))))}
    results: dict[tuple, list[tuple[float, float]]] = defaultdict(list)

    def record(task: str, target: str, n: int, method: str, value: tuple[float, float]) -> None:
        results[(task, target, n, method)].append(value)
        print(f"  {task} {target} N={n} {method}: Kendall {value[0]:.3f}, Spearman {value[1]:.3f}",
              flush=True)

    pretrain_s = []
    for seed in map(int, a.seeds.split(",")):
        objectives = [*FREE_OBJECTIVES]
        if "nb101" in task_names:
            objectives += load_table("nb101", ["acc"], a.data_dir).objectives
        if {"fbnet", "unseen"} & set(task_names):
            from nasrlm.data import available_objectives

            objectives += [o for o in available_objectives("fbnet", a.data_dir) if o.unit == "ms"]
        tokenizer = OnnxTokenizer.train_on_spaces(seed=0)
        torch.manual_seed(seed)
        scratch = None
        if "rlm-scratch" in methods:
            scratch = RLMPredictor.create(tokenizer, objectives, **SIZES[a.model])
        base = None
        if {"rlm", "rlm-prior"} & methods:
            # pre-training is the long part (most of an hour on two busy cores): kept and reused
            # a new free-label definition or number format makes a new model
            recipe = [*(o.name for o in objectives), f"free labels v{FREE_LABELS_VERSION}",
                      json.dumps(NUMBER_FORMAT.to_dict(), sort_keys=True)]
            tags = hashlib.sha256(",".join(recipe).encode()).hexdigest()[:8]
            name = f"pretrained-{a.model}-{a.pretrain_per_space}x{a.pretrain_epochs}-seed{seed}-{tags}"
            saved = a.cache / name
            if (saved / "config.json").is_file():
                print(f"seed {seed}: pre-trained model from {saved}", flush=True)
                base = RLMPredictor.load(saved)
            else:
                torch.manual_seed(seed)
                base = RLMPredictor.create(tokenizer, objectives, **SIZES[a.model])
                print(f"seed {seed}: pre-training on free labels of {a.pretrain_per_space} archs x "
                      f"{len(available_spaces())} spaces", flush=True)
                pretrain_s.append(pretrain(base, a.pretrain_per_space, a.pretrain_epochs, seed, a.cache))
                base.save(saved)
        for name in task_names:
            if name == "unseen":
                run_unseen(base, scratch, methods, seed, a, record)
            else:
                run_task(tasks[name], base, scratch, methods, seed, a, record)

    print(f"\n{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, {a.threads} threads, "
          f"{date.today()}; model {a.model}, fine-tuning lr {a.learning_rate:g}; seeds {a.seeds}; "
          f"pre-training {a.pretrain_per_space} archs x "
          f"{len(available_spaces())} spaces x {a.pretrain_epochs} epochs"
          + (f" ({statistics.mean(pretrain_s):.0f} s)" if pretrain_s else "") + "\n")
    print("| task | objective | labels | method | Kendall τ | Spearman ρ |")
    print("|---|---|---|---|---|---|")
    for (task, target, n, method), values in results.items():
        tau, rho = np.array(values).T
        spread = (lambda v: f" ± {np.std(v):.3f}") if len(values) > 1 else (lambda v: "")
        cells = f"{tau.mean():.3f}{spread(tau)} | {rho.mean():.3f}{spread(rho)}"
        print(f"| {task} | {target} | {n} | {method} | {cells} |")


if __name__ == "__main__":
    main()
