"""``RLMPredictor``: ONNX text in, a distribution over every objective out.

It owns the three learned pieces — the ONNX tokenizer, the regression model and one label normaliser
per objective — plus the objectives' names and units, and saves them as a directory of plain files
(``config.json``, ``model.safetensors``, ``tokenizer.model``) that loads without unpickling anything
(:mod:`nasrlm.rlm.checkpoints`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from nasrlm.data import Objective
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, FREE_OBJECTIVES, free_labels, texts_and_free_labels
from nasrlm.priors.feature_prior import PRIOR_KINDS
from nasrlm.priors.prior import ScoresPrior, spans_decades
from nasrlm.priors.transfer import ACCURACY_RANK, TAG_SEPARATOR, TRANSFER_LABEL, AccuracyTransfer
from nasrlm.rlm._base import for_space
from nasrlm.rlm._held_out import HeldOut, cross_fitted_spreads, first_member_spreads
from nasrlm.rlm._members import Weights, pooled, train_members, wearing
from nasrlm.rlm._residuals import (
    PRIOR_MODES,
    add_prior,
    blend_weights,
    fit_prior,
    out_of_sample_truth,
    prior_matrix,
    validated_weights,
)
from nasrlm.rlm.augment import EQUIVALENT_READINGS, equivalent_readings, shared_by_equivalents
from nasrlm.rlm.calibration import CALIBRATION_FOLDS, Spread
from nasrlm.rlm.checkpoints import (  # noqa: F401  (PRIOR_FILE: importable from here as before)
    PRIOR_FILE,
    ModelFileError,
    ModelNotFoundError,
    load_predictor,
    save_predictor,
)
from nasrlm.rlm.inference import sample_scaled
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.presets import ALONE_TUNE, DECODER_TUNE, FINE_TUNE, READ_LATENCIES, TRAIN_SIZE, size_options
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.training import TrainConfig, TrainReport, derived_sources, pad_batch, validation_size
from search_spaces import SearchSpace

#: Validation rows needed before the model's residual is weighed on them: weights fitted on the 10
#: validation rows of 100 labelled NB201 cells let a residual through that ranked below the prior
#: alone (experiments/README.md, "Transfer from a pre-trained base model").
MIN_VALIDATION_ROWS = 30
#: The share of a residual kept when there were too few validation rows to weigh it: none. Fine-tuned
#: on 20 measurements of an unseen device, the residual pulled a ridge prior's ranking down (see
#: experiments/README.md, "Transfer from a pre-trained base model"); it must prove itself first.
UNVALIDATED_RESIDUAL_WEIGHT = 0.0
#: Quantiles reported with every prediction.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: The base model shipped in the package (``nasrlm pretrain --ship``; what it saw: docs/base-model.md).
SHIPPED_BASE = Path(__file__).parent.parent / "base"  # nasrlm/base, beside this package


def tune_config(rows: int, *, decoder_only: bool, alone: bool = False,
                batch_size: int = TrainConfig.batch_size, **fields: Any) -> TrainConfig:
    """How a base model fine-tunes on ``rows`` labelled rows, as ``nasrlm train`` does: the decoder alone
    (``decoder_only``: the language model blended, the encoder reading the text as the base learned to) by
    :data:`~nasrlm.rlm.presets.DECODER_TUNE`'s schedule, the language model alone (``alone``, no prior) by
    :data:`~nasrlm.rlm.presets.ALONE_TUNE`'s (an ensemble of decoders), else the whole model by
    :data:`~nasrlm.rlm.presets.FINE_TUNE`'s; ``fields`` override any :class:`TrainConfig` field."""
    schedule = ALONE_TUNE if alone else DECODER_TUNE if decoder_only else FINE_TUNE
    decoder_only = decoder_only or alone
    settings = {**schedule.settings(rows, batch_size), **fields}
    return TrainConfig(batch_size=batch_size, freeze_encoder=decoder_only, **settings)


def shipped_base() -> Path:
    """The directory of the base model shipped in the package, or :class:`ModelNotFoundError` where an
    install left it out (a wheel built without package data)."""
    if not (SHIPPED_BASE / "config.json").is_file():
        raise ModelNotFoundError(f"{SHIPPED_BASE}: this install of nasrlm lacks its base model (reinstall "
                                 "it, or give a base directory written by 'nasrlm pretrain')")
    return SHIPPED_BASE


@dataclass(frozen=True)
class Prediction:
    """One objective's predicted distribution, in the objective's own unit."""

    median: float
    mean: float
    quantiles: dict[str, float]  # "q05" → value, …
    unit: str

    def to_dict(self) -> dict:
        return asdict(self)


