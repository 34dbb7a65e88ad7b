"""``RLMPredictor``: ONNX text in, a distribution over every objective out.

It composes three parts, each fitted on its own: the language model
(:class:`~nasrlm.rlm.language_model.LanguageModel`: text in, samples out), a prior beside it
(:class:`~nasrlm.rlm._residuals.PriorPart`, which the model learns the residual of, or is blended with), and a
spread per objective calibrated on rows the fit did not train on (:mod:`nasrlm.rlm._held_out`). It saves them
as a directory of plain files that loads without unpickling anything
(:class:`~nasrlm.rlm.checkpoints.Checkpoint`). Fine-tuning on architectures of a search space, and predicting
them by id, is :mod:`nasrlm.rlm.tuning`.
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from nasrlm.data import Objective
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, FREE_OBJECTIVES
from nasrlm.priors.transfer import ACCURACY_RANK, TAG_SEPARATOR, AccuracyTransfer
from nasrlm.rlm._base import for_space
from nasrlm.rlm._held_out import HeldOut, cross_fitted_spreads, first_member_spreads
from nasrlm.rlm._residuals import PriorPart, add_prior, check_prior, out_of_sample_truth
from nasrlm.rlm.bases import SHIPPED, base_directory
from nasrlm.rlm.calibration import Spread
from nasrlm.rlm.checkpoints import Checkpoint
from nasrlm.rlm.language_model import LanguageModel
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.prediction import Prediction, summaries
from nasrlm.rlm.recipes import TRAIN_SIZE, TrainConfig, size_options
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.training import TrainReport, derived_sources, validation_size

#: Validation rows needed before the model's part is weighed, or its spread calibrated, on them: weights
#: fitted on the 10 validation rows of 100 labelled NB201 cells let a residual through that ranked below
#: the prior alone (experiments/README.md, "Transfer from a pre-trained base model"); below it, cross-fits.
MIN_VALIDATION_ROWS = 30
class RLMPredictor:
    """The language model, the prior beside it and the calibrated spread, fitted and used together."""

    def __init__(self, lm: LanguageModel, prior_part: PriorPart | None = None,
                 spreads: Mapping[str, Spread] | None = None, transfer: AccuracyTransfer | None = None,
                 spaces: Sequence[str] = ()) -> None:
        self.lm = lm
        #: set by ``fit(..., prior_from=..., prior_inputs=...)``: the prior, what it reads, and how the
        #: model's part is weighed beside it; ``None``: the language model alone
        self.prior_part = prior_part
        #: per objective, how :meth:`sample` widens the decoded samples so that their central 80 % holds about
        #: 80 % of true values, fitted by the latest :meth:`fit` on rows it held out; empty: as decoded
        self.spreads = dict(spreads or {})
        #: a base model's cross-space accuracy forest (:mod:`nasrlm.priors.transfer`): with a graph prior, its
        #: prediction is one more input of the prior (:data:`~nasrlm.priors.transfer.TRANSFER_LABEL`)
        self.transfer = transfer
        #: the search spaces whose architectures it was trained on (empty: not recorded); ``nasrlm predict``
        #: and ``eval`` refuse others, whose predictions would be extrapolation
        self.spaces = tuple(spaces)

    def clone(self) -> RLMPredictor:
        """A copy with a language model of its own to train (a cross-fit's); the other parts are values."""
        return RLMPredictor(self.lm.clone(), self.prior_part, self.spreads, self.transfer, self.spaces)

    @classmethod
    def from_scratch(cls, objectives: Sequence[Objective], *, size: str | None = TRAIN_SIZE, seed: int = 0,
                     tokenizer: OnnxTokenizer | None = None, **model_options) -> RLMPredictor:
        """A fresh, randomly initialised predictor for ``objectives``: the one way a model is built from
        nothing (a pre-trained one comes from :meth:`from_base` or :meth:`load`). Its tags are the free labels
        ``objectives`` does not name, then ``objectives``; the tokenizer is the one learned on samples of all
        registered spaces (or the one given); ``size`` names a preset of :data:`nasrlm.rlm.recipes.SIZES`
        (``None``: :class:`~nasrlm.rlm.model.RLMConfig`'s defaults), ``model_options`` override it. Initial
        weights depend only on ``seed``."""
        tokenizer = tokenizer or OnnxTokenizer.train_on_spaces(seed=seed)
        names = {o.name for o in objectives}
        free = [o for o in FREE_OBJECTIVES if o.name not in names]  # a published params_m is the same tag
        objectives = [*free, *objectives]
        options = {**size_options(size), **model_options} if size is not None else model_options
        config = RLMConfig(text_vocab_size=tokenizer.vocab_size, text_pad_id=tokenizer.pad_id,
                           objectives=tuple(o.name for o in objectives), **options)
        torch.manual_seed(seed)
        return cls(LanguageModel(tokenizer, RegressionLM(config), objectives))

    @classmethod
    def from_base(cls, base: str | Path, objectives: Sequence[Objective], *, space: str) -> RLMPredictor:
        """The base model ``base`` (a directory ``nasrlm pretrain`` wrote, or ``"shipped"``, the package's)
        ready to fine-tune on ``objectives`` of ``space``: its tags of that space (``nb201:pixel3``) answer to
        their plain names (``pixel3``), so a column the base has seen keeps its learned tag and normaliser;
        a new column gets a new tag; other spaces' tags stay as they are
        (:func:`~nasrlm.rlm._base.for_space`). (``None`` still means the shipped base, with a warning, for
        one release.)
        """
        base = Checkpoint.read(base_directory(_named(base)))
        return cls(for_space(base.lm, objectives, space), transfer=base.transfer, spaces=base.spaces)

    @classmethod
    def zero_shot(cls, space: str, base: str | Path = SHIPPED, **renamed: str | Path | None) -> RLMPredictor:
        """A base model (by default the shipped one) predicting ``space`` with no label of it (``path=``: the
        old name of ``base``, for one release).

        By default (:attr:`predicts`) it decodes :data:`~nasrlm.priors.transfer.ACCURACY_RANK`, the quantile
        of the space's headline accuracy an architecture is predicted at (learned on other spaces'
        accuracies where the base never saw this one's); a base without that tag decodes the columns of
        ``space`` it was pre-trained on. Either comes after the parameter count and MACs, as the model reads
        them from the text itself (``LanguageModel.reads_first``), as pre-training decoded them
        (experiments/README.md, "Who carries the prediction").
        """
        base = _renamed(renamed, "path", "base", base)
        predictor = cls.from_base(base, (), space=space)
        lm = predictor.lm
        rank = ACCURACY_RANK.name in lm.normalizers
        lm.decode_order = (ACCURACY_RANK.name,) if rank else predictor.space_columns()
        lm.reads_first = tuple(o.name for o in FREE_OBJECTIVES if o.name in lm.normalizers)
        return predictor

    def space_columns(self) -> tuple[str, ...]:
        """The trained objectives that are neither another space's tags (``nb101:acc``) nor free labels
        nor the cross-space accuracy rank: after :meth:`from_base`, the columns of its space."""
        shared = {o.name for o in ALL_FREE_OBJECTIVES} | {ACCURACY_RANK.name}
        return tuple(t for t in self.lm.trained_objectives if TAG_SEPARATOR not in t and t not in shared)

    def fit(self, texts: Sequence[str], values: np.ndarray, objectives: Sequence[str],
            config: TrainConfig | None = None, *, refit_normalizers: bool | Collection[str] = True,
            headroom: float = 0.0, prior: str | None = None, prior_from: Sequence[str] = (),
            prior_inputs: Mapping[str, np.ndarray] | None = None, prior_reference: np.ndarray | None = None,
            prior_mode: str = "residual", derived_from: Sequence[int] | None = None,
            calibration_folds: int = 0, reads: Sequence[str] = (), signed: Collection[str] = (),
            costs: Collection[str] = (), **renamed: str) -> TrainReport:
        """Train on ``values`` (n, len(objectives); NaN = unknown), decoding ``objectives`` in this order.

        The language model (``LanguageModel.fit``: ``refit_normalizers``, ``headroom``, ``reads``,
        ``derived_from``) learns what the prior leaves unexplained, or, ``prior_mode="blend"``, each objective
        itself beside it (docs/predictor.md says when each is best). The prior reads ``prior_from``, columns
        of ``objectives`` the model decodes first (free labels, latencies already measured), and
        ``prior_inputs``, columns it does not decode (graph labels); :meth:`sample` then needs them all.
        ``prior`` names it (:data:`~nasrlm.priors.feature_prior.PRIOR_KINDS`; ``None``: no prior, no inputs;
        ``prior_kind=``, its old name, for one release): ``"line"``
        (:class:`~nasrlm.priors.prior.FreeLabelPrior`; ``prior_reference``, rows of its inputs, is the
        population its normal scores are taken over) or a :class:`~nasrlm.priors.feature_prior.FeaturePrior`
        kind. The share of the model's part that held-out rows support (``PriorPart.weights``) is measured on
        the validation rows where there are :data:`MIN_VALIDATION_ROWS`, else on the cross-fits below, else
        none is kept. ``signed`` objectives may take either sign (a constraint's value): never taken in logs,
        however their values so far spread (all positive over a decade, no draw in logs could reach zero).
        ``costs`` (lower the better) a feature prior may fit as sums over what the device computes.

        The fit ends by calibrating the spread of every objective it decodes (:attr:`spreads`) on rows it did
        not train on: the validation rows where there are enough, else ``calibration_folds`` cross-fits, each
        the same fit of a :meth:`clone` on the other folds' rows (0 or 1: none). ``config.members`` > 1 (no
        prior) pools several decoders, whose spread is calibrated on the first one's validation rows.
        """
        objectives, reads = tuple(objectives), tuple(reads)
        values = np.asarray(values, dtype=np.float64).reshape(len(texts), len(objectives))
        config = config or TrainConfig()
        self.lm.check(objectives, reads)
        if reads and prior_from:
            raise ValueError("reads and prior_from: the prior's inputs are given before anything is read, "
                             "so a reading would follow them at inference but not in training; give one")
        if config.members > 1 and (prior_from or prior_inputs):
            raise ValueError("members > 1 pool the language model alone: with a prior, give members=1")
        prior, prior_inputs = _renamed(renamed, "prior_kind", "prior", prior), dict(prior_inputs or {})
        inputs = (*prior_from, *prior_inputs)
        check_prior(prior, prior_mode, prior_from, inputs)
        source = derived_sources(derived_from, len(texts))
        original = source < 0
        held_out = HeldOut.of(tuple(prior_from), prior_inputs, values[original], objectives, signed)
        part, residuals, x = None, values, None
        if inputs:  # validated before anything changes: a refused call leaves the predictor as it was
            part, residuals, x = PriorPart.fit(values, objectives, tuple(prior_from), prior_inputs,
                                               kind=prior, reference=prior_reference, mode=prior_mode,
                                               original=original, signed=signed, costs=costs)
        folds = min(calibration_folds, int(original.sum()) // 2)
        cross = None  # the cross-fits' spreads, in-sample widths and (blended) weights
        validated = validation_size(int(original.sum()), config.validation_fraction) >= MIN_VALIDATION_ROWS
        if folds >= 2 and not validated:
            options = {"refit_normalizers": refit_normalizers, "headroom": headroom, "reads": reads,
                       "prior": prior, "prior_reference": prior_reference, "prior_mode": prior_mode,
                       "signed": signed, "costs": costs}
            cross = cross_fitted_spreads(self.clone, texts, values, objectives, config, source, folds,
                                         held_out, options)
        self.prior_part, self.spreads = part, {}  # the samples calibrated on are as decoded
        learned = part.learned(values, residuals) if part is not None else values
        report, members_held_out = self.lm.fit(texts, learned, objectives, config, headroom=headroom,
                                               refit_normalizers=refit_normalizers, derived_from=derived_from,
                                               reads=reads, signed=signed)
        report.cross_fits = folds if cross is not None else 0
        rows = np.asarray(report.validation_rows)
        rows = rows if len(rows) >= MIN_VALIDATION_ROWS else None
        if part is not None:
            self.prior_part = part.weighed(self.sample, texts, x, values, residuals, objectives, rows,
                                           None if cross is None else cross[2])
        if rows is not None:
            truth = None if part is None else out_of_sample_truth(part.prior, x, residuals, values,
                                                                  objectives, part.objectives, rows)
            if self.lm.members:  # the other members trained on the first one's validation rows
                first = RLMPredictor(self.lm.first_member(), self.prior_part)
                trained = np.setdiff1d(np.flatnonzero(original), members_held_out)  # by every member
                self.spreads = first_member_spreads(self, first, held_out, texts, values, objectives, rows,
                                                    trained, seed=config.seed, truth=truth)
            else:
                self.spreads = held_out.spreads(self, texts, values, objectives, rows, seed=config.seed,
                                                truth=truth)
        elif cross is not None:  # trained on all the rows, the model decodes narrower than the folds did
            draws = held_out.sample(self, texts, values, objectives, np.flatnonzero(original),
                                    seed=config.seed, model_alone=prior_mode == "blend")
            mine = held_out.typical_width(draws, objectives)
            self.spreads = held_out.rescaled(cross[0], objectives, cross[1], mine)
        return report

    def sample(self, texts: Sequence[str], objectives: Sequence[str] | None = None, *, num_samples: int = 64,
               batch_size: int = 16, temperature: float = 1.0, seed: int = 0, progress: bool = False,
               given: Mapping[str, np.ndarray] | None = None,
               features: Mapping[str, np.ndarray] | None = None,
               residual_weight: dict[str, float] | None = None,
               residual_spread: dict[str, float] | None = None, calibrated: bool = True) -> np.ndarray:
        """Samples in the objectives' units, shape (len(texts), num_samples, len(objectives)).

        ``objectives`` defaults to :attr:`predicts`. ``given`` maps objectives known for every text (free
        labels) to their values, fed to the decoder first (train with them first in the decode order); the
        prior reads its inputs from ``given`` and ``features``, which the decoder does not see.
        ``residual_weight`` (the prior's objectives) replaces ``PriorPart.weights``: 0 centres each
        prediction on the prior, 1 trusts the model; ``residual_spread`` replaces the decoded spread of those
        objectives' residuals by a normal one of that standard deviation (normal scores; one number or one
        per text) around each median, e.g. ``PriorPart.errors`` (:func:`~nasrlm.rlm._residuals.add_prior`).
        ``calibrated`` widens each objective's samples by its :attr:`spreads` (those of ``residual_spread``
        excepted), keeping each text's median; ``False``: the samples as decoded.
        """
        objectives = tuple(objectives or self.predicts)
        given = dict(given or {})
        inputs = {**given, **(features or {})}
        part = self.prior_part
        residual = [k for k, o in enumerate(objectives) if part is not None and o in part.objectives]
        absent = [f for f in part.inputs if f not in inputs] if part is not None else []
        if residual and absent:
            raise ValueError(f"this model predicts {[objectives[k] for k in residual]} from the labels "
                             f"{absent}: pass them as given= or features={{name: values}} "
                             "(nasrlm.rlm.tuning.known_labels computes free and graph labels)")
        out = self.lm.sample(texts, objectives, num_samples=num_samples, batch_size=batch_size,
                             temperature=temperature, seed=seed, progress=progress, given=given)
        add_prior(part, out, objectives, inputs, residual, residual_weight=residual_weight,
                  residual_spread=residual_spread, seed=seed)
        if calibrated and self.spreads:
            rng = np.random.default_rng([seed, 1])
            for k, name in enumerate(objectives):
                if name in self.spreads and name not in (residual_spread or {}):
                    out[..., k] = self.spreads[name].widen(out[..., k], rng)
        return out

    def predict(self, texts: Sequence[str], objectives: Sequence[str] | None = None, **options
                ) -> list[dict[str, Prediction]]:
        """Median, mean and quantiles per objective for each text (see :meth:`sample` for options)."""
        objectives = tuple(objectives or self.predicts)
        return summaries(self.sample(texts, objectives, **options), objectives, self.lm.objectives)

    def to(self, device: str | torch.device) -> RLMPredictor:
        """Move the model to ``device`` (``"cpu"``, ``"cuda"``); training and sampling follow it."""
        self.lm.model.to(device)
        return self

    @property
    def predicts(self) -> tuple[str, ...]:
        """What :meth:`sample` predicts by default: the latest fit's objectives, minus the prior's inputs."""
        inputs = self.prior_part.inputs if self.prior_part is not None else ()
        return tuple(o for o in self.lm.decode_order if o not in inputs)

    def save(self, path: str | Path, *, half: bool = False) -> Path:
        """Write ``config.json``, ``model.safetensors`` and ``tokenizer.model`` into directory ``path`` (and a
        prior's, a transfer forest's and the members' files where it has them), never seen half-written
        (:meth:`Checkpoint.write <nasrlm.rlm.checkpoints.Checkpoint.write>`); ``half`` stores the weights in
        float16 (half the bytes; :meth:`load` reads them back in float32)."""
        parts = Checkpoint(self.lm, self.prior_part, self.spreads, self.transfer, self.spaces)
        return parts.write(path, half=half)

    @classmethod
    def load(cls, path: str | Path) -> RLMPredictor:
        """Inverse of :meth:`save` (plain JSON and safetensors: nothing is unpickled). A directory without the
        files raises :class:`~nasrlm.rlm.bases.ModelNotFoundError`; files that are there but do not make
        a model (truncated weights, a config of another shape)
        :class:`~nasrlm.rlm.bases.ModelFileError`: each names the file at fault."""
        c = Checkpoint.read(path)
        return cls(c.lm, c.prior_part, c.spreads, c.transfer, c.spaces)


def _named(base: str | Path | None) -> str | Path:
    """``base``, where ``None`` (the shipped base before it had a name) is ``"shipped"``, with a warning."""
    if base is None:
        warnings.warn('from_base(None, ...): name the shipped base, from_base("shipped", ...); None will '
                      "mean no base, as everywhere else", DeprecationWarning, stacklevel=3)
        return SHIPPED
    return base


def _renamed(given: dict, old: str, new: str, value: object) -> object:
    """``value``, or that of the keyword ``old`` (``new``'s name before, for one release) with a warning;
    any other keyword left in ``given`` is refused as Python would."""
    if old in given:
        warnings.warn(f"{old}= is now {new}=", DeprecationWarning, stacklevel=3)
        value = given.pop(old)
    if given:
        raise TypeError(f"unexpected keyword argument {next(iter(given))!r}")
    return value
