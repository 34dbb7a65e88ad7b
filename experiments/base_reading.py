"""How well a base model reads a space's structure from the ONNX text alone, and what that reading is worth.

    python experiments/base_reading.py --data-dir ../shared/data --bases nasrlm/base,runs/base-v2

For each base, its greedy decoding of every graph label that varies over ``--rows`` random architectures
of ``--space`` (seed 0), against the labels computed from the graph: Spearman ρ per label, summarised by
the median and the worst. Then what those decoded labels are worth to the space's accuracy: a random
forest and a ridge regression on ranks, each fitted on the first ``--labels`` of those rows, Kendall τ on
the others, beside the same two on the true labels (the most a perfect reading could give them). A base
that reads the structure poorly cannot rank accuracy from the text well either: the language model
alone, fine-tuned from it, ranks below these (experiments/README.md, "Who carries the prediction").

The accuracy is only ever read on the labelled rows and the ranking's truth; a base must never have seen
the space's accuracy (checked). ``--smoke`` runs it in seconds on an untrained tiny base.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from _common import encoded, smoke_base
from scipy import stats

from nasrlm.data import load_table
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import is_excluded
from search_spaces import get_space


def read_labels(base: Path, space: str, texts: list[str], labels: tuple[str, ...]) -> np.ndarray:
    """The base's greedy decoding of ``labels`` (in that order) for ``texts``: (len(texts), len(labels))."""
    predictor = RLMPredictor.zero_shot(space, base)
    return predictor.sample(texts, labels, num_samples=1, temperature=0.0, batch_size=64)[:, 0]


def accuracy_taus(x: np.ndarray, y: np.ndarray, n: int) -> tuple[float, float]:
    """Kendall τ on rows ``n:`` of a forest and of a ridge on ranks, fitted on rows ``:n`` of ``x``, ``y``."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.linear_model import RidgeCV

    forest = RandomForestRegressor(n_estimators=300, max_features=0.5, random_state=0, n_jobs=1)
    ridge = RidgeCV(alphas=np.logspace(-3, 5, 17))
    by_forest = forest.fit(x[:n], y[:n]).predict(x[n:])
    by_ridge = ridge.fit(x[:n], stats.rankdata(y[:n])).predict(x[n:])
    return (float(stats.kendalltau(by_forest, y[n:]).statistic),
            float(stats.kendalltau(by_ridge, y[n:]).statistic))


def _smoke(folder: Path, texts: list[str], free: np.ndarray) -> Path:
    """The tiny untrained base of ``--smoke``, with a normaliser for every free label (a real base fitted
    them on the rows it was pre-trained on)."""
    from nasrlm.rlm.normalize import Normalizer

    predictor = RLMPredictor.load(smoke_base(folder, texts))
    for k, objective in enumerate(ALL_FREE_OBJECTIVES):
        predictor.lm.normalizers[objective.name] = Normalizer.fit(free[:, k])
    return predictor.save(folder / "base")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir")
    p.add_argument("--bases", help="comma-separated base model directories")
    p.add_argument("--space", default="nb201")
    p.add_argument("--rows", type=int, default=2100, help="random architectures read (seed 0)")
    p.add_argument("--labels", type=int, default=100, help="of them, labelled with the accuracy")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="seconds: an untrained tiny base, few rows")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.smoke:
        a.rows, a.labels = 60, 20
    space = get_space(a.space)
    table = load_table(a.space, ["acc"], a.data_dir)
    rows = np.random.default_rng(0).permutation(len(table.ids))[: a.rows]
    texts, free = encoded(space, [table.ids[i] for i in rows])
    y = table.column("acc")[rows]
    names = [o.name for o in ALL_FREE_OBJECTIVES]
    with tempfile.TemporaryDirectory() as scratch:
        bases = [_smoke(Path(scratch), texts, free)] if a.smoke else [Path(b) for b in a.bases.split(",")]
        fidelity, worth = [], []
        truth_taus = None
        for base in bases:
            tags = RLMPredictor.load(base).lm.model.config.objectives
            seen = [t for t in tags if is_excluded(t, [f"{a.space}:*acc*"])]
            if seen:
                raise SystemExit(f"base {base} saw {a.space} accuracy columns {seen}: pre-train it with "
                                 "--exclude")
            varying = tuple(n for k, n in enumerate(names) if n in tags and np.ptp(free[:, k]) > 0)
            true = free[:, [names.index(n) for n in varying]]
            decoded = read_labels(base, a.space, texts, varying)
            rhos = np.array([stats.spearmanr(d, t).statistic for d, t in zip(decoded.T, true.T, strict=True)])
            rhos = np.nan_to_num(rhos, nan=0.0)  # a label decoded as a constant reads nothing
            worst = varying[int(np.argmin(rhos))]
            fidelity.append(f"| {base} | {len(varying)} | {np.median(rhos):.3f} | {rhos.min():.3f} "
                            f"({worst}) |")
            forest_tau, ridge_tau = accuracy_taus(decoded, y, a.labels)
            worth.append(f"| {base}'s decoded labels | {forest_tau:.3f} | {ridge_tau:.3f} |")
            truth_taus = truth_taus or accuracy_taus(true, y, a.labels)
            print(f"{base}: {len(varying)} labels, median ρ {np.median(rhos):.3f}", flush=True)
    print(f"\n{a.space}, {a.rows:,} random architectures (seed 0)\n")
    print("| base | graph labels | median ρ, decoded vs true | worst |\n|---|---|---|---|")
    print("\n".join(fidelity))
    print(f"\n| {a.space} accuracy from {a.labels} labels, τ on the other {a.rows - a.labels:,} | forest | "
          "ridge on ranks |\n|---|---|---|")
    print("\n".join(worth))
    print(f"| the true graph labels | {truth_taus[0]:.3f} | {truth_taus[1]:.3f} |")


if __name__ == "__main__":
    main()
