"""An architecture's accuracy also belongs to the architectures equivalent to it.

The canonical text keeps every operation of the network, dead ones included (they cost latency), so
two NAS-Bench-201 cells that differ only in edges whose result is never used read differently but
train to the same accuracy. The language model does not see which differences matter, so it is shown
equivalent texts twice over: as extra training rows carrying the accuracy and no latency
(:func:`equivalent_rows`), and at prediction time, when an architecture's accuracy is read through
several texts of its class and their samples pooled (:func:`equivalent_readings`), so that equivalent
architectures get one prediction. Spaces say what is equivalent through
:meth:`~search_spaces.SearchSpace.equivalents`; accuracies carry over (:func:`shared_by_equivalents`),
latency and parameter counts do not.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np

from nasrlm.data import Objective
from nasrlm.priors.transfer import ACCURACY_RANK
from search_spaces import SearchSpace

__all__ = ["EQUIVALENT_READINGS", "EquivalentReadings", "EquivalentRows", "equivalence_class",
           "equivalent_readings", "equivalent_rows", "shared_by_equivalents"]

#: Texts of its equivalence class an architecture's accuracy is read through by default (the class's
#: size where smaller): experiments/README.md, "Who carries the prediction".
EQUIVALENT_READINGS = 4


def shared_by_equivalents(objective: Objective) -> bool:
    """Whether equivalent architectures share ``objective``: an accuracy (a percentage, or the
    cross-space accuracy rank) does; a latency, a parameter count or a proxy need not."""
    return objective.unit == "%" or objective.name == ACCURACY_RANK.name


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
        choices = [i for i in _equivalent_ids(space, arch_id) if i not in taken]
        for k in rng.permutation(len(choices))[:copies]:
            ids.append(choices[k])
            rows.append(row)
            taken.add(choices[k])
    out = np.full((len(ids), len(objectives)), np.nan)
    out[:, keep] = values[rows][:, keep]
    return EquivalentRows(ids, out, np.array(rows, dtype=np.int64))


@dataclass(frozen=True)
class EquivalentReadings:
    """The texts each architecture is read through: ``readers[groups[i]]`` for the ``i``-th one asked."""

    readers: list[str]  # architecture ids, each once
    groups: list[np.ndarray]  # per architecture asked, indices into readers (one for a class of one)

    @property
    def trivial(self) -> bool:
        """Whether every architecture is read through one text: pooling changes nothing."""
        return all(len(g) == 1 for g in self.groups)

    def pooled(self, arch_ids: Sequence[str], draws: Callable[[list[str], int], np.ndarray], num_samples: int,
               shared: Sequence[int], width: int) -> np.ndarray:
        """Samples (len(arch_ids), num_samples, width) of the architectures these readings were made for,
        ``draws(ids, n)`` drawing ``n`` of each of ``ids``: columns ``shared`` read through each one's
        readers, ``num_samples`` divided among them, the class's median with each text's spread (as
        calibrated) around it; the other columns through the architecture's own text. Each reader is decoded
        once (classes are disjoint)."""
        if self.trivial:
            return draws(list(arch_ids), num_samples)
        out = np.empty((len(arch_ids), num_samples, width))
        read: dict[int, np.ndarray] = {}  # a reader's draws
        if len(shared) < width:
            out[:] = draws(list(arch_ids), num_samples)
            for row, group in enumerate(self.groups):  # a class of one is read through its own text
                if len(group) == 1:
                    read[int(group[0])] = out[row]
        share = np.zeros(len(self.readers), dtype=np.int64)
        for group in self.groups:
            share[group] = num_samples // len(group) + (np.arange(len(group)) < num_samples % len(group))
        share[list(read)] = 0
        for n in np.unique(share[share > 0]):
            rows = np.flatnonzero(share == n)
            read.update(zip(rows.tolist(), draws([self.readers[r] for r in rows], int(n)), strict=True))
        for i, group in enumerate(self.groups):
            parts = [read[r][:, shared] for r in group.tolist()]
            if len(parts) > 1:
                centre = np.median(np.concatenate(parts), axis=0)
                parts = [part - np.median(part, axis=0) + centre for part in parts]
            out[i][:, shared] = np.concatenate(parts)
        return out


def equivalent_readings(space: SearchSpace, arch_ids: Sequence[str], k: int = EQUIVALENT_READINGS, *,
                        seed: int = 0) -> EquivalentReadings:
    """Up to ``k`` members of each architecture's equivalence class (itself and
    :meth:`~search_spaces.SearchSpace.equivalents`), drawn at random but the same for every member of a
    class, whichever are asked with it: equivalent architectures are read through the same texts and
    so get the same prediction. ``k`` of 1 or less reads each through its own text.
    """
    if k <= 1:
        return EquivalentReadings(list(dict.fromkeys(arch_ids)), _own_groups(arch_ids))
    readers: dict[str, int] = {}
    groups: list[np.ndarray] = []
    chosen: dict[str, list[str]] = {}  # an architecture -> the ids its class is read through
    for arch_id in arch_ids:
        if arch_id not in chosen:
            members = sorted({arch_id, *_equivalent_ids(space, arch_id)})
            rng = np.random.default_rng([seed, zlib.crc32(members[0].encode())])
            picked = [members[j] for j in sorted(rng.permutation(len(members))[:k])]
            chosen.update(dict.fromkeys(members, picked))  # each class is listed once
        groups.append(np.array([readers.setdefault(i, len(readers)) for i in chosen[arch_id]]))
    return EquivalentReadings(list(readers), groups)


def equivalence_class(space: SearchSpace, arch_id: str) -> str:
    """The name of ``arch_id``'s equivalence class: the smallest id among its members (``arch_id`` itself
    where the space knows no equivalent)."""
    return min([arch_id, *_equivalent_ids(space, arch_id)])


def _equivalent_ids(space: SearchSpace, arch_id: str) -> list[str]:
    """The ids of the architectures equivalent to ``arch_id`` (itself not included)."""
    return [space.arch_id(a) for a in space.equivalents(space.parse(arch_id))]


def _own_groups(arch_ids: Sequence[str]) -> list[np.ndarray]:
    """Each of ``arch_ids`` read through its own text: indices into its distinct ids, in order."""
    index: dict[str, int] = {}
    return [np.array([index.setdefault(i, len(index))]) for i in arch_ids]
