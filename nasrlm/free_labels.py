"""Labels that cost nothing: parameter count and multiply–accumulates, read off the ONNX graph.

They exist for every architecture of every space, so the regression model can be pre-trained on
thousands of them before it sees the few expensive labels (accuracy, measured latency).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from exporters import count_macs, count_parameters, materialize
from nasrlm.data import Objective
from search_spaces import SearchSpace

FREE_OBJECTIVES: tuple[Objective, ...] = (
    Objective("params_m", "M", "trainable parameters, counted on the exported ONNX graph",
              "nasrlm (ONNX graph)", higher_is_better=False),
    Objective("macs_m", "M", "multiply-accumulates of Conv/Gemm/MatMul at the declared input shape",
              "nasrlm (ONNX graph)", higher_is_better=False),
)


def free_labels(space: SearchSpace, arch_ids: Sequence[str], *, progress: bool = False) -> np.ndarray:
    """``(len(arch_ids), 2)`` array of millions of parameters and of multiply–accumulates."""
    out = np.empty((len(arch_ids), len(FREE_OBJECTIVES)), dtype=np.float64)
    for row, arch_id in enumerate(tqdm(arch_ids, desc="free labels", unit="arch", disable=not progress)):
        model = materialize(space.build_onnx(space.parse(arch_id)), weights=False)  # shapes suffice
        out[row] = count_parameters(model) / 1e6, count_macs(model) / 1e6
    return out
