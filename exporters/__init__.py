"""Architecture → ONNX model → canonical ONNX text, and latency measurement.

This package imports nothing else of nasrlm: search spaces build models with it, the regression
model reads its text, and anyone can use it on their own ONNX files. ``onnx_to_torch`` (an executable
model as a trainable ``torch.nn.Module``) imports torch when it is first used.
"""

from typing import Any

from exporters._builder import PARAM_DOMAIN, PARAM_OP, ModelBuilder
from exporters._flops import count_macs, count_parameters
from exporters._graph import FEATURE_NAMES, GraphDescription, describe_graph, graph_features
from exporters._materialize import materialize
from exporters._text import canonicalize, from_text, to_text
from exporters._torch import torch_to_onnx
from exporters.latency import DeviceProfile, LatencyResult, default_profile, measure_latency, with_batch

__all__ = [
    "DeviceProfile",
    "LatencyResult",
    "PARAM_DOMAIN",
    "PARAM_OP",
    "ModelBuilder",
    "canonicalize",
    "default_profile",
    "describe_graph",
    "GraphDescription",
    "count_macs",
    "FEATURE_NAMES",
    "graph_features",
    "count_parameters",
    "from_text",
    "materialize",
    "measure_latency",
    "to_text",
    "torch_to_onnx",
    "with_batch",
]
# onnx_to_torch, OnnxModule and SUPPORTED_OPS are attributes too, loaded on first use (they import torch),
# so they stay out of __all__: `from exporters import *` must not import torch.


def __getattr__(name: str) -> Any:
    if name in ("onnx_to_torch", "OnnxModule", "SUPPORTED_OPS"):
        from exporters import _to_torch

        return getattr(_to_torch, name)
    raise AttributeError(f"module 'exporters' has no attribute {name!r}")
