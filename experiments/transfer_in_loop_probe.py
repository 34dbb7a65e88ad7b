"""Does the transfer input change the search's own prior? Fit on a default search's trials, with and without.

    nasrlm pretrain --data-dir ../shared/data -o T --spaces nb101,nb301 --max-rows 2000 \
        --free-rows 0 --max-steps 1
    python experiments/transfer_in_loop_probe.py --data-dir ../shared/data --transfer T --seed 0

Runs the default RLMSampler on NB201 accuracy × pixel3 latency for 50 evaluations, then fits the
sampler's prior (a trend forest on the free and graph labels) on its first 15 / 30 / 50 trials, once as
the sampler does and once with the transfer forest's prediction as one more input, and prints how each
ranks every cell (Kendall τ; accuracy also among the top tenth) and its out-of-bag error in normal
scores, the spread the samples get. ``--smoke`` runs the whole script in seconds (a tiny RLMSampler for 12
evaluations, the prior fitted on its first 6 / 9 / 12, all on 200 random cells of the table, whose graph
labels take seconds: all 15,625 take minutes), as its test does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import optuna
import torch
from _common import SMOKE_RLM, encoded
from scipy import stats

from nasrlm.data import load_table
from nasrlm.feature_prior import FeaturePrior
from nasrlm.prior import NormalScores
from nasrlm.search import RLMSampler
from nasrlm.transfer import AccuracyTransfer
from search_spaces import SubsetSpace, get_space


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--transfer", required=True,
                   help="a base directory or transfer file fitted without NB201 accuracy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", type=Path, default=Path(".cache/experiments"))
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    p.add_argument("--smoke", action="store_true", help="a tiny RLMSampler, 12 evaluations, 200 random "
                   "cells: checks the script runs")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = get_space("nb201")
    table = load_table("nb201", ["acc", "pixel3"], a.data_dir)
    ids = list(table.ids)
    acc, lat = table.column("acc"), table.column("pixel3")
    options, fits = {}, (15, 30, 50)
    if a.smoke:  # the search draws from the 200 cells only
        rows = np.sort(np.random.default_rng(0).choice(len(ids), 200, replace=False))
        ids, acc, lat = [ids[k] for k in rows], acc[rows], lat[rows]
        options, fits = SMOKE_RLM, (6, 9, 12)
    _, labels = encoded(space, ids, a.cache)
    if a.smoke:
        space = SubsetSpace(space, ids)
    transfer = AccuracyTransfer.find(a.transfer)
    if any(t.startswith("nb201:") for t in transfer.tags):
        raise SystemExit(f"{a.transfer} was fitted on NB201 columns: pre-train it without them")
    transferred = transfer.narrowed(labels).predict(labels)
    row = {arch: k for k, arch in enumerate(ids)}

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        k = row[space.arch_id(space.suggest(trial))]
        trial.set_user_attr("row", k)
        return acc[k], lat[k]

    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=RLMSampler(space, seed=a.seed, **options))
    study.optimize(objective, n_trials=fits[-1])
    rows = [t.user_attrs["row"] for t in study.trials]
    top = np.argsort(-acc)[: len(acc) // 10]
    for n in fits:
        r = np.array(rows[:n])
        y = np.column_stack([acc[r], lat[r]])
        z = np.column_stack([NormalScores.fit(y[:, k]).forward(y[:, k]) for k in range(2)])
        for name, x in (("graph labels", labels), ("+ transfer", np.column_stack([labels, transferred]))):
            prior, held_out = FeaturePrior.fit(x[r], y, kind="trend-forest", seed=a.seed)
            mean = prior.mean(x)
            error = np.sqrt(np.nanmean((held_out - z) ** 2, axis=0))
            print(f"{n} trials, {name}: accuracy τ {stats.kendalltau(mean[:, 0], acc).statistic:.3f} "
                  f"(top tenth {stats.kendalltau(mean[top, 0], acc[top]).statistic:.3f}), latency τ "
                  f"{stats.kendalltau(mean[:, 1], lat).statistic:.3f}, out-of-bag error "
                  f"{error[0]:.3f} / {error[1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
