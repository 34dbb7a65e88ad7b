"""How good must the surrogate be, and which acquisition spends it best? A simulated NB201 search.

The RLMSampler's hypervolume depends on two things: how well its model ranks architectures, and how
its acquisition turns predictions into proposals. This probe separates them. It replays the sampler's
loop on the published table without any model: a *synthetic surrogate* of chosen quality predicts each
objective as its true normal score plus a fixed per-architecture error (Gaussian, standard deviation
set so that the prediction has the requested Kendall tau with the truth), and its predictive samples
scatter around that prediction with the same spread, i.e. it is calibrated. Then each acquisition
variant searches with it for ``--budget`` evaluations.

    python experiments/acquisition_probe.py --data-dir ../shared/data --taus 1,0.8,0.55 --seeds 0,1,2

tau 1 is an oracle (every acquisition should find the whole front); 0.55 is roughly what the sampler's
model reaches on accuracy with 100 labels (experiments/README.md, "What the model knows in the loop").
``--smoke`` runs the whole script in seconds (every policy, taus 1, 0.55 / 1 and the prior, one seed, 20
evaluations) on 200 random cells of the table, whose free labels take seconds (all 15,625: minutes),
as its test does.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from _common import encoded
from scipy.stats import norm

from nasrlm.metrics import expected_hypervolume_improvement, hypervolume, hypervolume_history, pareto_mask
from nasrlm.priors.prior import FreeLabelPrior
from nasrlm.search import ArchEvaluator, Truth, reference_point
from search_spaces import get_space


@dataclass
class Surrogate:
    """Synthetic predictions in the objectives' units: truth's normal score + fixed error, + sample noise."""

    values: np.ndarray  # (n, m) truth
    sigma: np.ndarray  # (m,) error std in normal-score units
    rng: np.random.Generator
    spread: float = 1.0  # sample scatter / error std: 1 calibrated, < 1 overconfident

    def __post_init__(self) -> None:
        n = len(self.values)
        ranks = self.values.argsort(axis=0).argsort(axis=0)
        self.scores = norm.ppf((ranks + 0.5) / n)
        self.mean = self.scores + self.rng.normal(size=self.scores.shape) * self.sigma
        self.sorted = np.sort(self.values, axis=0)

    def samples(self, idx: np.ndarray, num: int) -> np.ndarray:
        """(len(idx), num, m) draws mapped back through each objective's quantile function."""
        if not np.any(self.sigma):
            return self.values[idx][:, None, :]
        noise = self.rng.normal(size=(len(idx), num, self.values.shape[1]))
        z = self.mean[idx][:, None, :] + noise * self.sigma * self.spread
        q = np.clip(norm.cdf(z) * len(self.values), 0, len(self.values) - 1).astype(int)
        return np.stack([self.sorted[q[..., j], j] for j in range(self.values.shape[1])], axis=-1)


@dataclass
class PriorSurrogate:
    """The RLMSampler without its model: the free-label prior refitted on the evaluated cells, its
    residuals' spread as the predictive scatter. What the model must beat to be worth its cost."""

    values: np.ndarray  # (n, m) truth
    free: np.ndarray  # (n, f) free labels (parameters, MACs) of every cell
    rng: np.random.Generator
    spread: float = 1.0

    def update(self, seen: list[int], pool: np.ndarray) -> None:
        self.prior = FreeLabelPrior.fit(self.free[seen], self.values[seen], self.free[pool])
        self.scale = self.prior.residuals(self.free[seen], self.values[seen]).std(axis=0) * self.spread

    def samples(self, idx: np.ndarray, num: int) -> np.ndarray:
        noise = self.rng.normal(size=(len(idx), num, self.values.shape[1])) * self.scale
        return self.prior.values(self.free[idx], noise)


def sigma_for_tau(tau: float) -> float:
    """Error std giving Kendall ``tau`` between a standard normal and itself plus the error."""
    if tau >= 1:
        return 0.0
    r = math.sin(math.pi * tau / 2)
    return math.sqrt(1 / r**2 - 1)


def sigmas(taus: str, num_objectives: int) -> np.ndarray:
    """Each objective's error std from ``--taus``' entry: one tau for all, or one per objective ('0.6/1')."""
    values = [sigma_for_tau(float(t)) for t in taus.split("/")]
    if len(values) == 1:
        values *= num_objectives
    if len(values) != num_objectives:
        raise SystemExit(f"--taus: {taus!r} gives {len(values)} taus for {num_objectives} objectives")
    return np.array(values)


Policy = Callable[[Surrogate, np.ndarray, list[int], int, np.random.Generator], list[int]]


def greedy_ehvi(per_fit: int, candidates: int | None, samples: int = 16,
                reference: str = "observed") -> Policy:
    """The sampler's acquisition: EHVI over candidates, believer-median greedy batch of ``per_fit``.

    ``reference``: the point EHVI is measured from, the median of all evaluations (``observed``, the
    sampler's), of the random start-up evaluations only (``startup``: an unbiased sample of the space,
    as the reported hypervolume's reference is the whole space's median), or of the candidates'
    predicted medians (``predicted``).
    """

    def policy(s: Surrogate, maximize: np.ndarray, seen: list[int], startup: int,
               rng: np.random.Generator) -> list[int]:
        n = len(s.values)
        pool = np.setdiff1d(np.arange(n) if candidates is None else rng.choice(n, min(candidates, n),
                                                                                replace=False), seen)
        if hasattr(s, "update"):
            s.update(seen, pool)
        draws = s.samples(pool, samples)
        observed = s.values[seen]
        medians = np.median(draws, axis=1)
        ref = {"observed": lambda: np.median(observed, axis=0),
               "startup": lambda: np.median(observed[:startup], axis=0),
               "predicted": lambda: np.median(medians, axis=0)}[reference]()
        alive = np.ones(len(pool), dtype=bool)
        chosen = []
        for _ in range(per_fit):
            gain = expected_hypervolume_improvement(draws[alive], observed, ref, maximize)
            pick = (np.flatnonzero(alive)[int(np.argmax(gain))] if np.any(gain > 0)
                    else int(rng.choice(np.flatnonzero(alive))))
            chosen.append(int(pool[pick]))
            alive[pick] = False
            observed = np.vstack([observed, medians[pick]])
        return chosen

    return policy


