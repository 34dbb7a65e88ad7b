"""What a prediction says of one objective: its median, mean and quantiles, in the objective's unit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from nasrlm.data import Objective

#: Quantiles reported with every prediction.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclass(frozen=True)
class Prediction:
    """One objective's predicted distribution, in the objective's own unit."""

    median: float
    mean: float
    quantiles: dict[str, float]  # "q05" → value, …
    unit: str

    def to_dict(self) -> dict:
        return asdict(self)


def summaries(samples: np.ndarray, objectives: Sequence[str], metadata: Mapping[str, Objective]
              ) -> list[dict[str, Prediction]]:
    """Each text's :class:`Prediction` per objective (in its unit, from ``metadata``) from its ``samples``
    (texts, samples, objectives)."""
    qs = np.quantile(samples, QUANTILES, axis=1)  # (q, n, k)
    return [
        {name: Prediction(float(np.median(samples[i, :, k])), float(samples[i, :, k].mean()),
                          {f"q{round(q * 100):02d}": float(qs[j, i, k]) for j, q in enumerate(QUANTILES)},
                          metadata[name].unit)
         for k, name in enumerate(objectives)}
        for i in range(len(samples))
    ]
