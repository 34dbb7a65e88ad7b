"""Labels that cost nothing: parameter count and multiply–accumulates, read off the ONNX graph.

They exist for every architecture of every space, so the regression model can be pre-trained on
thousands of them before it sees the few expensive labels (accuracy, measured latency).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from tqdm.auto import tqdm

from exporters import count_macs, count_parameters, materialize, to_text
from nasrlm.data import Objective
from search_spaces import SearchSpace

#: Bumped whenever a free label's definition changes, so that caches of them can tell theirs is stale
#: (2: MACs count only the nodes the output depends on).
FREE_LABELS_VERSION = 2

FREE_OBJECTIVES: tuple[Objective, ...] = (
    Objective("params_m", "M", "trainable parameters, counted on the exported ONNX graph",
              "nasrlm (ONNX graph)", higher_is_better=False),
    Objective("macs_m", "M", "multiply-accumulates of the Conv/Gemm/MatMul nodes the output depends on",
              "nasrlm (ONNX graph)", higher_is_better=False),
)


def free_labels(space: SearchSpace, arch_ids: Sequence[str], *, progress: bool = False) -> np.ndarray:
    """``(len(arch_ids), 2)`` array of millions of parameters and of multiply–accumulates."""
    out = np.empty((len(arch_ids), len(FREE_OBJECTIVES)), dtype=np.float64)
    for row, arch_id in enumerate(tqdm(arch_ids, desc="free labels", unit="arch", disable=not progress)):
        out[row] = _free_labels_of(space.build_onnx(space.parse(arch_id)))
    return out


def texts_and_free_labels(space: SearchSpace, arch_ids: Sequence[str], *, progress: bool = False
                          ) -> tuple[list[str], np.ndarray]:
    """Canonical texts (as ``space.to_text`` prints them) and :func:`free_labels`, one ONNX build each.

    What the regression model needs of every architecture; building once matters for spaces whose
    build is slow, such as torch modules traced by the exporter.
    """
    texts, out = [], np.empty((len(arch_ids), len(FREE_OBJECTIVES)), dtype=np.float64)
    for row, arch_id in enumerate(tqdm(arch_ids, desc="architectures", unit="arch", disable=not progress)):
        model = space.build_onnx(space.parse(arch_id))
        texts.append(to_text(model))
        out[row] = _free_labels_of(model)
    return texts, out


def _free_labels_of(model: onnx.ModelProto) -> tuple[float, float]:
    shapes_only = materialize(model, weights=False)  # shapes suffice, and are faster
    return count_parameters(shapes_only) / 1e6, count_macs(shapes_only) / 1e6
