"""Every named way the package trains a model, each a value with its settings in one place.

A run's settings are a :class:`TrainConfig` (what :func:`~nasrlm.rlm.training.train` reads); a
:class:`Recipe` is a named way to make one for a number of rows: :data:`TRAIN` (``nasrlm train
--scratch``), :data:`FINE_TUNE` (a base's whole model beside a residual prior), :data:`DECODER_TUNE` (the
decoder beside a feature prior it is blended with: ``nasrlm train``'s default), :data:`ALONE_TUNE` (the
language model alone, ``--prior none``) and :data:`REFIT` (the search sampler's refit each round).
Pre-training runs for minutes, not epochs: :class:`PretrainConfig`. The model sizes are :data:`SIZES`.
Recipes differ from one another (that is what naming them is for); a setting is defined once, in
:class:`TrainConfig`, and a recipe names only the values it changes.

Kept free of torch, so that the command line can list them without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: Named model sizes: overrides of :class:`~nasrlm.rlm.model.RLMConfig`'s defaults, the one table every
#: caller uses. ``compact`` is the RLMSampler's: it refits in seconds inside a search (no dropout: random
#: masks cost more than the matmuls at that size on CPU); ``lean`` (:data:`TRAIN_SIZE`) is ``small`` with one
#: decoder layer and narrower feed-forward blocks: it ranks like ``small`` behind the feature prior and
#: samples about 2.5 times as fast; ``small`` is what ``nasrlm pretrain`` builds (how the sizes compare:
#: experiments/README.md, "Inference speed").
SIZES: dict[str, dict] = {
    "tiny": {"d_model": 32, "num_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1},
    "compact": {"d_model": 64, "num_heads": 4, "d_ff": 128, "encoder_layers": 2, "decoder_layers": 1,
                "dropout": 0.0},
    "small": {},
    "lean": {"d_ff": 256, "decoder_layers": 1},
    "base": {"d_model": 256, "num_heads": 8, "d_ff": 1024, "encoder_layers": 4, "decoder_layers": 2},
}
#: The size ``nasrlm train`` and ``RLMPredictor.from_scratch`` build.
TRAIN_SIZE = "lean"
#: The size ``nasrlm pretrain`` builds: a base has more rows and minutes to fill a larger model (a lean
#: base is not measured yet).
PRETRAIN_SIZE = "small"


def size_options(size: str) -> dict:
    """The :class:`RLMConfig` overrides of a named size (a copy), or a clear error naming the sizes."""
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; sizes: {', '.join(SIZES)}")
    return dict(SIZES[size])


@dataclass
class TrainConfig:
    """The settings of one training run (:func:`~nasrlm.rlm.training.train`); its defaults are
    :data:`TRAIN`'s, which train NB201 predictors from scratch in minutes on two CPU cores."""

    max_epochs: int = 60
    batch_size: int = 32
    # peak, after warm-up; chosen on NB201's eyeriss latency, an exact linear count of ops
    # (experiments/README.md, "Predictor quality on NAS-Bench-201")
    learning_rate: float = 5e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.05  # of all steps
    clip_norm: float = 1.0
    validation_fraction: float = 0.1  # held out for early stopping; 0 trains on all, keeps the last epoch
    patience: int = 10  # epochs without a better validation loss before stopping
    # with a validation split: stop after ``patience`` epochs without a better validation loss and keep the
    # best epoch; False: train every epoch and keep the last, the validation rows only measured (they
    # calibrate a spread: a loss on digits can bottom out long before the ranking stops improving)
    keep_best: bool = True
    max_minutes: float | None = None  # stop (keeping the epoch ``keep_best`` says) when this budget is spent
    # train the decoder only: a base's encoder (and the token embeddings it shares) stays as pre-trained,
    # and each text is encoded once, without dropout (experiments/README.md, "Who carries the prediction")
    freeze_encoder: bool = False
    # with the encoder frozen, dropout on its stored states at each training step: the decoder reads each
    # text through a new mask every time, as it read noisy states in pre-training, instead of learning
    # one fixed set by heart (experiments/README.md, "Who carries the prediction")
    state_dropout: float = 0.0
    # with the encoder frozen, decoders fitted from the same start, each with its own batch order and dropout
    # (``train``'s ``member``), whose samples RLMPredictor.fit pools: an ensemble; with ``keep_best``
    # each stops on a validation split of its own, else the first alone holds rows out (they calibrate)
    # and the others train on every row (experiments/README.md, "Who carries the prediction")
    members: int = 1
    seed: int = 0
    progress: bool = True

    def __post_init__(self) -> None:
        # refused as it is made, so that a fit given it changes nothing
        if not 0 <= self.state_dropout < 1:
            raise ValueError(f"state_dropout must be in [0, 1), got {self.state_dropout}")
        if self.state_dropout and not self.freeze_encoder:
            raise ValueError("state_dropout needs freeze_encoder=True: it masks a frozen encoder's "
                             "stored states")
        if self.members < 1:
            raise ValueError(f"members must be at least 1, got {self.members}")
        if self.members > 1 and not self.freeze_encoder:
            raise ValueError("members > 1 need freeze_encoder=True: the members share the encoder")


