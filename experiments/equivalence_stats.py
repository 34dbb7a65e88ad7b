"""How much NB201 accuracy do equivalent cells share, and how much of a test set could they explain?

    python experiments/equivalence_stats.py --data-dir ../shared/data

Groups the 15,625 cells by :meth:`NasBench201.equivalents` (cells that differ only in dead edges),
prints the number of classes and the accuracy spread inside them, then, on the predictor benchmark's
splits (test 5,000, train the next ``--n``), how many test cells have an equivalent among the training
cells and how well those equivalents' mean accuracy ranks them (Kendall τ): what a model that knew the
equivalence could get on that share of the test set.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from nasrlm.data import load_nb201
from search_spaces import NasBench201


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--n", type=int, default=1000, help="training cells")
    parser.add_argument("--test-size", type=int, default=5000)
    args = parser.parse_args()

    space = NasBench201()
    table = load_nb201(["acc"], args.data_dir)
    acc = table.column("acc")
    row = {arch_id: k for k, arch_id in enumerate(table.ids)}
    label = np.full(len(table.ids), -1)  # class of each row
    for k, arch_id in enumerate(table.ids):
        if label[k] < 0:
            members = [k, *(row[space.arch_id(a)] for a in space.equivalents(space.parse(arch_id)))]
            label[members] = k
    classes = np.unique(label)
    spreads = [acc[label == c].std() for c in classes if (label == c).sum() > 1]
    print(f"{len(classes):,} classes; {np.sum(np.bincount(label)[label] > 1):,} cells have an equivalent; "
          f"accuracy std inside a class {np.mean(spreads):.2f} (mean over {len(spreads):,} classes), "
          f"across the space {acc.std():.1f}")
    for seed in (int(s) for s in args.seeds.split(",")):
        order = np.random.default_rng(seed).permutation(len(table.ids))  # the benchmark's split
        test, train = order[: args.test_size], order[args.test_size : args.test_size + args.n]
        means = {c: acc[train][label[train] == c].mean() for c in np.unique(label[train])}
        covered = np.array([k for k in test if label[k] in means])
        tau = stats.kendalltau([means[label[k]] for k in covered], acc[covered]).statistic
        print(f"seed {seed}: {len(covered):,} of {len(test):,} test cells have an equivalent among the "
              f"{args.n:,} training cells; their equivalents' mean accuracy ranks them at τ {tau:.3f}")


if __name__ == "__main__":
    main()
