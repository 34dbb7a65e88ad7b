"""Is the language model's spread honest? Central-80 % coverage of its decoded samples on held-out rows.

    python experiments/calibration.py --data-dir ../shared/data --base nasrlm/base --sizes 20,100,1000

The language model alone (``nasrlm train --prior none`` from a base: the decoder fine-tuned, the encoder
frozen) on NB201 accuracy from N labelled cells, and on the latency of a device the base never saw from 20
measured architectures; then, for each sampling temperature, the share of the test rows' true values inside
the central 80 % of their samples (``nasrlm.rlm.calibration``; calibrated: 0.70-0.90) and Kendall τ /
Spearman ρ of the samples' median; and at temperature 1, calibrated as ``nasrlm train`` does (``--folds``
cross-fits below 300 rows, the validation rows above). Splits as ``transfer_benchmark.py``'s (seed s:
``default_rng(s).permutation``, the first N rows labelled, the next ``--test`` ranked). ``--smoke`` runs it
in seconds on a tiny base, as its test does.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch
from _common import encoded, smoke_base
from scipy import stats

from nasrlm.data import Objective, load_table
from nasrlm.rlm.calibration import CALIBRATION_FOLDS, central_coverage
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.pretraining import is_excluded
from nasrlm.rlm.recipes import ALONE_TUNE
from search_spaces import get_space


def fit_and_sample(base: Path, space: str, column: str, texts: list[str], y: np.ndarray, train: np.ndarray,
                   test: np.ndarray, temperatures: list[float], samples: int, seed: int, folds: int
                   ) -> dict[str, np.ndarray]:
    """The language model alone fine-tuned on ``train`` (calibrated by ``folds`` cross-fits where its
    validation rows are too few); its samples of ``test`` per temperature as decoded, and calibrated."""
    objective = Objective(column, "", "target", "benchmark", True)
    predictor = RLMPredictor.from_base(base, [objective], space=space)
    config = ALONE_TUNE.config(len(train), seed=seed, progress=False)
    predictor.fit([texts[i] for i in train], y[train, None], [column], config, refit_normalizers=[column],
                  calibration_folds=folds)
    chosen = [texts[i] for i in test]
    draws = {f"{t:g}": predictor.sample(chosen, [column], num_samples=samples, temperature=t, batch_size=64,
                                        seed=seed, calibrated=False)[..., 0] for t in temperatures}
    draws["1, calibrated"] = predictor.sample(chosen, [column], num_samples=samples, batch_size=64,
                                              seed=seed)[..., 0]
    return draws


def report(task: str, n: int, truth: np.ndarray, draws: dict[str, np.ndarray], rank) -> None:
    for t, d in draws.items():
        coverage = central_coverage(d[..., None], truth[:, None])[0]
        correlation = rank(np.median(d, axis=1), truth).statistic
        print(f"| {task} | {n} | {t} | {coverage:.3f} | {correlation:.3f} |", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir")
    p.add_argument("--base", type=Path, help="a base model directory (nasrlm pretrain; nasrlm/base)")
    p.add_argument("--sizes", default="20,100,1000", help="labelled NB201 cells")
    p.add_argument("--device", default="pixel2", help="an NB201 device the base never saw")
    p.add_argument("--temperatures", default="1,1.5,2")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--folds", type=int, default=CALIBRATION_FOLDS,
                   help="cross-fits calibrating the spread where the validation rows are too few "
                        "(nasrlm train's)")
    p.add_argument("--test", type=int, default=3000)
    p.add_argument("--samples", type=int, default=32)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--smoke", action="store_true", help="seconds: a tiny untrained base, few rows")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    temperatures = [float(t) for t in a.temperatures.split(",")]
    space = get_space("nb201")
    table = load_table("nb201", ["acc", a.device], a.data_dir)
    ids = list(table.ids)
    if a.smoke:
        ids, a.test, a.samples, a.sizes = ids[:60], 20, 4, "10"
    texts, _ = encoded(space, ids)
    with tempfile.TemporaryDirectory() as scratch:
        base = a.base or smoke_base(Path(scratch), texts)
        tags = RLMPredictor.load(base).lm.model.config.objectives
        seen = [t for t in tags if is_excluded(t, ["nb201:*acc*", f"*:{a.device}"])]
        if seen:
            raise SystemExit(f"base {base} saw {seen}: pre-train it with --exclude")
        order = np.random.default_rng(a.seed).permutation(len(ids))
        print("| task | N | temperature | central-80% coverage | rank correlation |\n|---|---|---|---|---|")
        for column, sizes, rank in (("acc", a.sizes, stats.kendalltau), (a.device, "20", stats.spearmanr)):
            y = table.column(column)[: len(ids)]
            for n in map(int, sizes.split(",")):
                train, test = order[:n], order[n : n + a.test]
                draws = fit_and_sample(base, "nb201", column, texts, y, train, test, temperatures, a.samples,
                                       a.seed, a.folds)
                report(f"nb201 {column}", n, y[test], draws, rank)


if __name__ == "__main__":
    main()
