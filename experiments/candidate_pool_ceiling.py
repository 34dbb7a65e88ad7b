"""How much of the true Pareto front can the RLMSampler's random candidates reach at all?

The sampler scores a random candidate pool (and mutations of its front) each round; whatever the model
predicts, it can only propose what it scores. This script draws the candidates the way the sampler does
(uniform Optuna parameters, the sampler's seed) and reports the hypervolume of the *best possible*
choice among them, i.e. their own Pareto front, as a fraction of the true front's, with the reference
point of ``search_benchmark.py``. No model is involved.

    python experiments/candidate_pool_ceiling.py --data-dir ../shared/data --draws 2000,6500,16500

2,000 is the pool drawn once (``num_candidates``); 6,500 and 16,500 are that pool plus 500 fresh draws
(``fresh_candidates``) in each of the 9 / 29 rounds of a 100 / 300-evaluation search. ``--smoke`` runs
the whole script in seconds (100 and 400 draws, seeds 0 and 1), as its test does.
"""

from __future__ import annotations

import argparse

import numpy as np
import optuna

from nasrlm.metrics import hypervolume, pareto_mask
from nasrlm.search import ArchCache, ArchEvaluator, Truth, draw_params, reference_point
from search_spaces import get_space


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--objectives", default="acc,pixel3")
    parser.add_argument("--draws", default="2000,6500,16500", help="random candidates drawn in all")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--smoke", action="store_true", help="100 and 400 draws on seeds 0 and 1: checks "
                        "the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.draws, args.seeds = "100,400", "0,1"
    optuna.logging.set_verbosity(optuna.logging.ERROR)

    space = get_space("nb201")
    evaluator = ArchEvaluator.for_names(space, args.objectives.split(","), data_dir=args.data_dir)
    truth = Truth(*evaluator.truth())
    maximize = evaluator.maximize
    reference = reference_point([], truth)
    true_hv = hypervolume(truth.values, reference, maximize)
    row_of = {arch_id: k for k, arch_id in enumerate(truth.ids)}
    true_front = set(np.flatnonzero(pareto_mask(truth.values, maximize)).tolist())
    trial = optuna.create_study().ask()
    space.suggest(trial)
    distributions = trial.distributions
    cache = ArchCache(space)

    print("| random draws | distinct cells | HV ratio of their front (mean ± std) | true-front cells |")
    print("|---|---|---|---|")
    for draws in (int(d) for d in args.draws.split(",")):
        cells, ratios, found = [], [], []
        for seed in (int(s) for s in args.seeds.split(",")):
            rng = np.random.default_rng(seed)  # the sampler's own stream: its pool is drawn first
            params = [draw_params(distributions, rng) for _ in range(draws)]
            rows = sorted({row_of[cache.arch_id_of(p)] for p in params})
            cells.append(len(rows))
            ratios.append(hypervolume(truth.values[rows], reference, maximize) / true_hv)
            found.append(len(true_front.intersection(rows)))
        print(f"| {draws:,} | {np.mean(cells):,.0f} | {np.mean(ratios):.3f} ± {np.std(ratios):.3f} "
              f"({', '.join(f'{r:.3f}' for r in ratios)}) | {np.mean(found):.1f} of {len(true_front)} |")


if __name__ == "__main__":
    main()
