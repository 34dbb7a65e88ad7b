"""The best network under a latency budget: each sampler's regret and feasible share under one constraint.

    python experiments/constraint_benchmark.py --data-dir ../shared/data --limit pixel3 --percentile 5 \\
        --seeds 0,1,2 --budget 100 --report-at 50,100

One objective (``--objective``, NB201 CIFAR-10 accuracy by default) searched under ``LIMIT<=L``, ``L`` the
``--percentile`` of ``LIMIT``'s column over the whole table (5: a twentieth of the space meets it). Every
sampler gets the constraint the Optuna way, each trial calling ``trial.set_constraint`` (``run_search`` with a
constrained ``ArchEvaluator``, as ``nasrlm search --constraint`` runs it): ours, TPE, NSGA-II and GP honour
it. Reported at each budget of ``--report-at`` (distinct evaluations): the *regret*, the best feasible
value of the table less the best feasible value found (accuracy points), mean ± std over the seeds that found
a feasible network by then (how many found none is said beside), and the share of evaluations that met the
constraint. Where the table covers part of a space (OFA), every sampler
searches its rows. ``--smoke`` runs the script in seconds (12 evaluations, one seed, a tiny RLMSampler).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import optuna
import torch
from _common import SMOKE_RLM, machine, timed_search

from nasrlm.search import ArchEvaluator, Constraint, restricted_to_table
from search_spaces import get_space


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--space", default="nb201")
    p.add_argument("--objective", default="acc")
    p.add_argument("--limit", default="pixel3", help="the constrained column (at most the percentile)")
    p.add_argument("--percentile", type=float, default=5.0, help="of the column over the whole table")
    p.add_argument("--samplers", default="rlm,tpe,nsga2,gp")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--budget", type=int, default=100)
    p.add_argument("--report-at", default="50,100", help="budgets to report (≤ --budget)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rlm-options", default="{}", help='RLMSampler options as JSON: {"prior": "forest"}')
    p.add_argument("--smoke", action="store_true", help="12 evaluations of rlm (tiny) and tpe on seed 0")
    a = p.parse_args()
    if a.smoke:
        a.samplers, a.seeds, a.budget, a.report_at = "rlm,tpe", "0", 12, "6,12"
        a.rlm_options = json.dumps({**SMOKE_RLM, **json.loads(a.rlm_options)})
    torch.set_num_threads(a.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    space = get_space(a.space)
    column = ArchEvaluator.for_names(space, [a.objective, a.limit], data_dir=a.data_dir).tabulated()
    if column is None:
        raise SystemExit(f"{a.space}: {a.objective} and {a.limit} must both be published columns")
    limit = float(np.percentile(column[1][:, 1], a.percentile))
    constraint = Constraint(a.limit, "<=", float(f"{limit:.4g}"))
    evaluator = ArchEvaluator.for_names(space, [a.objective], data_dir=a.data_dir, constraints=[constraint])
    space, evaluator = restricted_to_table(space, evaluator)
    ids, values, limits = evaluator.tabulated()
    met = (limits <= 0).all(axis=1)
    sign = 1.0 if evaluator.maximize[0] else -1.0
    best = (sign * values[met, 0]).max()
    at = [int(b) for b in a.report_at.split(",") if int(b) <= a.budget]
    print(f"# {space.name}: {a.objective} under {constraint.name} (the {a.percentile:g}th percentile): "
          f"{met.sum():,} of {len(ids):,} architectures meet it; the best of them {sign * best:.4g}")
    rows = []
    for sampler in a.samplers.split(","):
        regrets, shares, seconds = [], [], []
        for seed in (int(s) for s in a.seeds.split(",")):
            result, took = timed_search(space, evaluator, sampler, seed, a.budget, a.rlm_options)
            seconds.append(took)
            found = np.where(result.feasible, sign * result.values[:, 0], -np.inf)
            so_far = np.maximum.accumulate(found)
            regret = np.where(np.isfinite(so_far), best - so_far, np.nan)  # nothing feasible yet
            regrets.append([regret[b - 1] for b in at])
            shares.append([result.feasible[:b].mean() for b in at])
            said = ", ".join(f"@{b} {r:.2f} ({f:.0%})" for b, r, f in zip(at, regrets[-1], shares[-1],
                                                                            strict=True))
            print(f"{sampler} seed {seed}: regret (feasible) {said}, {seconds[-1]:.0f} s", flush=True)
        r, s = np.array(regrets), np.array(shares)
        cells = [_cell(r[:, k], s[:, k]) for k in range(len(at))]
        rows.append(f"| {sampler} | {' | '.join(cells)} | {np.mean(seconds):.0f} |")
    print()
    print("| sampler | " + " | ".join(f"regret @{b} (feasible)" for b in at) + " | seconds per run |")
    print("|---|" + "---|" * (len(at) + 1))
    print("\n".join(rows))
    print(f"\n{len(a.seeds.split(','))} seeds; {machine()}, {torch.get_num_threads()} torch threads; "
          f"{time.strftime('%Y-%m-%d')}")


def _cell(regrets: np.ndarray, shares: np.ndarray) -> str:
    """``mean ± std (feasible share)`` of the seeds that found a feasible network, and how many found none."""
    found = regrets[np.isfinite(regrets)]
    none = f"; {len(regrets) - len(found)} found none" if len(found) < len(regrets) else ""
    if not len(found):
        return f"none found ({shares.mean():.0%})"
    return f"{found.mean():.2f} ± {found.std():.2f} ({shares.mean():.0%}{none})"


if __name__ == "__main__":
    main()
