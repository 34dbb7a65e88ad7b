"""Named presets: model sizes (overrides of :class:`~nasrlm.rlm.model.RLMConfig`) and training schedules.

Kept free of torch so that the command line can list them without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

#: Named model sizes: overrides of :class:`RLMConfig`'s defaults, the one table every caller uses.
#: ``compact`` is the RLMSampler's: it refits in seconds inside a search (no dropout: random masks cost
#: more than the matmuls at that size on CPU); ``lean`` (:data:`TRAIN_SIZE`) is ``small`` with one
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


@dataclass(frozen=True)
class Schedule:
    """How long and how fast ``nasrlm train`` trains: the fields of :class:`~nasrlm.rlm.training.TrainConfig`
    that differ between training from scratch and fine-tuning a base model."""

    max_epochs: int  # early stopping on the validation split picks the best epoch before this (keep_best)
    learning_rate: float  # peak, after warm-up
    # if set, as many epochs as give this many optimiser steps over every row (a validation split takes
    # its tenth of each epoch's: about 0.9 times as many)
    steps: int | None = None
    steps_per_row: float | None = None  # if set, at most this many steps per row: fewer rows, fewer steps
    min_validation_rows: int = 0  # fewer rows than this: no validation split, keep the last epoch
    unvalidated_steps: int | None = None  # if set, ``steps`` when there is no validation split to stop early
    # with a validation split, stop when it stops improving and keep its best epoch (TrainConfig.keep_best)
    keep_best: bool = True
    members: int = 1  # decoders fitted side by side on a frozen encoder, their samples pooled (TrainConfig)
    members_from: int = 0  # below this many rows, one
    state_dropout: float = 0.0  # on a frozen encoder's stored states at each step (TrainConfig)

    def settings(self, rows: int, batch_size: int) -> dict:
        """:class:`~nasrlm.rlm.training.TrainConfig` fields for ``rows`` training rows."""
        validate = rows >= self.min_validation_rows
        steps = self.steps if validate or self.unvalidated_steps is None else self.unvalidated_steps
        if steps is not None and self.steps_per_row is not None:
            steps = max(1, min(steps, round(self.steps_per_row * rows)))
        epochs = self.max_epochs
        if steps is not None:
            epochs = max(1, min(self.max_epochs, -(-steps // -(-rows // batch_size))))
        return {"max_epochs": epochs, "learning_rate": self.learning_rate,
                "validation_fraction": 0.1 if validate else 0.0,
                "patience": 10 if self.steps is None else max(10, epochs // 5), "keep_best": self.keep_best,
                "members": self.members if rows >= self.members_from else 1,
                "state_dropout": self.state_dropout}


#: Training from scratch (``nasrlm train``).
TRAIN = Schedule(max_epochs=60, learning_rate=5e-4)
#: Fine-tuning a pre-trained base model (``nasrlm train --init``): a fixed number of steps, however few
#: the rows, so that 20 measurements get as much training as 1,000.
FINE_TUNE = Schedule(max_epochs=1000, learning_rate=5e-4, steps=300, min_validation_rows=100)
#: The language model blended with a feature prior (``nasrlm train`` from a base): the decoder only, whose
#: steps are cheap (each text is encoded once), so five times as many where a validation split stops it
#: early; below that, few: more steps on 16-20 rows fit those rows at the expense of the rest. The alone
#: schedule below, every step kept, let the blend's cross-fits hand the model shares it did not earn
#: (experiments/README.md, "Who carries the prediction").
DECODER_TUNE = Schedule(max_epochs=1000, learning_rate=5e-4, steps=1500, min_validation_rows=100,
                        unvalidated_steps=30)
#: The language model alone fine-tuning a base (``nasrlm train --prior none``): the decoder only, 1.5 steps
#: per row up to 1,500 (counted over every row, see ``Schedule.steps``) at twice the blend's rate, every step
#: kept: the validation loss of its digits bottoms out within a few epochs, long before its ranking stops
#: improving, so a split that stops it early costs ranking (and rows). The encoder's stored states are read
#: through a dropout of 0.3 (``state_dropout``): without noise the decoder learns the states of its rows by
#: heart. From 300 rows, twice over, an ensemble of decoders on the one frozen encoder: the first holds out a
#: validation split that calibrates the spread, the second trains on every row; pooled, they rank better
#: and vary less than one. Below 300 rows (fewer than 30 validation rows) one decoder trains on every row and
#: cross-fits calibrate its spread (experiments/README.md, "Who carries the prediction").
ALONE_TUNE = replace(DECODER_TUNE, learning_rate=1e-3, steps=1500, steps_per_row=1.5, min_validation_rows=300,
                     unvalidated_steps=None, keep_best=False, members=2, members_from=300, state_dropout=0.3)

#: Fine-tuned on a latency it never decoded (a new device), a model first reads this many of the latencies of
#: the same space it does decode, those whose reading ranks the labelled rows best
#: (:func:`~nasrlm.rlm.tuning.fine_tune`), and predicts the new one after them: six or all
#: of them rank no better and decode slower (experiments/README.md, "Who carries the prediction").
READ_LATENCIES = 3
