"""What each input of a feature prior is to it, told by the input's name.

:class:`~nasrlm.priors.feature_prior.FeaturePrior` reads a matrix and knows no label by name: which columns a
line may follow, which are the free labels ``auto`` tries a line through first, and which are the counts a
latency adds up (read by a cost's sum alone) reach it as masks. Every caller that names its inputs takes the
masks from :meth:`InputRoles.of`: ``nasrlm train``'s prior, the sampler's, the warm start's evidence, and the
benchmarks that refit them, so that a benchmark measures the prior the library fits (a script that built its
own masks once measured a prior ``nasrlm train`` never fitted: experiments/README.md, "NDS ImageNet files
from few records").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nasrlm.free_labels import FREE_LABEL_NAMES, SUMMED_LABELS
from nasrlm.priors.transfer import TRANSFER_LABEL


@dataclass(frozen=True)
class InputRoles:
    """Masks over a prior's inputs, each (inputs,) bool, in :meth:`FeaturePrior.fit`'s terms."""

    #: the inputs a line may follow: every label, not the transfer forest's guess (another model's output)
    line: np.ndarray
    #: the free labels (parameters, MACs), through the best of which ``auto`` tries a line first
    free: np.ndarray
    #: counts a latency adds up (:data:`~nasrlm.free_labels.SUMMED_LABELS`), which only a cost's sum reads
    summed: np.ndarray

    @classmethod
    def of(cls, names: Sequence[str]) -> InputRoles:
        """The roles of inputs named ``names``, in order (a warm start's evidence: a line may follow it)."""
        return cls(np.array([n != TRANSFER_LABEL for n in names], dtype=bool),
                   np.array([n in FREE_LABEL_NAMES for n in names], dtype=bool),
                   np.array([n in SUMMED_LABELS for n in names], dtype=bool))

    def keywords(self) -> dict[str, np.ndarray]:
        """:meth:`FeaturePrior.fit`'s ``line_inputs``, ``free_inputs`` and ``summed_inputs``."""
        return {"line_inputs": self.line, "free_inputs": self.free, "summed_inputs": self.summed}
