"""How far NB201's true front rests on single cells, each the best of twins a cell's labels cannot tell apart.

    python experiments/front_twins.py --data-dir ../shared/data --target acc,samsung_a50

A cell's twins share its operations, counted over all six edges (what a device adds up) and over the live
edges (what the network computes). Twins are alike to a model that reads the cell, and where a table's
values spread among twins by chance, which twin holds a front point is luck. For each true-front cell
inside the reference box (the table's median of each objective, as the benchmarks' hypervolume): its
twins, how many of them are as good on each objective, and the share of the true hypervolume only it
holds (lost when it alone is missing). Where a few cells hold much, a search's hypervolume turns on
whether it tried those very cells among their twins.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from nasrlm.metrics import hypervolume
from nasrlm.search import ArchEvaluator, Truth, reference_point, restricted_to_table
from search_spaces import get_space

OPERATIONS = ("nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3", "skip_connect")


def twin_key(arch: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(operations over all edges, over the live edges) of an NB201 cell string ``|op~0|+|op~0|op~1|+...``."""
    edges = [(int(e.split("~")[1]), node + 1, e.split("~")[0])
             for node, part in enumerate(arch.split("+")) for e in part.strip("|").split("|")]
    computed = [e for e in edges if e[2] != "none"]
    reached, reaches = {0}, {3}
    for src, dst, _ in sorted(computed, key=lambda e: e[1]):
        if src in reached:
            reached.add(dst)
    for src, dst, _ in sorted(computed, key=lambda e: -e[1]):
        if dst in reaches:
            reaches.add(src)
    live = [e for e in computed if e[0] in reached and e[1] in reaches]
    return (tuple(sum(e[2] == op for e in edges) for op in OPERATIONS),
            tuple(sum(e[2] == op for e in live) for op in OPERATIONS))


def _spaced(arch: str) -> str:
    """A cell string without its bars, which would split a markdown table's cell: ``a~0 + b~0 c~1 + ...``."""
    return " + ".join(" ".join(part.strip("|").split("|")) for part in arch.split("+"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--target", default="acc,samsung_a50", help="two objectives of NB201's tables")
    p.add_argument("--smoke", action="store_true", help="the same run (it takes seconds)")
    a = p.parse_args()
    space = get_space("nb201")
    evaluator = ArchEvaluator.for_names(space, a.target.split(","), data_dir=a.data_dir)
    space, evaluator = restricted_to_table(space, evaluator)
    truth = Truth(*evaluator.truth())
    maximize, values = evaluator.maximize, truth.values
    reference = reference_point([], truth)
    front = truth.front(maximize)
    total = hypervolume(values[front], reference, maximize)
    twins: dict[tuple, list[int]] = defaultdict(list)
    for i, arch in enumerate(truth.ids):
        twins[twin_key(arch)].append(i)
    sign = np.where(maximize, 1.0, -1.0)
    inside = [i for i in front if (sign * (values[i] - reference) > 0).all()]
    print(f"# NB201 {a.target}: true front {len(front)} cells, {len(inside)} inside the reference box "
          f"{np.round(reference, 3).tolist()}")
    print("| cell | values | twins | twins' median | twins as good on each | HV share only it holds |")
    print("|---|---|---|---|---|---|")
    alone = {}
    for i in sorted(inside, key=lambda i: values[i, 1]):
        group = twins[twin_key(truth.ids[i])]
        others = [j for j in front if j != i]
        alone[i] = 1 - hypervolume(values[others], reference, maximize) / total
        as_good = [int((sign[k] * values[group, k] >= sign[k] * values[i, k]).sum()) for k in range(2)]
        print(f"| `{_spaced(truth.ids[i])}` | {np.round(values[i], 3).tolist()} | {len(group)} | "
              f"{np.round(np.median(values[group], axis=0), 3).tolist()} | {as_good} | {alone[i]:.3f} |")
    shares = sorted(alone.values(), reverse=True)
    print(f"\nHV shares only one cell holds: the largest {shares[0]:.3f}, the three largest "
          f"{sum(shares[:3]):.3f}, all {sum(shares):.3f}")

if __name__ == "__main__":
    main()