@dataclass(frozen=True)
class Recipe:
    """A named way to train: the :class:`TrainConfig` values it changes, and how long it trains ``rows`` rows
    (:meth:`config`). Unnamed settings keep :class:`TrainConfig`'s values."""

    max_epochs: int = TrainConfig.max_epochs  # early stopping on the validation split may stop it before
    learning_rate: float = TrainConfig.learning_rate
    warmup_fraction: float = TrainConfig.warmup_fraction
    # if set, as many epochs as give this many optimiser steps over every row (a validation split takes
    # its tenth of each epoch's: about 0.9 times as many)
    steps: int | None = None
    steps_per_row: float | None = None  # if set, at most this many steps per row: fewer rows, fewer steps
    validation_fraction: float = TrainConfig.validation_fraction  # held out where there are enough rows:
    min_validation_rows: int = 0  # fewer rows than this: no validation split, keep the last epoch
    unvalidated_steps: int | None = None  # if set, ``steps`` when there is no validation split to stop early
    # with a validation split, stop when it stops improving and keep its best epoch (TrainConfig.keep_best)
    keep_best: bool = TrainConfig.keep_best
    freeze_encoder: bool = TrainConfig.freeze_encoder
    members: int = TrainConfig.members
    members_from: int = 0  # below this many rows, one
    state_dropout: float = TrainConfig.state_dropout

    def settings(self, rows: int, batch_size: int = TrainConfig.batch_size) -> dict:
        """The :class:`TrainConfig` fields this recipe sets for ``rows`` training rows in batches of
        ``batch_size``."""
        validate = self.validation_fraction > 0 and rows >= self.min_validation_rows
        steps = self.steps if validate or self.unvalidated_steps is None else self.unvalidated_steps
        if steps is not None and self.steps_per_row is not None:
            steps = max(1, min(steps, round(self.steps_per_row * rows)))
        epochs = self.max_epochs
        if steps is not None:
            epochs = max(1, min(self.max_epochs, -(-steps // -(-rows // batch_size))))
        # epochs without improvement before stopping early, which needs a validation split
        patience = TrainConfig.patience
        if validate and self.steps is not None:
            patience = max(TrainConfig.patience, epochs // 5)
        return {"max_epochs": epochs, "learning_rate": self.learning_rate,
                "warmup_fraction": self.warmup_fraction,
                "validation_fraction": self.validation_fraction if validate else 0.0, "patience": patience,
                "keep_best": self.keep_best, "freeze_encoder": self.freeze_encoder,
                "members": self.members if rows >= self.members_from else 1,
                "state_dropout": self.state_dropout}

    def config(self, rows: int, *, batch_size: int = TrainConfig.batch_size, **fields) -> TrainConfig:
        """The :class:`TrainConfig` of this recipe for ``rows`` rows; ``fields`` override any field."""
        return TrainConfig(batch_size=batch_size, **{**self.settings(rows, batch_size), **fields})


#: Training from scratch (``nasrlm train --scratch``): :class:`TrainConfig`'s own values.
TRAIN = Recipe()
#: Fine-tuning a pre-trained base model's whole model beside a residual prior (``nasrlm train --prior
#: line``): a fixed number of steps, however few the rows, so that 20 measurements get as much training as
#: 1,000.
FINE_TUNE = Recipe(max_epochs=1000, steps=300, min_validation_rows=100)
#: The language model blended with a feature prior (``nasrlm train`` from a base, the default): the decoder
#: only, whose steps are cheap (each text is encoded once), so five times as many where a validation split
#: stops it early; below that, few: more steps on 16-20 rows fit those rows at the expense of the rest. The
#: alone recipe below, every step kept, let the blend's cross-fits hand the model shares it did not earn
#: (experiments/README.md, "Who carries the prediction").
DECODER_TUNE = Recipe(max_epochs=1000, steps=1500, min_validation_rows=100, unvalidated_steps=30,
                      freeze_encoder=True)
#: The language model alone fine-tuning a base (``nasrlm train --prior none``): the decoder only, 1.5 steps
#: per row up to 1,500 (counted over every row, see ``Recipe.steps``) at twice the blend's rate, every step
#: kept: the validation loss of its digits bottoms out within a few epochs, long before its ranking stops
#: improving, so a split that stops it early costs ranking (and rows). The encoder's stored states are read
#: through a dropout of 0.3 (``state_dropout``): without noise the decoder learns the states of its rows by
#: heart. From 300 rows, twice over, an ensemble of decoders on the one frozen encoder: the first holds out a
#: validation split that calibrates the spread, the second trains on every row; pooled, they rank better
#: and vary less than one. Below 300 rows (fewer than 30 validation rows) one decoder trains on every row and
#: cross-fits calibrate its spread (experiments/README.md, "Who carries the prediction").
ALONE_TUNE = replace(DECODER_TUNE, learning_rate=1e-3, steps=1500, steps_per_row=1.5,
                     min_validation_rows=300, unvalidated_steps=None, keep_best=False, members=2,
                     members_from=300, state_dropout=0.3)


def fine_tune_recipe(*, alone: bool, blend: bool) -> Recipe:
    """The recipe a base fine-tunes by: :data:`ALONE_TUNE` for the language model alone, :data:`DECODER_TUNE`
    blended with a feature prior, else (beside a residual prior) :data:`FINE_TUNE`."""
    return ALONE_TUNE if alone else DECODER_TUNE if blend else FINE_TUNE


#: The search sampler's refit each round (``FitSettings``, whose fields a user may change): a fixed number
#: of steps on every trial, no validation split, a longer warm-up at twice the default rate.
REFIT = Recipe(max_epochs=10**9, learning_rate=1e-3, warmup_fraction=0.1, steps=150, validation_fraction=0.0)


@dataclass
class PretrainConfig:
    """How long and how hard ``nasrlm pretrain`` trains a base: for minutes, not epochs, its batches drawn
    across every table (:func:`~nasrlm.rlm.pretraining.pretrain`); the optimiser's settings it shares are
    :class:`TrainConfig`'s."""

    minutes: float = 30.0  # wall-clock budget; the learning rate decays over it
    max_steps: int | None = None  # stop after this many steps (whichever of the two comes first)
    batch_size: int = TrainConfig.batch_size
    learning_rate: float = 5e-4  # peak, after warm-up: pre-training's own, whatever a fine-tune's
    weight_decay: float = TrainConfig.weight_decay
    warmup_steps: int = 200
    clip_norm: float = TrainConfig.clip_norm
    objectives_per_batch: int = 8  # tags drawn per batch from its columns, decoded after the free labels
    # decode every graph label that varies over a task's rows in each of its batches, after the others;
    # False: they are drawn with the table's columns for the objectives_per_batch places, so that each is
    # seen seldom (the first shipped base's recipe; experiments/README.md, "Who carries the prediction")
    every_graph_label: bool = True
    checkpoint_minutes: float = 5.0  # save this often (a killed run resumes from the latest save)
    seed: int = 0
    progress: bool = True


#: Fine-tuned on a latency it never decoded (a new device), a model first reads this many of the latencies
#: of the same space it does decode, those whose reading ranks the labelled rows best
#: (:func:`~nasrlm.rlm.tuning.latencies_to_read`), and predicts the new one after them: six or all of them
#: rank no better and decode slower (experiments/README.md, "Who carries the prediction").
READ_LATENCIES = 3
