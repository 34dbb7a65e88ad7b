"""An ensemble of decoders on one frozen encoder: what :meth:`RLMPredictor.fit
<nasrlm.rlm.predictor.RLMPredictor.fit>` trains when ``TrainConfig.members`` > 1, and how its samples are
drawn.

Fine-tuned on a hundred labels, one decoder lands anywhere in a wide spread of rankings; several, each from
the same start on the same rows with its own batch order and dropout, pooled, rank better than the typical
one (experiments/README.md, "Who carries the prediction"). They share everything the encoder computes, so a
member is only the weights that train with the encoder frozen, and sampling encodes each text once.

The model's own weights are the first member; the others are kept as tensors (:data:`Weights`) and worn in
turn (:func:`wearing`). This module does not import the predictor's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch

from nasrlm.rlm.model import RegressionLM
from nasrlm.rlm.training import FROZEN_WITH_THE_ENCODER, TrainConfig, TrainReport, train

#: A member's weights: the model's parameters that train with the encoder frozen, by name.
Weights = dict[str, torch.Tensor]


def own_weights(model: RegressionLM) -> Weights:
    """A copy of the weights in which members differ (everything but the encoder and the embeddings it
    shares), on the CPU."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()
            if not name.startswith(FROZEN_WITH_THE_ENCODER)}


@contextmanager
def wearing(model: RegressionLM, weights: Weights | None) -> Iterator[RegressionLM]:
    """``model`` with a member's ``weights`` in place of its own for the ``with`` block (``None``: its own,
    the first member), then its own again."""
    if weights is None:
        yield model
        return
    mine = own_weights(model)
    parameters = dict(model.named_parameters())
    try:
        with torch.no_grad():
            for name, value in weights.items():
                parameters[name].copy_(value)
        yield model
    finally:
        with torch.no_grad():
            for name, value in mine.items():
                parameters[name].copy_(value)


def train_members(model: RegressionLM, inputs: Sequence[Sequence[int]], targets: np.ndarray,
                  objectives: tuple[str, ...], config: TrainConfig, *,
                  derived_from: Sequence[int] | None = None) -> tuple[TrainReport, list[Weights]]:
    """:func:`~nasrlm.rlm.training.train` ``config.members`` times from the weights ``model`` has now, the
    same validation split each time and a batch order and dropout of its own (``member``): the first
    member's report, with the seconds of all, and the other members' weights; ``model`` ends with the
    first member's. Several members need ``config.freeze_encoder`` (they share the encoder)."""
    if config.members < 1:
        raise ValueError(f"members must be at least 1, got {config.members}")
    if config.members > 1 and not config.freeze_encoder:
        raise ValueError("members > 1 need freeze_encoder=True: the members share the encoder")
    start = own_weights(model) if config.members > 1 else None
    report = train(model, inputs, targets, objectives, config, derived_from=derived_from)
    others: list[Weights] = []
    quiet = replace(config, progress=False)
    for member in range(1, config.members):
        # each from the start; leaving the block puts the first member's weights back
        with wearing(model, start):
            report.seconds += train(model, inputs, targets, objectives, quiet, derived_from=derived_from,
                                    member=member).seconds
            others.append(own_weights(model))
    return report, others


def pooled(members: Sequence[Weights | None], num_samples: int) -> list[tuple[Weights | None, int]]:
    """How ``num_samples`` samples of one text are shared among ``members`` (``None``: the model's own
    weights): as evenly as they go, the first members taking the remainder, none for a member whose share
    is 0 (a greedy reading of one sample is the first member's)."""
    shares = [len(part) for part in np.array_split(np.arange(num_samples), len(members))]
    return [(weights, share) for weights, share in zip(members, shares, strict=True) if share]