class RLMPredictor:
    """Tokenizer + regression model + per-objective normalisers, fitted and used together."""

    def __init__(self, tokenizer: OnnxTokenizer, model: RegressionLM, objectives: Sequence[Objective],
                 normalizers: dict[str, Normalizer] | None = None, decode_order: Sequence[str] = ()) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.objectives = {o.name: o for o in objectives}
        missing = [o for o in model.config.objectives if o not in self.objectives]
        if missing:
            raise ValueError(f"model has tags for objectives without metadata: {missing}")
        self.normalizers = dict(normalizers or {})
        #: objectives predicted by default, in decode order: those of the latest :meth:`fit`
        self.decode_order = tuple(decode_order)
        #: set by ``fit(..., prior_from=..., prior_inputs=...)``: the prior, the labels it reads and the
        #: objectives the model predicts as residuals of it
        self.prior: ScoresPrior | None = None  # FreeLabelPrior or FeaturePrior
        self.prior_inputs: tuple[str, ...] = ()
        self.prior_objectives: tuple[str, ...] = ()
        #: how the model stands beside the prior (``fit(prior_mode=)``): ``"residual"``, it decodes what
        #: the prior leaves unexplained; ``"blend"``, it decodes the objectives themselves
        self.prior_mode = "residual"
        #: per prior objective, the share of the model's residual (or, blended, of the way its prediction
        #: departs from the prior's) that :meth:`sample` keeps by default, estimated on rows the latest fit
        #: held out (see :func:`~nasrlm.priors.prior.residual_weight`)
        self.residual_weights: dict[str, float] = {}
        #: per prior objective, the root-mean-square residual of the latest fit's training rows in normal
        #: scores: the prior's error on architectures it did not see (out of bag for a feature prior;
        #: in sample for the line prior, which has two parameters). See ``sample(residual_spread=)``.
        self.prior_errors: dict[str, float] = {}
        #: per objective, how :meth:`sample` widens the decoded samples so that their central 80 % holds
        #: about 80 % of true values (:class:`~nasrlm.rlm.calibration.Spread`), fitted by the latest
        #: :meth:`fit` on rows it held out; empty: the samples as decoded
        self.spreads: dict[str, Spread] = {}
        #: a base model's cross-space accuracy forest (:mod:`nasrlm.priors.transfer`): with a graph prior, its
        #: prediction is one more input of the prior (:data:`~nasrlm.priors.transfer.TRANSFER_LABEL`)
        self.transfer: AccuracyTransfer | None = None
        #: the search spaces whose architectures it was trained on (empty: not recorded); ``nasrlm
        #: predict`` and ``eval`` refuse others, whose predictions would be extrapolation
        self.spaces: tuple[str, ...] = ()
        #: labels :meth:`sample` first decodes greedily from the text itself, then conditions its samples
        #: on, never reporting them: a base model pre-trained with the free labels decoded first reads a
        #: space zero-shot best in that order (:meth:`zero_shot`); a fit sets it to its ``reads``
        self.reads_first: tuple[str, ...] = ()
        #: the latest fit's other decoders, when it trained several (``TrainConfig.members``): their weights
        #: (:mod:`nasrlm.rlm._members`); :meth:`sample` pools their samples with the model's own
        self.members: list[Weights] = []

    @classmethod
    def from_scratch(cls, objectives: Sequence[Objective], *, size: str | None = TRAIN_SIZE, seed: int = 0,
                     tokenizer: OnnxTokenizer | None = None, **model_options) -> RLMPredictor:
        """A fresh, randomly initialised predictor for ``objectives``, with a tag for every free label
        decoded before them: the one way a model is built from nothing (a pre-trained one comes from
        :meth:`from_base` or :meth:`load`).

        The tokenizer is the default one learned on samples of every registered space (or the one
        given); ``size`` names a preset of :data:`nasrlm.rlm.presets.SIZES` (``None``: none, so
        :class:`~nasrlm.rlm.model.RLMConfig`'s own defaults), ``model_options`` override it. The tags are
        the free labels ``objectives`` does not name, then ``objectives`` in their order. Initial weights
        depend only on ``seed``.
        """
        tokenizer = tokenizer or OnnxTokenizer.train_on_spaces(seed=seed)
        names = {o.name for o in objectives}
        free = [o for o in FREE_OBJECTIVES if o.name not in names]  # a published params_m is the same tag
        objectives = [*free, *objectives]
        options = {**size_options(size), **model_options} if size is not None else model_options
        config = RLMConfig(text_vocab_size=tokenizer.vocab_size, text_pad_id=tokenizer.pad_id,
                           objectives=tuple(o.name for o in objectives), **options)
        torch.manual_seed(seed)
        return cls(tokenizer, RegressionLM(config), objectives)

    @classmethod
    def from_base(cls, path: str | Path | None, objectives: Sequence[Objective], *, space: str
                  ) -> RLMPredictor:
        """A pre-trained base model (``nasrlm pretrain``; ``None``: the one shipped in the package) ready
        to fine-tune on ``objectives`` of ``space``.

        The base's tags of that space (``nb201:pixel3``) answer to their plain names (``pixel3``), so
        a column the base has seen keeps its learned tag and its normaliser; a new column gets a new
        tag (see :meth:`RegressionLM.with_objectives`). Tags of other spaces stay as they are
        (:func:`~nasrlm.rlm._base.for_space`).
        """
        base = cls.load(shipped_base() if path is None else path)
        model, metadata, normalizers = for_space(base, objectives, space)
        predictor = cls(base.tokenizer, model, metadata, normalizers)
        predictor.transfer = base.transfer
        predictor.spaces = base.spaces
        return predictor

    @classmethod
    def zero_shot(cls, space: str, path: str | Path | None = None) -> RLMPredictor:
        """A base model (``None``: the shipped one) predicting ``space`` with no label of it.

        By default (:attr:`predicts`) it decodes :data:`~nasrlm.priors.transfer.ACCURACY_RANK`, the quantile
        of the space's headline accuracy an architecture is predicted at (learned on other spaces'
        accuracies where the base never saw this one's); a base without that tag decodes the columns of
        ``space`` it was pre-trained on, which answer to their plain names (``pixel3``) in any case.
        Either comes after the parameter count and MACs, as the model reads them from the text itself
        (:attr:`reads_first`).
        """
        predictor = cls.from_base(path, (), space=space)
        if ACCURACY_RANK.name in predictor.normalizers:
            predictor.decode_order = (ACCURACY_RANK.name,)
        else:
            predictor.decode_order = predictor.space_columns()
        # pre-training decodes every column after the free labels: so does a zero-shot prediction, after
        # the model's own reading of them (experiments/README.md, "Who carries the prediction")
        predictor.reads_first = tuple(o.name for o in FREE_OBJECTIVES if o.name in predictor.normalizers)
        return predictor

    def space_columns(self) -> tuple[str, ...]:
        """The trained objectives that are neither another space's tags (``nb101:acc``) nor free labels
        nor the cross-space accuracy rank: after :meth:`from_base`, the columns of its space."""
        shared = {o.name for o in ALL_FREE_OBJECTIVES} | {ACCURACY_RANK.name}
        return tuple(t for t in self.trained_objectives if TAG_SEPARATOR not in t and t not in shared)

    # --- training ------------------------------------------------------------------------------
    def encode_texts(self, texts: Sequence[str]) -> list[list[int]]:
        ids = self.tokenizer.encode_batch(list(texts))
        limit = self.model.config.max_input_tokens
        too_long = [len(s) for s in ids if len(s) > limit]
        if too_long:
            raise ValueError(f"{len(too_long)} text(s) exceed max_input_tokens={limit} "
                             f"(longest {max(too_long)} tokens); raise it in the model config")
        return ids

    def fit(self, texts: Sequence[str], values: np.ndarray, objectives: Sequence[str],
            config: TrainConfig | None = None, *, refit_normalizers: bool | Collection[str] = True,
            headroom: float = 0.0, prior_from: Sequence[str] = (),
            prior_inputs: Mapping[str, np.ndarray] | None = None, prior_kind: str = "line",
            prior_reference: np.ndarray | None = None, prior_mode: str = "residual",
            derived_from: Sequence[int] | None = None, calibration_folds: int = 0,
            reads: Sequence[str] = ()) -> TrainReport:
        """Train on ``values`` (n, len(objectives); NaN = unknown), decoding ``objectives`` in this order.

        Call it twice to pre-train on free labels and then fine-tune on the expensive ones; each
        call fits the normalisers of the objectives it trains (``refit_normalizers``: all, none, or
        just the named ones; an objective without a normaliser always gets one). ``headroom`` lets
        predictions go past the training labels' range (see :meth:`Normalizer.fit`).

        A prior predicts every objective from labels known for every architecture, and the model
        learns only what it leaves unexplained; :meth:`sample` adds the prior back. Its inputs are
        ``prior_from``, columns of ``objectives`` (decoded first, e.g. ``("params_m", "macs_m")``, or
        the latencies of devices already measured), and ``prior_inputs``, further columns that are
        not decoded (e.g. the graph labels of :data:`~nasrlm.free_labels.GRAPH_OBJECTIVES`);
        :meth:`sample` then needs them all, in ``given`` or ``features``. ``prior_kind`` is
        ``"line"`` (a straight line through the best single input, in normal scores:
        :class:`~nasrlm.priors.prior.FreeLabelPrior`) or a :class:`~nasrlm.priors.feature_prior.FeaturePrior`:
        ``"forest"``, ``"ridge"`` or ``"auto"`` (per objective, whichever ranks the training rows best
        out of sample).
        With few labels the model alone ranks below its free labels. ``prior_reference`` (rows of the
        inputs; line prior only) is the population the prior's normal scores are taken over; by
        default the training rows, but a search should pass its candidates.
        With a prior and a validation split, the model's residual is then checked on the validation
        rows and :meth:`sample` keeps only the share of it that proved real (:attr:`residual_weights`):
        on NB201 with a few hundred labels the full residual ranked below the prior alone. With fewer
        than :data:`MIN_VALIDATION_ROWS` validation rows it keeps
        :data:`UNVALIDATED_RESIDUAL_WEIGHT` of it, and the samples keep their spread.

        ``prior_mode="blend"`` (a feature prior whose inputs are all ``prior_inputs``) trains the model on
        the objectives themselves, beside the prior: :meth:`sample` moves each prediction from the
        prior's toward the model's by the share of the way that held-out rows support
        (:func:`~nasrlm.rlm._residuals.blend_weights`), on the validation rows as above or, below
        :data:`MIN_VALIDATION_ROWS`, on the cross-fits that calibrate the spread (the prior alone
        without either). Where the model alone ranks better than the prior (an unseen
        device from 20 measurements), its share goes to 1; where the prior does, to 0
        (experiments/README.md, "Who carries the prediction").

        ``derived_from`` marks augmented rows (:func:`nasrlm.rlm.augment.equivalent_rows`): the row each
        was made from, -1 for originals. Normalisers and the prior are fitted on the originals only,
        and only originals are held out for validation (see :func:`~nasrlm.rlm.training.train`).

        The fit ends by calibrating the spread of every objective it decodes (:attr:`spreads`) on rows
        it did not train on: the validation rows where there are :data:`MIN_VALIDATION_ROWS`, else
        ``calibration_folds`` cross-fits (each the same fit on the other folds' rows, from the same
        starting weights: that many fits more; 0 or 1: none, the samples stay as decoded;
        :meth:`fine_tune` does :data:`~nasrlm.rlm.calibration.CALIBRATION_FOLDS`).

        ``config.members`` > 1 (the encoder frozen, no prior) trains that many decoders from the weights the
        model has, each holding out a validation split of its own, and :meth:`sample` pools their samples
        (:attr:`members`, :mod:`nasrlm.rlm._members`); the spread is then calibrated on the first one's
        validation rows, or on cross-fits of one decoder each, for the pool.

        ``reads`` are labels the model already decodes (a base's tags, e.g. the latencies of the devices
        it was pre-trained on) that it then reads before ``objectives``, as pre-training decodes one
        column after another: the fit takes the model's own greedy reading of them for every text, as it
        stands before the fit, and trains on it as the first columns of each row (their normalisers
        kept), and :meth:`sample` reads them first (:attr:`reads_first`), each prediction conditioned
        on them. An unseen device's latency ranks better read after the devices the base knows
        (experiments/README.md, "Who carries the prediction").
        """
        objectives, reads = tuple(objectives), tuple(reads)
        values = np.asarray(values, dtype=np.float64).reshape(len(texts), len(objectives))
        unknown = [o for o in objectives if o not in self.objectives]
        if unknown:
            raise ValueError(f"objective(s) {unknown} are not among this model's {list(self.objectives)}")
        unread = [o for o in reads if o not in self.normalizers or o in objectives]
        if unread:
            raise ValueError(f"reads {unread}: a label read first must be one the model already decodes "
                             f"({list(self.trained_objectives)}), and not one the fit trains")
        if reads and prior_from:
            raise ValueError("reads and prior_from: the prior's inputs are given before anything is read, "
                             "so a reading would follow them at inference but not in training; give one")
        source = derived_sources(derived_from, len(texts))
        original = source < 0
        config = config or TrainConfig()
        if config.members > 1 and (prior_from or prior_inputs):
            raise ValueError("members > 1 pool the language model alone: with a prior, give members=1")
        logs = {name: spans_decades(values[original, k]) for k, name in enumerate(objectives)}
        raw, held_out = values, HeldOut(tuple(prior_from), dict(prior_inputs or {}), logs)
        prior, inputs, predicted, x = None, (*prior_from, *(prior_inputs or {})), (), None
        if prior_mode not in PRIOR_MODES:
            raise ValueError(f"prior_mode {prior_mode!r}: expected one of {', '.join(PRIOR_MODES)}")
        blend = prior_mode == "blend"
        if blend and (prior_from or not inputs or prior_kind == "line"):
            raise ValueError("prior_mode='blend' needs a feature prior (prior_kind not 'line') whose inputs "
                             "are all prior_inputs: the model decodes none of them")
        residuals = values
        # what the model reads now, before the fit (the cross-fits start from the same weights)
        reading = self.read(texts, reads) if reads else None
        if inputs:  # validated before anything changes: a refused call leaves the predictor as it was
            x = prior_matrix(values, objectives, tuple(prior_from), dict(prior_inputs or {}))
            prior, predicted, residuals = fit_prior(x, values, objectives, tuple(prior_from), prior_kind,
                                                    prior_reference, original,
                                                    line_inputs=[f != TRANSFER_LABEL for f in inputs])
            values = raw if blend else residuals  # what the model learns
        spreads: dict[str, Spread] = {}
        widths = None  # the cross-fits' in-sample widths, when they calibrate
        held_out_weights = None  # blended: the model's weights from the cross-fits
        folds = min(calibration_folds, int(original.sum()) // 2)
        validated = validation_size(int(original.sum()), config.validation_fraction) >= MIN_VALIDATION_ROWS
        if folds >= 2 and not validated:
            options = {"refit_normalizers": refit_normalizers, "headroom": headroom, "reads": reads,
                       "prior_kind": prior_kind, "prior_reference": prior_reference, "prior_mode": prior_mode}
            spreads, widths, held_out_weights = self._cross_fitted_spreads(texts, raw, objectives, config,
                                                                           source, folds, held_out, options)
        self.prior, self.prior_inputs, self.prior_objectives = prior, inputs, predicted
        self.prior_mode = prior_mode
        self.residual_weights = {}
        self.prior_errors = {}
        if prior is not None:
            rows = residuals[original][:, [objectives.index(name) for name in predicted]]
            self.prior_errors = {name: float(np.sqrt(np.nanmean(rows[:, j] ** 2)))
                                 for j, name in enumerate(predicted)}
        for k, name in enumerate(objectives):
            refit = refit_normalizers if isinstance(refit_normalizers, bool) else name in refit_normalizers
            if refit or name not in self.normalizers:
                self.normalizers[name] = Normalizer.fit(values[original, k], headroom=headroom)
        targets = self._targets(values, objectives)
        if reading is not None:
            targets = np.concatenate([self._targets(reading, reads), targets], axis=1)
        self.members = []  # an earlier fit's, if any: the weights they differ in are trained again
        report, self.members, members_held_out = train_members(
            self.model, self.encode_texts(texts), targets, (*reads, *objectives), config,
            derived_from=derived_from)
        report.cross_fits = folds if widths is not None else 0
        self.decode_order, self.reads_first = objectives, reads
        if prior is not None and len(report.validation_rows) >= MIN_VALIDATION_ROWS:
            rows = report.validation_rows
            self.residual_weights = (blend_weights(self, texts, x, raw, residuals, objectives, rows) if blend
                                     else validated_weights(self, texts, x, values, objectives, rows))
        elif prior is not None and held_out_weights is not None:
            self.residual_weights = held_out_weights
        elif prior is not None:
            self.residual_weights = dict.fromkeys(predicted, UNVALIDATED_RESIDUAL_WEIGHT)
        if len(report.validation_rows) >= MIN_VALIDATION_ROWS:
            rows = np.asarray(report.validation_rows)
            truth = None if prior is None else out_of_sample_truth(prior, x, residuals, raw, objectives,
                                                                   predicted, rows)
            if self.members:  # the other members trained on the first one's validation rows
                trained = np.setdiff1d(np.flatnonzero(original), members_held_out)  # by every member
                spreads = first_member_spreads(self, held_out, texts, raw, objectives, rows, trained,
                                               seed=config.seed, truth=truth)
            else:
                spreads = held_out.spreads(self, texts, raw, objectives, rows, seed=config.seed, truth=truth)
        elif widths is not None:  # trained on all the rows, the model decodes narrower than the folds did
            mine = held_out.typical_width(held_out.sample(self, texts, raw, objectives,
                                                          np.flatnonzero(original), seed=config.seed,
                                                          model_alone=blend), objectives)
            spreads = held_out.rescaled(spreads, objectives, widths, mine)
        self.spreads = spreads
        return report

    def _cross_fitted_spreads(self, texts: Sequence[str], values: np.ndarray, objectives: tuple[str, ...],
                              config: TrainConfig, source: np.ndarray, folds: int, held_out: HeldOut,
                              options: dict) -> tuple[dict[str, Spread], np.ndarray, dict[str, float] | None]:
        """The spreads of :meth:`fit` from ``folds`` cross-fits, the folds' in-sample widths and, blended,
        the model's weights (:func:`~nasrlm.rlm._held_out.cross_fitted_spreads`)."""
        return cross_fitted_spreads(self, texts, values, objectives, config, source, folds, held_out, options)

    def fine_tune(self, space: SearchSpace, arch_ids: Sequence[str], values: np.ndarray, names: Sequence[str],
                  config: TrainConfig | None = None, *, prior: str | None = "forest",
                  prior_mode: str | None = None, refit_normalizers: bool | Collection[str] = True,
                  derived_from: Sequence[int] | None = None, progress: bool = False,
                  calibration_folds: int = CALIBRATION_FOLDS, read_latencies: int = READ_LATENCIES
                  ) -> TrainReport:
        """Train on labelled architectures of ``space``: the recipe every caller shares.

        With its defaults it does what ``nasrlm train`` does with a base: a forest prior blended with the
        language model, which learns each objective from the text alone with its encoder frozen, for as
        long as :func:`tune_config` says (``config=None``). ``prior_mode`` (``None``: ``"blend"`` with a
        feature prior, else ``"residual"``) is :meth:`fit`'s.

        Each architecture's text and free labels come from one ONNX build. With a ``prior`` (a
        ``prior_kind`` of :meth:`fit`; ``None`` for none), the free labels this model has tags for
        (and that ``names`` does not hold) are decoded first, and every objective in ``names`` is
        learned as the residual of a prior on the free labels, and for ``"auto"``, ``"forest"`` and
        ``"ridge"`` on the graph labels too (:data:`~nasrlm.free_labels.GRAPH_OBJECTIVES`);
        :meth:`sample` then needs them: :meth:`known_labels` computes them. The default, a forest,
        ranked NB201 accuracy and latency best from 20 to 1,000 labels; with 20-50 rows ``"auto"``
        often picked a worse ridge (experiments/README.md, "Transfer from a pre-trained base model").
        ``prior_mode="blend"`` (a feature prior) decodes no free label: the model learns ``names`` from the
        text alone, and the prior reads the free labels beside the graph labels (:meth:`fit`).
        The spread is calibrated as :meth:`fit` says, by ``calibration_folds`` cross-fits where the
        validation rows are too few.

        Where ``names`` holds a latency the model has never decoded (a new device), the model first reads
        ``read_latencies`` of the latencies of ``space`` it does decode (:meth:`fit`'s ``reads``,
        :meth:`latencies_to_read`): those whose greedy reading ranks the labelled rows of the new ones best
        (:meth:`choose_reads`); 0: none.
        """
        if prior is not None and prior not in PRIOR_KINDS:
            raise ValueError(f"prior {prior!r}: expected None or one of {', '.join(PRIOR_KINDS)}")
        names = list(names)
        if prior_mode is None:
            prior_mode = "residual" if prior in (None, "line") else "blend"
        free = [k for k, o in enumerate(FREE_OBJECTIVES)
                if prior and prior_mode != "blend" and o.name not in names and o.name in self.objectives]
        if prior == "line" and not free:
            raise ValueError("prior: the free labels are among the objectives trained, nothing is left to "
                             "predict from them")
        if config is None:
            config = tune_config(len(arch_ids), decoder_only=prior_mode == "blend", alone=prior is None,
                                 progress=progress)
        graph = prior not in (None, "line")
        texts, labels = texts_and_free_labels(space, arch_ids, graph=graph, progress=progress)
        free_names = [FREE_OBJECTIVES[k].name for k in free]
        inputs = {o.name: labels[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES)
                  if graph and o.name not in free_names and o.name not in names}
        if graph and self.transfer is not None:  # from the source space most like this one, kept
            self.transfer = self.transfer.for_space(space)
            inputs[TRANSFER_LABEL] = self.transfer.predict(labels)
        values = np.asarray(values, dtype=np.float64).reshape(len(texts), -1)
        table = np.hstack([labels[:, free], values])
        # the line prior's free labels are given first, which a reading cannot precede (fit)
        reads = () if free_names else self.latencies_to_read(texts, values, names, read_latencies)
        self.spaces = tuple(sorted({*self.spaces, space.name}))
        return self.fit(texts, table, [*free_names, *names], config, refit_normalizers=refit_normalizers,
                        prior_from=tuple(free_names), prior_inputs=inputs, prior_kind=prior or "line",
                        prior_mode=prior_mode, derived_from=derived_from, calibration_folds=calibration_folds,
                        reads=reads)

    def latencies_to_read(self, texts: Sequence[str], values: np.ndarray, names: Sequence[str], k: int
                          ) -> tuple[str, ...]:
        """What :meth:`fine_tune` reads first where ``names`` holds a latency this model has never decoded
        (a new device): of the latencies of its space it does decode (:meth:`space_columns` in ms), the
        ``k`` whose reading ranks ``values`` (columns ``names``) best in the new ones. None where there is
        no new latency, or ``k`` is 0."""
        names = list(names)
        latency = {n for n, o in self.objectives.items() if o.unit == "ms"}
        new = [j for j, n in enumerate(names) if n in latency and n not in self.normalizers]
        known = [c for c in self.space_columns() if c in latency and c not in names]
        if not k or not new or not known:
            return ()
        return self.choose_reads(texts, np.asarray(values)[:, new], known, k)

    def known_labels(self, space: SearchSpace, arch_ids: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
        """The labels this model's prior reads, computed from each architecture's graph, as the keyword
        arguments of :meth:`sample`: ``{"given": decoded ones, "features": the others}``.

        Empty without a prior; a prior on labels that are not free (a device's latency) cannot be
        computed here: pass those yourself.
        """
        if not self.prior_inputs:
            return {}
        names = [o.name for o in ALL_FREE_OBJECTIVES]
        unknown = [f for f in self.prior_inputs if f not in names
                   and not (f == TRANSFER_LABEL and self.transfer is not None)]
        if unknown:
            raise ValueError(f"this model's prior reads {unknown}, which are not free labels: pass them to "
                             "sample() yourself")
        graph = any(f not in {o.name for o in FREE_OBJECTIVES} for f in self.prior_inputs)
        labels = free_labels(space, arch_ids, graph=graph)
        columns = {f: self.transfer.predict(labels) if f == TRANSFER_LABEL else labels[:, names.index(f)]
                   for f in self.prior_inputs}
        decoded = set(self.decode_order)
        return {"given": {f: v for f, v in columns.items() if f in decoded},
                "features": {f: v for f, v in columns.items() if f not in decoded}}

    def choose_reads(self, texts: Sequence[str], values: np.ndarray, candidates: Sequence[str], k: int
                     ) -> tuple[str, ...]:
        """The ``k`` of ``candidates`` (labels the model decodes) whose greedy reading (:meth:`read`) ranks
        the labelled ``values`` (len(texts), columns; NaN = unknown) best: by the mean over the columns of
        the Spearman correlation, in the order of ``candidates``; all of them where ``k`` is no smaller, none
        where no column has three different labelled values to rank."""
        candidates = tuple(candidates)
        if k < 0:
            raise ValueError(f"k={k}: the number of labels to read must be 0 or more")
        if k >= len(candidates):
            return candidates
        values = np.asarray(values, dtype=np.float64).reshape(len(texts), -1)
        reading = self.read(texts, candidates)
        fit, scored = np.zeros(len(candidates)), False
        for column in values.T:
            known = np.isfinite(column)
            if known.sum() < 3 or np.ptp(column[known]) == 0:
                continue
            scored = True
            fit += [stats.spearmanr(r[known], column[known]).statistic if np.ptp(r[known]) > 0 else 0.0
                    for r in reading.T]
        if not scored:  # nothing to rank by: no reading is chosen blindly
            return ()
        best = set(np.argsort(-fit, kind="stable")[:k].tolist())
        return tuple(c for j, c in enumerate(candidates) if j in best)

    def read(self, texts: Sequence[str], labels: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """The model's greedy reading of ``labels`` for every text, (len(texts), len(labels)) in their
        units: the most likely digit at every step, decoded in the order given from the text alone (no
        label of :attr:`reads_first` before them, no prior added, no spread)."""
        return self._decoded(texts, tuple(labels), 1, batch_size=batch_size, temperature=0.0)[:, 0]

    def _decoded(self, texts: Sequence[str], objectives: tuple[str, ...], num_samples: int, *,
                 batch_size: int, temperature: float, generator: torch.Generator | None = None,
                 progress: bool = False, given: tuple[tuple[str, ...], torch.Tensor] | None = None,
                 reads: tuple[str, ...] = ()) -> np.ndarray:
        """Samples of ``objectives`` as the decoder writes them, (len(texts), num_samples, len(objectives)) in
        their units, batch by batch: ``given`` (names, digit ids of every text) fed first, then ``reads`` read
        (:func:`~nasrlm.rlm.inference.sample_digits`)."""
        device = self.device
        ids = self.encode_texts(texts)
        out = np.empty((len(texts), num_samples, len(objectives)))
        starts = range(0, len(texts), batch_size)
        members = pooled([None, *self.members], num_samples)
        for start in tqdm(starts, desc="predicting", unit="batch", disable=not progress):
            input_ids, mask = pad_batch(ids[start : start + batch_size], self.model.config.text_pad_id)
            input_ids, mask = input_ids.to(device), mask.to(device)
            prefix = None if given is None else (given[0], given[1][start : start + len(input_ids)])
            memory = None
            if len(members) > 1:  # the members share the encoder: one encoding
                self.model.eval()
                with torch.no_grad():
                    memory = self.model.encode(input_ids, mask)
            parts = []
            for weights, share in members:
                with wearing(self.model, weights):
                    parts.append(sample_scaled(self.model, input_ids, mask, objectives, share,
                                               temperature=temperature, generator=generator, given=prefix,
                                               reads=reads, memory=memory))
            scaled = np.concatenate(parts, axis=1)
            for k, name in enumerate(objectives):
                out[start : start + len(input_ids), :, k] = self.normalizers[name].inverse(scaled[..., k])
        return out

    def _targets(self, values: np.ndarray, objectives: tuple[str, ...]) -> np.ndarray:
        numbers = self.model.vocab.numbers
        out = np.full((len(values), len(objectives), numbers.length), -1, dtype=np.int64)
        for k, name in enumerate(objectives):
            known = ~np.isnan(values[:, k])
            scaled = self.normalizers[name].forward(values[known, k])
            out[known, k] = numbers.encode_many(scaled)
        return out

    # --- inference ------------------------------------------------------------------------------
    def sample(self, texts: Sequence[str], objectives: Sequence[str] | None = None, *, num_samples: int = 64,
               batch_size: int = 16, temperature: float = 1.0, seed: int = 0, progress: bool = False,
               given: Mapping[str, np.ndarray] | None = None,
               features: Mapping[str, np.ndarray] | None = None,
               residual_weight: dict[str, float] | None = None,
               residual_spread: dict[str, float] | None = None, calibrated: bool = True) -> np.ndarray:
        """Samples in the objectives' units, shape (len(texts), num_samples, len(objectives)).

        ``objectives`` defaults to :attr:`predicts`, the objectives of the latest fit.
        ``given`` maps objectives known for every text (e.g. free labels) to their values; they are
        fed to the decoder before ``objectives``, which are then sampled conditioned on them (train
        with them first in the decode order). A model with a prior reads its inputs
        (:attr:`prior_inputs`) from ``given`` and ``features``, which the decoder does not see.

        ``residual_weight`` (the prior's objectives only) scales the median of each text's decoded
        residual, keeping the samples' spread around it (blended: how far the samples move, together, from
        the prior's prediction toward the model's): 0 centres the prediction on the prior, 1 trusts the
        model. Objectives it does not name use :attr:`residual_weights` (fitted on held-out rows, see
        :meth:`fit`).

        ``residual_spread`` replaces the decoded spread of those objectives' residuals by a normal
        one of the given standard deviation (in normal scores; one number, or one per text) around
        each text's (weighted) median,
        e.g. :attr:`prior_errors`: a model refitted on a few dozen labels is overconfident, and the
        prior's out-of-sample error is a spread measured on architectures it did not see.

        ``calibrated`` widens each objective's samples by its :attr:`spreads` (those of ``residual_spread``
        excepted), keeping each text's median; ``False``: the samples as decoded.

        The labels of :attr:`reads_first` that ``given`` lacks are decoded greedily before everything
        else (after ``given``), and the samples are conditioned on them; one that ``objectives`` asks for
        is sampled instead, still before the others.
        """
        objectives = tuple(objectives or self.predicts)
        given = dict(given or {})
        inputs = {**given, **(features or {})}
        missing = [o for o in (*given, *objectives) if o not in self.normalizers]
        if missing:
            raise ValueError(f"objective(s) {missing} were never trained; trained: {self.trained_objectives}")
        residual = [k for k, o in enumerate(objectives) if o in self.prior_objectives]
        absent = [f for f in self.prior_inputs if f not in inputs]
        if residual and absent:
            raise ValueError(f"this model predicts {[objectives[k] for k in residual]} from the labels "
                             f"{absent}: pass them as given= or features={{name: values}} "
                             "(known_labels(space, ids) computes free and graph labels)")
        given_tokens = None
        if given:
            known = np.stack([np.asarray(v, dtype=np.float64).reshape(len(texts)) for v in given.values()], 1)
            if not np.isfinite(known).all():
                raise ValueError("given values must all be known (finite)")
            given_tokens = torch.as_tensor(self._targets(known, tuple(given)))
        reads = tuple(o for o in self.reads_first if o not in given and o not in objectives)
        # a label read first that is asked for is sampled, still before the others
        first = tuple(o for o in self.reads_first if o in objectives and o not in given)
        order = (*first, *(o for o in objectives if o not in first))
        generator = torch.Generator(device=self.device).manual_seed(seed)
        decoded = self._decoded(texts, order, num_samples, batch_size=batch_size, temperature=temperature,
                                generator=generator, progress=progress, reads=reads,
                                given=None if given_tokens is None else (tuple(given), given_tokens))
        out = decoded[..., [order.index(name) for name in objectives]]
        add_prior(self, out, objectives, inputs, residual, residual_weight=residual_weight,
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
        return self._summaries(self.sample(texts, objectives, **options), objectives)

    def sample_archs(self, space: SearchSpace, arch_ids: Sequence[str],
                     objectives: Sequence[str] | None = None, *, equivalents: int = EQUIVALENT_READINGS,
                     num_samples: int = 64, seed: int = 0,
                     progress: bool = False, **options: Any) -> np.ndarray:
        """:meth:`sample` for architectures of ``space`` named by id, shape (len(arch_ids), num_samples,
        len(objectives)): their texts, and the labels a prior reads (:meth:`known_labels`), come through
        the label cache.

        Each objective that equivalent architectures share (an accuracy:
        :func:`~nasrlm.rlm.augment.shared_by_equivalents`) is read through up to ``equivalents`` texts of
        the architecture's equivalence class, the same for every member
        (:func:`~nasrlm.rlm.augment.equivalent_readings`), ``num_samples`` divided among them (at least 2
        each): the text keeps operations whose result is never used, which the model does not see
        through (experiments/README.md, "Who carries the prediction"). The prediction is the median of
        all their samples, and each text's samples keep their spread around it: the texts' disagreement
        is the model misreading one network, not an uncertainty about it, and the spread was calibrated
        on one text each. Equivalent architectures asked in one call so get the same samples. The other
        objectives are read through the architecture's own text (their samples then no longer pair
        with the accuracy's draw by draw); ``equivalents`` of 1 or less reads everything so.
        ``options`` go to :meth:`sample`, except the per-text ones, which are computed here.
        """
        objectives = tuple(objectives or self.predicts)
        untrained = [o for o in objectives if o not in self.objectives]
        if untrained:
            raise ValueError(f"objective(s) {untrained} were never trained; trained: "
                             f"{self.trained_objectives}")
        per_text = sorted({"given", "features", "residual_spread"} & set(options))
        if per_text:
            raise ValueError(f"sample_archs computes what it reads of each architecture itself: pass "
                             f"{', '.join(per_text)} to sample() with the texts instead")
        ids = list(arch_ids)
        shared = [k for k, name in enumerate(objectives) if shared_by_equivalents(self.objectives[name])]
        k = min(equivalents, num_samples // 2) if shared else 1
        readings = equivalent_readings(space, ids, k, seed=seed)

        def draws(of: list[str], n: int) -> np.ndarray:
            texts = texts_and_free_labels(space, of, progress=progress)[0]
            return self.sample(texts, objectives, num_samples=n, seed=seed, progress=progress,
                               **self.known_labels(space, of), **options)

        if readings.trivial:
            return draws(ids, num_samples)
        out = np.empty((len(ids), num_samples, len(objectives)))
        read: dict[int, np.ndarray] = {}  # a reader's draws
        if len(shared) < len(objectives):
            out[:] = draws(ids, num_samples)
            for row, group in enumerate(readings.groups):  # a class of one is read through its own text
                if len(group) == 1:
                    read[int(group[0])] = out[row]
        # each reader is decoded once, with its share of its class's samples (classes are disjoint)
        share = np.zeros(len(readings.readers), dtype=np.int64)
        for group in readings.groups:
            share[group] = num_samples // len(group) + (np.arange(len(group)) < num_samples % len(group))
        share[list(read)] = 0
        for n in np.unique(share[share > 0]):
            rows = np.flatnonzero(share == n)
            read.update(zip(rows.tolist(), draws([readings.readers[r] for r in rows], int(n)), strict=True))
        for i, group in enumerate(readings.groups):
            parts = [read[r][:, shared] for r in group.tolist()]
            if len(parts) > 1:  # the class's median; each text's spread, as calibrated, around it
                centre = np.median(np.concatenate(parts), axis=0)
                parts = [part - np.median(part, axis=0) + centre for part in parts]
            out[i][:, shared] = np.concatenate(parts)
        return out

    def predict_archs(self, space: SearchSpace, arch_ids: Sequence[str],
                      objectives: Sequence[str] | None = None, **options: Any) -> list[dict[str, Prediction]]:
        """:meth:`predict` for architectures of ``space`` named by id (see :meth:`sample_archs`)."""
        objectives = tuple(objectives or self.predicts)
        return self._summaries(self.sample_archs(space, arch_ids, objectives, **options), objectives)

    def _summaries(self, samples: np.ndarray, objectives: tuple[str, ...]) -> list[dict[str, Prediction]]:
        qs = np.quantile(samples, QUANTILES, axis=1)  # (q, n, k)
        return [
            {name: Prediction(float(np.median(samples[i, :, k])), float(samples[i, :, k].mean()),
                              {f"q{round(q * 100):02d}": float(qs[j, i, k]) for j, q in enumerate(QUANTILES)},
                              self.objectives[name].unit)
             for k, name in enumerate(objectives)}
            for i in range(len(samples))
        ]

    @property
    def device(self) -> torch.device:
        """Where the model's weights are (see :meth:`to`)."""
        return next(self.model.parameters()).device

    def to(self, device: str | torch.device) -> RLMPredictor:
        """Move the model to ``device`` (``"cpu"``, ``"cuda"``); training and sampling follow it."""
        self.model.to(device)
        return self

    @property
    def predicts(self) -> tuple[str, ...]:
        """What :meth:`sample` predicts by default: the latest fit's objectives, minus the prior's inputs."""
        return tuple(o for o in self.decode_order if o not in self.prior_inputs)

    @property
    def trained_objectives(self) -> tuple[str, ...]:
        """Objectives with a fitted normaliser, in the model's tag order."""
        return tuple(o for o in self.model.config.objectives if o in self.normalizers)

    # --- checkpoints ----------------------------------------------------------------------------
    def save(self, path: str | Path, *, half: bool = False) -> Path:
        """Write ``config.json``, ``model.safetensors`` and ``tokenizer.model`` into directory ``path`` (and a
        prior's, a transfer forest's and the :attr:`members`' files where it has them);
        ``half`` stores the weights in float16 (half the bytes; :meth:`load` reads them back in float32).

        The files are written into a staging directory first, so no file is ever seen truncated. A new
        ``path`` appears whole: the staging directory, made beside it, is renamed to it. An existing
        one (a checkpoint written again) gets the staged files, made inside it (same file system),
        each renamed over its namesake, ``config.json`` last, and files of the model's that it no
        longer has removed after that; a crash between two renames can leave new weights beside the
        old ``config.json``. Other files in ``path`` (a pre-training's optimiser state) stay.
        (:func:`~nasrlm.rlm.checkpoints.save_predictor` does it.)
        """
        return save_predictor(self, path, half=half)

    @classmethod
    def load(cls, path: str | Path) -> RLMPredictor:
        """Inverse of :meth:`save` (plain JSON and safetensors: nothing is unpickled).

        A directory without the files raises :class:`ModelNotFoundError`; files that are there but do
        not make a model (truncated weights, a config of another shape) :class:`ModelFileError`: each
        names the file at fault. (:func:`~nasrlm.rlm.checkpoints.load_predictor` does it.)
        """
        return load_predictor(cls, path)
