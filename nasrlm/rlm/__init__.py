"""The regression language model: canonical ONNX text in, a distribution over every objective out.

:class:`RLMPredictor` is what a user needs: it trains, fine-tunes, samples, saves and loads a model
(:func:`shipped_base` is the base model shipped in the package). What it is made of is public for
experiments that take it apart: the tokenizers (:class:`OnnxTokenizer` for the input, :class:`DigitTokenizer`
for the numbers), the model (:class:`RegressionLM`, sized by :class:`RLMConfig`), its training
(:class:`TrainConfig`; the named sizes and recipes in :mod:`nasrlm.rlm.recipes`), the label normaliser
(:class:`Normalizer`),
and pre-training a base model (:mod:`nasrlm.rlm.pretraining`). The priors it learns on top of live in
:mod:`nasrlm.priors`.

Importing this package does not import torch: the names below load when first used, so that
``nasrlm --help`` can read :mod:`nasrlm.rlm.recipes` and stay light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names for type checkers and editors; at run time they load lazily
    from nasrlm.rlm.bases import SHIPPED, ModelFileError, ModelNotFoundError, shipped_base
    from nasrlm.rlm.model import RegressionLM, RLMConfig
    from nasrlm.rlm.normalize import Normalizer
    from nasrlm.rlm.prediction import Prediction
    from nasrlm.rlm.predictor import RLMPredictor
    from nasrlm.rlm.recipes import TrainConfig
    from nasrlm.rlm.tokenizers import DigitTokenizer, OnnxTokenizer

__all__ = [
    "SHIPPED",
    "DigitTokenizer",
    "ModelFileError",
    "ModelNotFoundError",
    "Normalizer",
    "OnnxTokenizer",
    "Prediction",
    "RLMConfig",
    "RLMPredictor",
    "RegressionLM",
    "TrainConfig",
    "shipped_base",
]

#: The module each public name is defined in.
_DEFINED_IN = {
    "DigitTokenizer": "nasrlm.rlm.tokenizers",
    "ModelFileError": "nasrlm.rlm.bases",
    "ModelNotFoundError": "nasrlm.rlm.bases",
    "Normalizer": "nasrlm.rlm.normalize",
    "OnnxTokenizer": "nasrlm.rlm.tokenizers",
    "Prediction": "nasrlm.rlm.prediction",
    "RLMConfig": "nasrlm.rlm.model",
    "RLMPredictor": "nasrlm.rlm.predictor",
    "RegressionLM": "nasrlm.rlm.model",
    "TrainConfig": "nasrlm.rlm.recipes",
    "SHIPPED": "nasrlm.rlm.bases",
    "shipped_base": "nasrlm.rlm.bases",
}


def __getattr__(name: str) -> Any:  # lazy, so that ``import nasrlm.rlm.recipes`` stays light
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
