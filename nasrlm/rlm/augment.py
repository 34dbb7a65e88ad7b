"""Labels for free: an architecture's accuracy also belongs to the architectures equivalent to it.

The canonical text keeps every operation of the network, dead ones included (they cost latency), so
two NAS-Bench-201 cells that differ only in edges whose result is never used read differently but
train to the same accuracy. A model given a thousand labels cannot tell which differences matter;
showing it equivalent texts with the same accuracy (and no latency) tells it. Spaces say what is
equivalent through :meth:`~search_spaces.SearchSpace.equivalents`; which objectives carry over is the
caller's call (accuracy does, latency and parameter counts do not).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from search_spaces import SearchSpace

__all__ = ["EquivalentRows", "equivalent_rows"]


@dataclass(frozen=True)
class EquivalentRows:
    """Extra training rows, each an architecture equivalent to a labelled one."""

    arch_ids: list[str]
    values: np.ndarray  # (len(arch_ids), objectives): the carried objectives copied, the rest NaN
    derived_from: np.ndarray  # the labelled row each one copies

    def joined(self, arch_ids: Sequence[str], values: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The labelled rows these were drawn from, followed by these: ids, values, and the
        ``derived_from`` that :meth:`~nasrlm.rlm.predictor.RLMPredictor.fit` takes (-1 for the labelled)."""
        derived_from = np.concatenate([np.full(len(arch_ids), -1, dtype=np.int64), self.derived_from])
        return [*arch_ids, *self.arch_ids], np.vstack([values, self.values]), derived_from


def equivalent_rows(space: SearchSpace, arch_ids: Sequence[str], values: np.ndarray,
                    objectives: Sequence[str], carried: Collection[str], *, copies: int = 1,
                    seed: int = 0, exclude: Collection[str] = ()) -> EquivalentRows:
    """Up to ``copies`` random equivalents of each of ``arch_ids`` (rows of ``values``, columns
    ``objectives``), labelled with its ``carried`` objectives only.

    Labelled architectures and those in ``exclude`` (e.g. a test set, whose texts the model must not
    see) are never drawn; nor is any architecture twice.
    """
    values = np.asarray(values, dtype=np.float64).reshape(len(arch_ids), len(objectives))
    unknown = sorted(set(carried) - set(objectives))
    if unknown:
        raise ValueError(f"carried objective(s) {unknown} are not among {list(objectives)}")
    if copies < 0:
        raise ValueError(f"copies must be >= 0, got {copies}")
    keep = [k for k, name in enumerate(objectives) if name in carried]
    rng = np.random.default_rng(seed)
    taken = set(arch_ids) | set(exclude)
    ids: list[str] = []
    rows: list[int] = []
    for row, arch_id in enumerate(arch_ids):
        if copies == 0 or not np.isfinite(values[row, keep]).any():
            continue
        choices = [i for i in map(space.arch_id, space.equivalents(space.parse(arch_id))) if i not in taken]
        for k in rng.permutation(len(choices))[:copies]:
            ids.append(choices[k])
            rows.append(row)
            taken.add(choices[k])
    out = np.full((len(ids), len(objectives)), np.nan)
    out[:, keep] = values[rows][:, keep]
    return EquivalentRows(ids, out, np.array(rows, dtype=np.int64))
