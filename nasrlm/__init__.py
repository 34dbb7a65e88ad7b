"""nasrlm: neural architecture search with a regression language model that reads ONNX text.

Architectures come from :mod:`search_spaces`, become ONNX and canonical ONNX text through
:mod:`exporters`, and are labelled from published tables (:mod:`nasrlm.data`) or by timing them on
this machine (:mod:`nasrlm.measure`). Importing this package does not import torch.
"""

__version__ = "0.1.0"


def __getattr__(name: str):  # lazy, so that ``import nasrlm`` stays light
    if name == "RLMSampler":
        from nasrlm.search import RLMSampler

        return RLMSampler
    raise AttributeError(f"module 'nasrlm' has no attribute {name!r}")
