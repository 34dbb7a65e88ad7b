"""Start-up trials chosen by what other spaces' accuracies say of each candidate, instead of at random.

Before the sampler's model has seen a trial, a base model's transfer forest
(:class:`~nasrlm.priors.transfer.AccuracyTransfer`: a forest from the graph labels to the accuracy of
*other* spaces) already ranks a space's architectures well above chance. The start-up trials are then
spread over the cost axis, one per equal stratum of the candidates' MACs, and in each stratum the one
the forest ranks best is evaluated: a first front across every cost, made of likely good networks,
where random draws give a handful of middling ones. Measured: experiments/README.md, "Pareto search".

The forest of the space being searched is never used, even where the base has one: it read that space's
published accuracies, which a search of that space must find by itself (and a user's own space has none).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nasrlm.data import Objective
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.priors.transfer import AccuracyTransfer, TransferFileError
from nasrlm.rlm.bases import base_directory

#: ``RLMSampler``'s start-up choices: random draws, or strata of MACs each led by the transfer forest.
STARTUPS = ("random", "transfer")

_MACS = [o.name for o in ALL_FREE_OBJECTIVES].index("macs_m")


def is_accuracy_objective(objective: Objective) -> bool:
    """Whether a study's objective is an accuracy: maximised, with the word ``acc`` in its name (``acc``,
    ``val_acc``, ``acc_surrogate``). A study knows its objectives' names and directions, not their units."""
    return objective.higher_is_better and "acc" in objective.name.rsplit(":", 1)[-1].split("_")


def startup_transfer(base: str | Path, space: str, objectives: Sequence[Objective]
                     ) -> AccuracyTransfer | None:
    """The transfer forests of the base model ``base`` (``"shipped"`` or a directory) without ``space``'s own,
    or ``None`` where the study has no accuracy objective, the base no transfer file, or no other space's
    forest."""
    if not any(is_accuracy_objective(o) for o in objectives):
        return None
    try:
        transfer = AccuracyTransfer.find(base_directory(base))
    except TransferFileError:
        return None
    sources = tuple(s for s in transfer.sources if s.space != space)
    return AccuracyTransfer(sources) if sources else None


def startup_picks(labels: np.ndarray, transfer: AccuracyTransfer, count: int,
                  rng: np.random.Generator) -> list[int]:
    """Rows of ``labels`` (candidates' free and graph labels) to evaluate first: the candidates split into
    ``count`` equal strata by MACs (ties in random order), and in each the one ``transfer`` (one source,
    :meth:`~AccuracyTransfer.narrowed` to these candidates) predicts the most accurate."""
    labels = np.asarray(labels, dtype=np.float64)
    count = min(count, len(labels))
    if count < 1:
        return []
    scores = transfer.predict(labels)
    order = np.lexsort((rng.random(len(labels)), labels[:, _MACS]))  # by MACs, ties at random
    strata = np.array_split(order, count)
    return [int(stratum[np.argmax(scores[stratum])]) for stratum in strata]
