"""How each feature prior ranks a space's columns from few labels, before any language model: the prior the
model is blended with (``nasrlm train``) and the sampler's surrogate start from it.

    python experiments/prior_ranking.py --data-dir ../shared/data --objectives acc,pixel3 --sizes 10,20,50,100

Each seed's ``default_rng(seed).permutation`` of the space's table labels its first N rows and ranks the next
``--test`` (the split of ``transfer_benchmark.py``). Every prior (``--kinds``: ``FeaturePrior`` kinds) reads
the free and graph labels of each architecture, and reads an objective lower the better (a cost) as the
search's prior does: a ``trend-forest`` may fit it as a sum over what a device computes. ``auto`` tries a line
through the best free label first, as ``nasrlm train``'s does. With ``--transfer``
each also reads, as one more input, the shipped base's transfer forest (what another space's published
accuracy says of it), as ``nasrlm train``'s prior does. Prints Kendall τ over the test rows and among their
best quarter of each objective (where a Pareto front lies), mean ± std over seeds, and each fit's seconds.
``--smoke`` runs in seconds.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from scipy.stats import kendalltau

from nasrlm.data import load_table
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, texts_and_free_labels
from nasrlm.priors.feature_prior import KINDS, FeaturePrior
from nasrlm.priors.inputs import InputRoles
from nasrlm.priors.transfer import TRANSFER_LABEL
from search_spaces import get_space


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--space", default="nb201")
    p.add_argument("--objectives", default="acc", help="columns of the space's table, comma-separated")
    p.add_argument("--sizes", default="10,20,50,100", help="labelled rows")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--test", type=int, default=5000, help="held-out rows ranked")
    p.add_argument("--kinds", default="forest,trend-forest,gp", help=f"priors, of {', '.join(KINDS)}")
    p.add_argument("--transfer", action="store_true", help="each prior also with the base's transfer forest")
    p.add_argument("--smoke", action="store_true", help="seconds: 2 sizes, 1 seed, 200 test rows")
    a = p.parse_args()
    if a.smoke:
        a.sizes, a.seeds, a.test = "10,30", "0", 200
    sizes, seeds, kinds = ([int(s) for s in a.sizes.split(",")], [int(s) for s in a.seeds.split(",")],
                           a.kinds.split(","))
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise SystemExit(f"--kinds: unknown prior {unknown[0]!r}; choose from {', '.join(KINDS)}")
    names = a.objectives.split(",")
    space = get_space(a.space)
    table = load_table(a.space, names, data_dir=a.data_dir)
    rows = np.arange(len(table.ids))
    if a.smoke:  # label only the rows a smoke run reads
        rows = np.random.default_rng(0).permutation(rows)[: max(sizes) + a.test]
    ids, values = [table.ids[i] for i in rows], np.asarray(table.values, dtype=np.float64)[rows]
    _, labels = texts_and_free_labels(space, ids, graph=True, texts=False, progress=True)
    label_names = [o.name for o in ALL_FREE_OBJECTIVES]
    inputs = {"": (labels, InputRoles.of(label_names))}
    if a.transfer:
        from nasrlm.rlm.predictor import RLMPredictor

        transfer = RLMPredictor.from_base("shipped", [], space=a.space).transfer.for_space(space)
        inputs[" + transfer"] = (np.column_stack([labels, transfer.predict(labels)]),
                                 InputRoles.of([*label_names, TRANSFER_LABEL]))  # no line follows its guess
    maximize = [o.higher_is_better for o in table.objectives]

    results: dict[tuple, list[tuple[float, float, float]]] = defaultdict(list)
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(ids))
        for n in sizes:
            train, test = order[:n], order[n : n + a.test]
            for kind in kinds:
                for label, (x, roles) in inputs.items():
                    start = time.perf_counter()
                    prior, _ = FeaturePrior.fit(x[train], values[train], kind=kind, seed=seed,
                                                costs=[not m for m in maximize], **roles.keywords())
                    seconds = time.perf_counter() - start
                    predicted = prior.mean(x[test])  # normal scores rise with each objective
                    for k, name in enumerate(names):
                        sign = 1 if maximize[k] else -1  # τ of "predicted better" with "truly better"
                        truth = sign * values[test, k]
                        best = truth >= np.quantile(truth, 0.75)
                        guess = sign * predicted[:, k]
                        results[(name, n, kind + label)].append(
                            (kendalltau(guess, truth)[0], kendalltau(guess[best], truth[best])[0], seconds))
                    print(f"seed {seed} @{n} {kind}{label}: {seconds:.1f} s", flush=True)

    print(f"\n{a.space}, {len(seeds)} seed(s), {a.test:,} test rows\n")
    print("| objective | labels | prior | τ | τ, best quarter | fit s |")
    print("|---|---|---|---|---|---|")
    for (name, n, prior), runs in results.items():
        r = np.array(runs)
        print(f"| {name} | {n} | {prior} | {r[:, 0].mean():.3f} ± {r[:, 0].std():.3f} | "
              f"{r[:, 1].mean():.3f} ± {r[:, 1].std():.3f} | {r[:, 2].mean():.2f} |")


if __name__ == "__main__":
    main()