def thompson(per_fit: int, candidates: int | None) -> Policy:
    """Each proposal: one joint draw per candidate, propose the draw's best HV gain (no believer)."""

    def policy(s: Surrogate, maximize: np.ndarray, seen: list[int], startup: int,
               rng: np.random.Generator) -> list[int]:
        n = len(s.values)
        pool = np.setdiff1d(np.arange(n) if candidates is None else rng.choice(n, min(candidates, n),
                                                                                replace=False), seen)
        if hasattr(s, "update"):  # the prior surrogate refits on the evaluated cells, as greedy_ehvi's does
            s.update(seen, pool)
        observed = s.values[seen]
        reference = np.median(observed, axis=0)
        chosen: list[int] = []
        for _ in range(per_fit):
            draws = s.samples(pool, 1)
            gain = expected_hypervolume_improvement(draws, observed, reference, maximize)
            gain[np.isin(pool, chosen)] = -1
            chosen.append(int(pool[int(np.argmax(gain))]))
            observed = np.vstack([observed, draws[int(np.argmax(gain)), 0]])
        return chosen

    return policy


POLICIES: dict[str, Policy] = {
    "ehvi10-pool2000": greedy_ehvi(10, 2000),
    "ehvi10-pool2000-refstartup": greedy_ehvi(10, 2000, reference="startup"),
    "ehvi10-pool2000-refpredicted": greedy_ehvi(10, 2000, reference="predicted"),
    "ehvi10-all": greedy_ehvi(10, None),
    "ehvi1-all": greedy_ehvi(1, None),
    "ehvi5-all": greedy_ehvi(5, None),
    "thompson10-all": thompson(10, None),
}


def run(policy: Policy, surrogate: Surrogate, maximize: np.ndarray, budget: int, startup: int,
        rng: np.random.Generator) -> list[int]:
    seen = [int(i) for i in rng.choice(len(surrogate.values), startup, replace=False)]
    while len(seen) < budget:
        fresh = [i for i in policy(surrogate, maximize, seen, startup, rng) if i not in seen]
        seen += fresh[: budget - len(seen)]
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--objectives", default="acc,pixel3")
    parser.add_argument("--taus", default="1,0.8,0.55",
                        help="Kendall tau of the synthetic surrogate, one for every objective or one per "
                        "objective joined by '/' (0.6/1: accuracy at 0.6, latency exact); 'prior': the "
                        "free-label prior alone")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--startup", type=int, default=10)
    parser.add_argument("--spreads", default="1",
                        help="sample scatter relative to the error (1: calibrated; the sampler's model ~0.3)")
    parser.add_argument("--smoke", action="store_true", help="taus 1, 0.55/1 and prior, seed 0, 20 "
                        "evaluations on 200 random cells: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.taus, args.seeds, args.budget, args.startup = "1,0.55/1,prior", "0", 20, 10

    space = get_space("nb201")
    evaluator = ArchEvaluator.for_names(space, args.objectives.split(","), data_dir=args.data_dir)
    truth = Truth(*evaluator.truth())
    if args.smoke:
        rows = np.sort(np.random.default_rng(0).choice(len(truth.ids), 200, replace=False))
        truth = Truth([truth.ids[k] for k in rows], truth.values[rows])
    maximize = np.array(evaluator.maximize)
    reference = reference_point([], truth)
    true_hv = hypervolume(truth.values, reference, maximize)
    front = set(np.flatnonzero(pareto_mask(truth.values, maximize)).tolist())
    free = None
    if "prior" in args.taus.split(","):  # before the table: computing them prints a line
        free = encoded(space, truth.ids)[1][:, :2]  # parameters and MACs
    print(f"| surrogate tau | spread | policy | HV ratio @{args.budget} | recall |")
    print("|---|---|---|---|---|")
    for tau, spread in ((t, float(w)) for t in args.taus.split(",") for w in args.spreads.split(",")):
        for name in args.policies.split(","):
            ratios, recalls = [], []
            for seed in (int(s) for s in args.seeds.split(",")):
                rng = np.random.default_rng(seed)
                surrogate = (PriorSurrogate(truth.values, free, rng, spread) if tau == "prior" else
                             Surrogate(truth.values, sigmas(tau, len(maximize)), rng, spread))
                seen = run(POLICIES[name], surrogate, maximize, args.budget, args.startup, rng)
                ratios.append(hypervolume_history(truth.values[seen], reference, maximize)[-1] / true_hv)
                recalls.append(len(front.intersection(seen)) / len(front))
            hv = f"{np.mean(ratios):.3f} ± {np.std(ratios):.3f}"
            print(f"| {tau} | {spread} | {name} | {hv} | {np.mean(recalls):.2f} |", flush=True)


if __name__ == "__main__":
    main()
