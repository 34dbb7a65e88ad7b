"""An ensemble of decoders on one frozen encoder: what :meth:`RLMPredictor.fit
<nasrlm.rlm.predictor.RLMPredictor.fit>` trains when ``TrainConfig.members`` > 1, and how its samples are
drawn.

One decoder fine-tuned on a few hundred labels lands anywhere in a spread of rankings; several, each from
the same start with a batch order and dropout of its own, pooled, rank better and vary less
(experiments/README.md, "Who carries the prediction"). Each holds out a validation split of its own where it
stops early on it (``TrainConfig.keep_best``); where every member keeps its last step, only the first holds
rows out, whose samples calibrate the spread, and the others train on every row. They share everything
the encoder computes, so a member is only the weights that train with the encoder frozen, and sampling encodes
each text once.

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
from nasrlm.rlm.recipes import TrainConfig
from nasrlm.rlm.training import FROZEN_WITH_THE_ENCODER, TrainReport, train

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
                  derived_from: Sequence[int] | None = None
                  ) -> tuple[TrainReport, list[Weights], np.ndarray]:
    """:func:`~nasrlm.rlm.training.train` ``config.members`` times from the weights ``model`` has now, each
    with a batch order and dropout of its own (``member``), and a validation split of its own where it
    stops early on it (``config.keep_best``; else the members after the first train on every row): the
    first member's report, with the seconds of all, the other members' weights, and every row some member
    held out; ``model`` ends with the first member's weights (a :class:`~nasrlm.rlm.recipes.TrainConfig`
    with more than one member has a frozen encoder, which they share)."""
    start = own_weights(model) if config.members > 1 else None
    report = train(model, inputs, targets, objectives, config, derived_from=derived_from)
    others: list[Weights] = []
    held_out = set(report.validation_rows)
    split = config.validation_fraction if config.keep_best else 0.0  # the first member's rows calibrate
    quiet = replace(config, progress=False, validation_fraction=split)
    for member in range(1, config.members):
        # each from the start; leaving the block puts the first member's weights back
        with wearing(model, start):
            theirs = train(model, inputs, targets, objectives, quiet, derived_from=derived_from,
                           member=member)
            others.append(own_weights(model))
        report.seconds += theirs.seconds
        held_out.update(theirs.validation_rows)
    return report, others, np.array(sorted(held_out), dtype=np.int64)


def pooled(members: Sequence[Weights | None], num_samples: int) -> list[tuple[Weights | None, int]]:
    """How ``num_samples`` samples of one text are shared among ``members`` (``None``: the model's own
    weights): as evenly as they go, the first members taking the remainder, none for a member whose share
    is 0 (a greedy reading of one sample is the first member's)."""
    shares = [len(part) for part in np.array_split(np.arange(num_samples), len(members))]
    return [(weights, share) for weights, share in zip(members, shares, strict=True) if share]
