"""What the RLMSampler's model knows, round by round, inside a real NB201 search.

The acquisition probe showed that a calibrated surrogate with Kendall tau 0.55 would already give
the sampler a hypervolume ratio of about 0.8 at 100 evaluations; the real sampler reaches about 0.47.
This probe runs the real sampler and, after every refit, scores its model on ``--held-out`` cells it
has not evaluated: Kendall tau of the predicted medians per objective, the share of true values inside
the predicted 50 % interval (calibration: 0.5 is right, less is overconfident), tau among the cells in
the best quarter of each objective (where the fronts lie: the search must order these), and for reference the
tau that the free labels alone give (parameter count for every objective). With the free-label prior
it also scores the prior alone (the model's residual weighted 0) and the residual weighted as the
sampler's latest proposals were (``RLMSampler.last_residual_weights``, estimated before this refit).

    python experiments/sampler_probe.py --data-dir ../shared/data --budget 60 --seed 0

``--smoke`` runs the whole script in seconds (12 evaluations, 50 held-out cells, a tiny RLMSampler), as
its test does.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import optuna
import torch
from _common import SMOKE_RLM
from scipy.stats import kendalltau

from nasrlm.search import (
    ArchEvaluator,
    RLMSampler,
    Truth,
    reference_point,
    run_search,
    sampler_keywords,
    score,
)
from search_spaces import get_space


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--objectives", default="acc,pixel3")
    p.add_argument("--budget", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--held-out", type=int, default=500)
    p.add_argument("--samples", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--options", default="{}", help='RLMSampler options by name as JSON: {"fit_steps": 50}')
    p.add_argument("--smoke", action="store_true",
                   help="12 evaluations, 50 held-out cells, a tiny RLMSampler: checks the script runs")
    a = p.parse_args()
    if a.smoke:
        a.budget, a.held_out, a.samples = 12, 50, 4
        a.options = json.dumps({**SMOKE_RLM, **json.loads(a.options)})
    torch.set_num_threads(a.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    space = get_space("nb201")
    names = a.objectives.split(",")
    evaluator = ArchEvaluator.for_names(space, names, data_dir=a.data_dir)
    truth = Truth(*evaluator.truth())
    rows = np.random.default_rng(10_000 + a.seed).choice(len(truth.ids), a.held_out, replace=False)
    held_ids, held_truth = [truth.ids[i] for i in rows], truth.values[rows]
    sampler = RLMSampler(space, seed=a.seed, **sampler_keywords(json.loads(a.options)))
    free_tau = None
    rounds = []

    def on_fit(n: int, seconds: float) -> None:
        nonlocal free_tau
        draws = sampler.predict_samples(held_ids, num_samples=a.samples, seed=0)
        median = np.median(draws, axis=1)
        lo, hi = np.quantile(draws, 0.25, axis=1), np.quantile(draws, 0.75, axis=1)
        if free_tau is None:
            params = sampler.free_labels_of(held_ids)[:, 0]
            free_tau = [abs(kendalltau(params, held_truth[:, k])[0]) for k in range(len(names))]
        row = {"trials": n, "fit_s": round(seconds, 1)}
        variants = {}
        if sampler.predictor.prior_part is not None:
            for label, weights in (("prior alone", dict.fromkeys(names, 0.0)),
                                   ("weighted", sampler.last_residual_weights)):
                variants[label] = np.median(sampler.predict_samples(
                    held_ids, num_samples=a.samples, seed=0, residual_weight=weights), axis=1)
            row["weights"] = {k: round(v, 2) for k, v in (sampler.last_residual_weights or {}).items()}
        for k, name in enumerate(names):
            sign = 1 if evaluator.maximize[k] else -1  # tau of "predicted better" with "truly better"
            row[f"{name} tau"] = round(float(kendalltau(sign * median[:, k], sign * held_truth[:, k])[0]), 3)
            best = sign * held_truth[:, k] >= np.quantile(sign * held_truth[:, k], 0.75)  # where fronts lie
            tau_best = kendalltau(median[best, k], held_truth[best, k])[0]
            row[f"{name} tau, best quarter"] = round(float(tau_best), 3)
            inside = (held_truth[:, k] >= lo[:, k]) & (held_truth[:, k] <= hi[:, k])
            row[f"{name} in 50%"] = round(float(inside.mean()), 2)
            for label, m in variants.items():
                row[f"{name} tau, {label}"] = round(float(kendalltau(m[:, k], held_truth[:, k])[0]), 3)
        rounds.append(row)
        print(json.dumps(row), flush=True)

    sampler.on_fit = on_fit
    start = time.perf_counter()
    result = run_search(space, evaluator, sampler, budget=a.budget, label="rlm", progress=False)
    s = score(result, reference_point([], truth), truth)
    print("\nfree labels alone (|tau| of the parameter count): "
          + ", ".join(f"{n} {t:.3f}" for n, t in zip(names, free_tau or [], strict=False)))
    seconds = time.perf_counter() - start
    print(f"HV ratio @{a.budget}: {s.history[-1]:.3f}; {seconds:.0f} s; options {a.options}\n")
    extra = [c for c in ("best quarter", "prior alone", "weighted")
             if rounds and f"{names[0]} tau, {c}" in rounds[0]]
    print("| trials | " + " | ".join(f"{n} τ | {n} in 50 %" + "".join(f" | {n} τ, {c}" for c in extra)
                                    for n in names) + (" | weights |" if extra else " |"))
    print("|---|" + ("---|" * (2 + len(extra))) * len(names) + ("---|" if extra else ""))
    for r in rounds:
        cells = " | ".join(f"{r[f'{n} tau']} | {r[f'{n} in 50%']}" + "".join(f" | {r[f'{n} tau, {c}']}"
                                                                             for c in extra) for n in names)
        print(f"| {r['trials']} | {cells} |" + (f" {r.get('weights') or '–'} |" if extra else ""))


if __name__ == "__main__":
    main()
