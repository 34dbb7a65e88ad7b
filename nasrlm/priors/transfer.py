"""What other spaces' published accuracies say about a new architecture: a prior input learned across spaces.

The graph labels (:data:`~nasrlm.free_labels.GRAPH_OBJECTIVES`) name the same things in every space:
convolutions along the input-to-output paths, the order of operator families across a block, depth,
width. So a forest fitted on the accuracy *ranks* of NAS-Bench-101 cells ranks NAS-Bench-201 cells it
never saw well above their parameter count, and the other way round. :class:`AccuracyTransfer` holds
one such forest per space a base model is pre-trained on (``nasrlm pretrain`` writes them as
:data:`TRANSFER_FILE` beside the base's weights), and a fine-tuning (``nasrlm train --base``) reads the
one of the space most like its own (:meth:`AccuracyTransfer.narrowed`): which operator families and structures
its graphs have at all. Not all spaces agree on what makes a network good (NAS-Bench-301's ranks
transfer to NB201 far worse than NB101's), and one forest pooled over both lost most of NB101's gain.
The chosen forest's prediction for an architecture is one more input of the feature
prior (:data:`TRANSFER_LABEL`): where the prior has a few dozen labels it leans on it, with a thousand
the forest of the space's own labels outgrows it.

Each space's headline accuracy (:func:`is_accuracy`) is read in normal scores within the space (a 94 %
CIFAR-10 cell and a 77 % ImageNet network are both "good"); a row with several such columns scores
their mean. Measured gains:
experiments/README.md, "Transfer from a pre-trained base model".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save_file

from nasrlm._safetensors import sort_metadata
from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, FREE_LABELS_VERSION, SAME_LABELS_SINCE, free_labels
from nasrlm.priors.models import Forest
from nasrlm.priors.prior import NormalScores
from search_spaces import SearchSpace

__all__ = ["TRANSFER_FILE", "TRANSFER_LABEL", "AccuracyTransfer", "SourceForest", "TransferFileError",
           "is_accuracy"]

#: Where a base model keeps its transfer forest, beside ``config.json``.
TRANSFER_FILE = "transfer.safetensors"
#: Separates a space from an objective in a base model's tags (``nb201:pixel3``).
TAG_SEPARATOR = ":"
#: The name of the prior input the forest's prediction becomes.
TRANSFER_LABEL = "transfer_acc"
#: Rows per space a forest is fitted on (a random subset beyond): NB101's 2,000 transferred to NB201
#: better than 8,000 (experiments/README.md, "Across spaces").
ROWS_PER_SPACE = 2000
#: Trees, and the fewest rows a leaf holds: well under a megabyte per space.
TREES = 100
MIN_LEAF = 10
#: Fewest rows with an accuracy for a space to be a source.
MIN_ROWS = 20
#: Random architectures of a space that tell which source's graphs are most like its own.
PROFILE_ARCHS = 100

_COLUMNS = tuple(o.name for o in ALL_FREE_OBJECTIVES)


class TransferFileError(NasrlmError, ValueError):
    """A transfer file that is missing, corrupt, or made from graph labels of another version."""


#: One tag shared by every space with a published accuracy: that accuracy's quantile among the space's
#: labelled rows. Decoded after the structural tags of a batch, it teaches the decoder what accuracy looks
#: like across spaces, so that a base predicts the accuracy rank of a space whose accuracy it never saw
#: (zero-shot), and a new accuracy column starts from it when fine-tuning (``RLMPredictor.from_base``).
ACCURACY_RANK = Objective("accuracy_rank", "quantile",
                          "the space's headline accuracy as a quantile among its labelled architectures "
                          "(0 worst, 1 best), one tag across spaces", "nasrlm (published accuracies)", True)


def is_accuracy(objective: Objective) -> bool:
    """Whether a published column is a space's headline accuracy: a percentage where higher is better,
    named ``acc`` or ``acc_...`` (OFA's ``acc_surrogate``), in a tag or not (``nb101:acc``).

    Accuracies after short schedules (``cifar10_valid_acc_12ep``) rank small networks that learn fast
    first: mixed in, they made the forest transfer worse (experiments/README.md)."""
    name = objective.name.rsplit(":", 1)[-1]
    return objective.unit == "%" and objective.higher_is_better and (name == "acc" or name.startswith("acc_"))


@dataclass(frozen=True)
class SourceForest:
    """What one space's published accuracy says of a graph: a forest from the free and graph labels to
    the accuracy's normal score in that space, and how that space's graphs look."""

    space: str
    tags: tuple[str, ...]  # the columns it was fitted on (``space:objective``)
    rows: int
    forest: Forest
    profile: np.ndarray  # per label it reads, the share of the space's rows where it is not zero
    labels: tuple[str, ...] = _COLUMNS  # the free and graph labels it reads, by name (a file's may be fewer)

    def predict(self, labels: np.ndarray) -> np.ndarray:
        """Its score of rows of today's free and graph labels (n, len(ALL_FREE_OBJECTIVES))."""
        return self.forest.predict(self._read(labels))

    def distance(self, labels: np.ndarray) -> float:
        """How unlike this space's graphs the rows ``labels`` are: the mean difference, over labels, of
        the share of rows where each is not zero (0: the same families and structures, 1: none shared)."""
        return float(np.abs((self._read(labels) != 0).mean(axis=0) - self.profile).mean())

    def _read(self, labels: np.ndarray) -> np.ndarray:
        labels = _checked(labels)
        return labels if self.labels == _COLUMNS else labels[:, [_COLUMNS.index(c) for c in self.labels]]


@dataclass(frozen=True)
class AccuracyTransfer:
    """One :class:`SourceForest` per space; :meth:`narrowed` picks the one for a new space's rows."""

    sources: tuple[SourceForest, ...]

    def __post_init__(self) -> None:
        if len({s.labels for s in self.sources}) > 1:  # a file names the labels once
            raise ValueError("the source forests of one transfer must read the same labels")

    @classmethod
    def fit(cls, tables: Sequence[tuple[str, Sequence[str], np.ndarray, np.ndarray]], *, seed: int = 0
            ) -> AccuracyTransfer:
        """From ``tables``, one per space: its name, its accuracy column tags, its rows' free and graph
        labels (n, len(ALL_FREE_OBJECTIVES)) and their accuracies (n, len(tags); NaN where unknown)."""
        rng = np.random.default_rng(seed)
        sources = []
        for space, tags, labels, values in tables:
            labels = _checked(labels)
            values = np.asarray(values, dtype=np.float64).reshape(len(labels), len(tags))
            scores = np.full(values.shape, np.nan)
            for k in range(len(tags)):
                known = ~np.isnan(values[:, k])
                if known.sum() >= MIN_ROWS:
                    scores[known, k] = NormalScores.fit(values[known, k]).forward(values[known, k])
            rows = np.flatnonzero(~np.isnan(scores).all(axis=1))
            if len(rows) < MIN_ROWS:
                continue
            if len(rows) > ROWS_PER_SPACE:
                rows = np.sort(rng.choice(rows, ROWS_PER_SPACE, replace=False))
            forest, _ = Forest.fit(labels[rows], np.nanmean(scores[rows], axis=1), seed, trees=TREES,
                                   min_leaf=MIN_LEAF)
            used = tuple(t for k, t in enumerate(tags) if np.isfinite(scores[:, k]).any())
            sources.append(SourceForest(space, used, len(rows), forest, (labels[rows] != 0).mean(axis=0)))
        if not sources:
            raise ValueError(f"no accuracy column with {MIN_ROWS} known values: nothing to transfer from")
        return cls(tuple(sources))

    @property
    def tags(self) -> tuple[str, ...]:
        """Every column the forests were fitted on: a benchmark checks that none is its target."""
        return tuple(t for s in self.sources for t in s.tags)

    def for_space(self, space: SearchSpace, *, archs: int = PROFILE_ARCHS, seed: int = 0) -> AccuracyTransfer:
        """:meth:`narrowed` to ``archs`` random architectures of ``space``."""
        return self.narrowed(free_labels(space, space.sample_ids(archs, seed=seed), graph=True))

    def narrowed(self, labels: np.ndarray) -> AccuracyTransfer:
        """The transfer from the one space whose graphs are most like the rows ``labels`` (e.g. a
        sample of the space searched)."""
        return AccuracyTransfer((min(self.sources, key=lambda s: s.distance(labels)),))

    def predict(self, labels: np.ndarray) -> np.ndarray:
        """The transferred accuracy score, (n,), of rows of free and graph labels
        (n, len(ALL_FREE_OBJECTIVES)); one source only (see :meth:`narrowed`)."""
        if len(self.sources) != 1:
            raise ValueError(f"this transfer holds {len(self.sources)} spaces' forests: narrowed() it to "
                             "the rows of the space it is for first")
        return self.sources[0].predict(labels)

    def save(self, path: str | Path) -> None:
        arrays, meta = {}, []
        for k, s in enumerate(self.sources):
            arrays.update(s.forest.arrays(f"source{k}"))
            arrays[f"source{k}.profile"] = s.profile
            meta.append({"space": s.space, "tags": list(s.tags), "rows": s.rows})
        columns = self.sources[0].labels if self.sources else _COLUMNS
        metadata = {"sources": json.dumps(meta), "free_labels_version": str(FREE_LABELS_VERSION),
                    "columns": json.dumps(columns)}
        save_file(arrays, str(path), metadata=metadata)
        sort_metadata(path)

    @classmethod
    def load(cls, path: str | Path) -> AccuracyTransfer:
        """Read a file written by :meth:`save`; a corrupt or outdated one raises
        :class:`TransferFileError`."""
        from safetensors import safe_open

        try:
            with safe_open(str(path), framework="numpy") as f:
                metadata = f.metadata() or {}
            arrays = load_file(str(path))
            version = int(metadata["free_labels_version"])
            columns = tuple(json.loads(metadata["columns"]))
            sources = tuple(SourceForest(m["space"], tuple(m["tags"]), int(m["rows"]),
                                         Forest.from_arrays(arrays, f"source{k}"),
                                         arrays[f"source{k}.profile"], columns)
                            for k, m in enumerate(json.loads(metadata["sources"])))
        except FileNotFoundError:
            raise TransferFileError(f"{path}: no such transfer file") from None
        except (SafetensorError, OSError, KeyError, ValueError, TypeError) as error:
            raise TransferFileError(f"{path}: not a transfer file ({error})") from None
        if not SAME_LABELS_SINCE <= version <= FREE_LABELS_VERSION or not set(columns) <= set(_COLUMNS):
            raise TransferFileError(f"{path}: made from graph labels of version {version}, these are "
                                    f"version {FREE_LABELS_VERSION}; pre-train the base again")
        if not sources:
            raise TransferFileError(f"{path}: not a transfer file (no source forest)")
        if any(len(s.profile) != len(columns) for s in sources):
            raise TransferFileError(f"{path}: not a transfer file ({len(columns)} columns named, "
                                    f"{len(sources[0].profile)} profiled)")
        return cls(sources)

    @classmethod
    def find(cls, path: str | Path) -> AccuracyTransfer:
        """Load a transfer file, or the one in a base model directory."""
        path = Path(path)
        return cls.load(path / TRANSFER_FILE if path.is_dir() else path)


def _checked(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels, dtype=np.float64)
    if labels.ndim != 2 or labels.shape[1] != len(_COLUMNS):
        raise ValueError(f"expected rows of the {len(_COLUMNS)} free and graph labels, got shape "
                         f"{labels.shape}")
    return labels
