"""How far NB201's true front rests on single cells, each the best of many twins of the same operations.

    python experiments/front_twins.py --data-dir ../shared/data --target acc,samsung_a50

A cell's twins share its operations, counted over all six edges (what a device adds up) and over the live
edges (what the network computes); they may still differ in wiring, which the graph labels read. Where a
table's values spread among twins by chance, which twin holds a front point is luck; where by wiring, a
model may learn it. For each true-front cell inside the reference box (the table's median of each
objective, as the benchmarks' hypervolume): its twins, how many of them are as good on each objective, and
the share of the true hypervolume only it holds (lost when it alone is missing). Where a few cells hold
much, a search's hypervolume turns on whether it tried those very cells among their twins.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from nasrlm.metrics import hypervolume
from nasrlm.search import ArchEvaluator, Truth, reference_point, restricted_to_table
from search_spaces import get_space
from search_spaces.nasbench201 import NasBench201, live_ops

OPERATIONS = ("nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3", "skip_connect")


def twin_key(space: NasBench201, arch_id: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(each operation's count over all six edges, over the live ones) of an NB201 cell."""
    ops = space.parse(arch_id).ops
    live = live_ops(ops)
    return tuple(ops.count(op) for op in OPERATIONS), tuple(live.count(op) for op in OPERATIONS)


def _spaced(arch: str) -> str:
    """A cell string without its bars, which would split a markdown table's cell: ``a~0 + b~0 c~1 + ...``."""
    return " + ".join(" ".join(part.strip("|").split("|")) for part in arch.split("+"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", required=True)
    p.add_argument("--target", default="acc,samsung_a50", help="two objectives of NB201's tables")
    p.add_argument("--smoke", action="store_true", help="the same run (it takes seconds)")
    a = p.parse_args()
    names = a.target.split(",")
    if len(names) != 2:
        p.error(f"--target: two objectives, got {len(names)} ({a.target!r})")
    nb201 = get_space("nb201")
    _, evaluator = restricted_to_table(nb201, ArchEvaluator.for_names(nb201, names, data_dir=a.data_dir))
    truth = Truth(*evaluator.truth())
    maximize, values = evaluator.maximize, truth.values
    reference = reference_point([], truth)
    front = truth.front(maximize)
    total = hypervolume(values[front], reference, maximize)
    keys = [twin_key(nb201, arch) for arch in truth.ids]
    twins: dict[tuple, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        twins[key].append(i)
    sign = np.where(maximize, 1.0, -1.0)
    inside = [i for i in front if (sign * (values[i] - reference) > 0).all()]
    print(f"# NB201 {a.target}: true front {len(front)} cells, {len(inside)} inside the reference box "
          f"{np.round(reference, 3).tolist()}")
    print("| cell | values | twins | twins' median | twins as good on each | HV share only it holds |")
    print("|---|---|---|---|---|---|")
    alone = {}
    for i in sorted(inside, key=lambda i: values[i, 1]):
        group = twins[keys[i]]
        others = [j for j in front if j != i]
        alone[i] = 1 - hypervolume(values[others], reference, maximize) / total
        as_good = [int((sign[k] * values[group, k] >= sign[k] * values[i, k]).sum()) for k in range(2)]
        print(f"| `{_spaced(truth.ids[i])}` | {np.round(values[i], 3).tolist()} | {len(group)} | "
              f"{np.round(np.median(values[group], axis=0), 3).tolist()} | {as_good} | {alone[i]:.3f} |")
    if not alone:
        raise SystemExit("no true-front cell lies inside the reference box: no share to tell")
    shares = sorted(alone.values(), reverse=True)
    print(f"\nHV shares only one cell holds: the largest {shares[0]:.3f}, the three largest "
          f"{sum(shares[:3]):.3f}, all {sum(shares):.3f}")


if __name__ == "__main__":
    main()
