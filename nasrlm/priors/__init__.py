"""The priors the language model stands on: what is known of an architecture before the model reads it.

The model (:mod:`nasrlm.rlm`) learns each objective as what a prior leaves unexplained, in the objective's
normal scores (:class:`NormalScores`). The priors: :class:`FreeLabelPrior`, the line prior, a straight
line through the free label (parameters, MACs) that best explains the labels; :class:`FeaturePrior`, a
forest or a ridge regression on the free and graph labels (its kinds: :data:`PRIOR_KINDS`); and
:class:`AccuracyTransfer`, what other spaces' published accuracies say of an architecture, one more input
of a feature prior (:data:`TRANSFER_LABEL`), kept beside a pre-trained base model. The labels they read
are computed by :mod:`nasrlm.free_labels`; what each named label is to a feature prior, by
:class:`InputRoles`.

The names below load when first used, as those of :mod:`nasrlm.rlm` do.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names for type checkers and editors; at run time they load lazily
    from nasrlm.priors.feature_prior import DEFAULT_PRIOR, PRIOR_KINDS, FeaturePrior
    from nasrlm.priors.inputs import InputRoles
    from nasrlm.priors.prior import (
        FreeLabelPrior,
        NormalScores,
        ScoresPrior,
        residual_weight,
        stratified_normal,
    )
    from nasrlm.priors.transfer import (
        ACCURACY_RANK,
        TAG_SEPARATOR,
        TRANSFER_LABEL,
        AccuracyTransfer,
        TransferFileError,
        is_accuracy,
    )

__all__ = [
    "ACCURACY_RANK",
    "DEFAULT_PRIOR",
    "PRIOR_KINDS",
    "TAG_SEPARATOR",
    "TRANSFER_LABEL",
    "AccuracyTransfer",
    "FeaturePrior",
    "FreeLabelPrior",
    "InputRoles",
    "NormalScores",
    "ScoresPrior",
    "TransferFileError",
    "is_accuracy",
    "residual_weight",
    "stratified_normal",
]

#: The module each public name is defined in.
_DEFINED_IN = {
    "ACCURACY_RANK": "nasrlm.priors.transfer",
    "DEFAULT_PRIOR": "nasrlm.priors.feature_prior",
    "PRIOR_KINDS": "nasrlm.priors.feature_prior",
    "TAG_SEPARATOR": "nasrlm.priors.transfer",
    "TRANSFER_LABEL": "nasrlm.priors.transfer",
    "AccuracyTransfer": "nasrlm.priors.transfer",
    "FeaturePrior": "nasrlm.priors.feature_prior",
    "FreeLabelPrior": "nasrlm.priors.prior",
    "InputRoles": "nasrlm.priors.inputs",
    "NormalScores": "nasrlm.priors.prior",
    "ScoresPrior": "nasrlm.priors.prior",
    "TransferFileError": "nasrlm.priors.transfer",
    "is_accuracy": "nasrlm.priors.transfer",
    "residual_weight": "nasrlm.priors.prior",
    "stratified_normal": "nasrlm.priors.prior",
}


def __getattr__(name: str) -> Any:  # lazy: importing one prior's module does not import the others
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
