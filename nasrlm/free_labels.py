"""Labels that cost nothing, read off the ONNX graph: parameters, multiply–accumulates, structure.

They exist for every architecture of every space, so the regression model can be pre-trained on
thousands of them before it sees the few expensive labels (accuracy, measured latency). Two kinds:
:data:`FREE_OBJECTIVES` (parameter count and MACs), which the decoder is given before it writes any
expensive label, and :data:`GRAPH_OBJECTIVES`, structural counts of operator families along the
graph's input→output paths (:func:`exporters.graph_features`), which teach the encoder to read the
graph and feed the prior.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from tqdm.auto import tqdm

from exporters import FEATURE_NAMES, describe_graph, to_text
from nasrlm.data import Objective
from search_spaces import SearchSpace

#: Bumped whenever a free label's definition changes, so that caches of them can tell theirs is stale
#: (2: MACs count only the nodes the output depends on; 3: the graph labels; 4: their block counts;
#: 5: no path through a product with zero; 6: the order of families along a block's paths).
FREE_LABELS_VERSION = 6

FREE_OBJECTIVES: tuple[Objective, ...] = (
    Objective("params_m", "M", "trainable parameters, counted on the exported ONNX graph",
              "nasrlm (ONNX graph)", higher_is_better=False),
    Objective("macs_m", "M", "multiply-accumulates of the Conv/Gemm/MatMul nodes the output depends on",
              "nasrlm (ONNX graph)", higher_is_better=False),
)

_GRAPH_DESCRIPTIONS = {
    "log10_paths": "base-10 logarithm of the number of input-to-output paths",
    "compute_path": "convolutions and fully connected layers on an input-to-output path",
    "nodes": "live {family} nodes",
    "path_mean": "{family} nodes on an input-to-output path, mean over all paths",
    "path_min": "{family} nodes on an input-to-output path, fewest",
    "path_max": "{family} nodes on an input-to-output path, most",
    "segments": "segments of the graph between nodes that every input-to-output path passes through",
    "segment_paths": "paths across each such segment, summed over the segments",
    "segment_paths_": "paths across each segment that meet a {family} node, summed over the segments",
    "blocks": "calls of local functions (blocks, cells) in the main graph",
    "block_paths": "paths across each block's body, summed over the blocks",
    "block_paths_": "paths across each block's body that meet a {family} node, summed over the blocks",
    "block_compute_min": "fewest convolutions and fully connected layers on a path across a block, summed",
    "block_compute_max": "most convolutions and fully connected layers on a path across a block, summed",
    "block_pair_": "how often {first} is followed by {second} on a path across a block, with no node of any "
                   "family between them; over the block's paths, summed over the blocks",
}
_FAMILY_NAMES = {"conv1": "1x1 convolution", "conv3": "3x3 convolution", "conv5": "5x5-or-wider convolution",
                 "dwconv": "grouped or depthwise convolution", "fc": "fully connected", "pool": "pooling",
                 "compute": "convolution or fully connected"}
_PAIR_ENDS = {"start": "the block's input", "end": "the block's output"}
_LAYER = {"fc": " layer", "pool": " layer"}  # "a pooling layer", where "a 3x3 convolution" needs none


def _graph_objective(name: str) -> Objective:
    if name in _GRAPH_DESCRIPTIONS:
        text = _GRAPH_DESCRIPTIONS[name]
    elif name.startswith("block_pair_"):
        first, second = (_PAIR_ENDS.get(f) or f"a {_FAMILY_NAMES[f]}{_LAYER.get(f, '')}"
                         for f in name.removeprefix("block_pair_").split("_"))
        text = _GRAPH_DESCRIPTIONS["block_pair_"].format(first=first, second=second)
    elif name.startswith(("segment_paths_", "block_paths_")):
        prefix, family = name.rsplit("_", 1)
        text = _GRAPH_DESCRIPTIONS[prefix + "_"].format(family=_FAMILY_NAMES[family])
    elif name.startswith("compute_path_"):
        stat = {"min": "fewest", "max": "most", "mean": "mean over all paths"}[name.rsplit("_", 1)[1]]
        text = f"{_GRAPH_DESCRIPTIONS['compute_path']}, {stat}"
    else:
        family, stat = name.split("_", 1)
        text = _GRAPH_DESCRIPTIONS[stat].format(family=_FAMILY_NAMES[family])
    return Objective(name, "", text, "nasrlm (ONNX graph)", higher_is_better=False)


GRAPH_OBJECTIVES: tuple[Objective, ...] = tuple(_graph_objective(n) for n in FEATURE_NAMES)
#: Every free label, in column order of ``free_labels(..., graph=True)``.
ALL_FREE_OBJECTIVES: tuple[Objective, ...] = (*FREE_OBJECTIVES, *GRAPH_OBJECTIVES)


def free_labels(space: SearchSpace, arch_ids: Sequence[str], *, graph: bool = False,
                progress: bool = False) -> np.ndarray:
    """Millions of parameters and of multiply–accumulates, one row per id: ``(len(arch_ids), 2)``;
    with ``graph``, followed by the :data:`GRAPH_OBJECTIVES` (columns of :data:`ALL_FREE_OBJECTIVES`)."""
    return texts_and_free_labels(space, arch_ids, graph=graph, progress=progress, texts=False)[1]


def texts_and_free_labels(space: SearchSpace, arch_ids: Sequence[str], *, graph: bool = False,
                          progress: bool = False, texts: bool = True) -> tuple[list[str], np.ndarray]:
    """Canonical texts (as ``space.to_text`` prints them) and :func:`free_labels`, one ONNX build each.

    What the regression model needs of every architecture; building once matters for spaces whose
    build is slow, such as torch modules traced by the exporter. ``texts=False`` skips the texts.
    """
    columns = len(ALL_FREE_OBJECTIVES) if graph else len(FREE_OBJECTIVES)
    printed, out = [], np.empty((len(arch_ids), columns), dtype=np.float64)
    desc = "architectures" if texts else "free labels"
    for row, arch_id in enumerate(tqdm(arch_ids, desc=desc, unit="arch", disable=not progress)):
        model = space.build_onnx(space.parse(arch_id))
        if texts:
            printed.append(to_text(model))
        out[row] = _free_labels_of(model, graph)
    return printed, out


def _free_labels_of(model: onnx.ModelProto, graph: bool) -> list[float]:
    described = describe_graph(model, features=graph)
    labels = [described.parameters / 1e6, described.macs / 1e6]
    if described.features is not None:
        labels.extend(described.features[name] for name in FEATURE_NAMES)
    return labels
