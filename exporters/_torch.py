"""Export a ``torch.nn.Module`` to an executable ONNX model whose canonical text is deterministic.

``torch`` is imported inside :func:`torch_to_onnx`, so ``import exporters`` stays torch-free.

The exporter is PyTorch's TorchScript-based one (``dynamo=False``), configured so that the graph
depends on the module's architecture only, never on its weight values:

* ``do_constant_folding=False``: with folding on, eval-mode export fuses BatchNorm into the preceding
  Conv (``count_parameters`` would drop the BN affine parameters) and turns shape computations into
  integer initializers, whose values the canonical text does not keep.
* ``keep_initializers_as_inputs=True``: this switches off the exporter's value-based deduplication
  of initializers, which otherwise merges e.g. a fresh BatchNorm's ``weight`` and ``running_var``
  (both all ones) into one tensor plus ``Identity`` nodes — a graph that changes once the weights are
  trained. The initializers are then taken out of the graph inputs again.

The ``torch.export``-based exporter (``dynamo=True``) is about 50x slower per model (0.8-1.5 s against
15-25 ms for a small CNN on torch 2.13, CPU); with ``optimize=True`` it fuses BatchNorm into Conv and folds
constants into initializers, and without it the graph carries unfolded helper nodes (e.g. six nodes
building a zero bias for every ``bias=False`` convolution). Both exporters give text that is identical
across calls and processes.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:
    import torch

#: Name of the exported model's input and (first) output, as in models built with ``ModelBuilder``.
INPUT_NAME = "x"
OUTPUT_NAME = "y"


def torch_to_onnx(module: torch.nn.Module, input_shape: Sequence[int], *, opset: int = 18) -> onnx.ModelProto:
    """Trace ``module`` in eval mode on a float32 input of ``input_shape`` into an in-memory ONNX model.

    The result is executable as it stands: weights are initializers (BatchNorm is kept, not folded into
    Conv, so :func:`~exporters.count_parameters` equals ``sum(p.numel() for p in module.parameters())``
    when every parameter is used and the module has no float buffers besides BatchNorm statistics).
    The input is ``x`` and the first output ``y``; the graph is named after the module's class; doc
    strings and metadata are removed. Training flags of ``module`` and its submodules are restored
    afterwards; exporter warnings are silenced. Tracing records the path taken for an all-zeros input,
    so data-dependent Python control flow is frozen into that path.
    """
    import torch

    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    buffer = io.BytesIO()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                (torch.zeros(tuple(int(d) for d in input_shape), dtype=torch.float32),),
                buffer,
                dynamo=False,
                opset_version=opset,
                do_constant_folding=False,
                keep_initializers_as_inputs=True,
                input_names=[INPUT_NAME],
                output_names=[OUTPUT_NAME],
                verbose=False,
            )
    finally:
        for m, training in modes:
            m.training = training
    model = onnx.load_model_from_string(buffer.getvalue())
    initializers = {init.name for init in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    model.graph.name = type(module).__name__
    _strip(model)
    return model


def _strip(model: onnx.ModelProto) -> None:
    """Remove doc strings and metadata everywhere (they may hold source paths and stack traces)."""
    model.ClearField("doc_string")
    del model.metadata_props[:]
    graph = model.graph
    graph.ClearField("doc_string")
    del graph.metadata_props[:]
    for item in [*graph.node, *graph.input, *graph.output, *graph.value_info, *graph.initializer]:
        item.ClearField("doc_string")
        del item.metadata_props[:]
