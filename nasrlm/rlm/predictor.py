"""``RLMPredictor``: ONNX text in, a distribution over every objective out — and its checkpoints.

It owns the three learned pieces — the ONNX tokenizer, the regression model and one label normaliser
per objective — plus the objectives' names and units, and saves them as a directory of plain files
(``config.json``, ``model.safetensors``, ``tokenizer.model``) that loads without unpickling anything.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file as load_arrays
from safetensors.numpy import save_file as save_arrays
from safetensors.torch import load_model, save_model
from tqdm.auto import tqdm

from nasrlm import __version__
from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, FREE_OBJECTIVES, free_labels, texts_and_free_labels
from nasrlm.priors.feature_prior import PRIOR_KINDS, FeaturePrior
from nasrlm.priors.prior import FreeLabelPrior, ScoresPrior, residual_weight, stratified_normal
from nasrlm.priors.transfer import (
    ACCURACY_RANK,
    TAG_SEPARATOR,
    TRANSFER_FILE,
    TRANSFER_LABEL,
    AccuracyTransfer,
    TransferFileError,
    is_accuracy,
)
from nasrlm.rlm.calibration import CALIBRATION_FOLDS, Spread, fit_spread
from nasrlm.rlm.inference import sample_scaled
from nasrlm.rlm.model import RegressionLM, RLMConfig
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.presets import TRAIN_SIZE, size_options
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.training import TrainConfig, TrainReport, derived_sources, pad_batch, train, validation_size
from search_spaces import SearchSpace

#: Validation rows needed before the model's residual is weighed on them: weights fitted on the 10
#: validation rows of 100 labelled NB201 cells let a residual through that ranked below the prior
#: alone (experiments/README.md, "Transfer from a pre-trained base model").
MIN_VALIDATION_ROWS = 30
#: The share of a residual kept when there were too few validation rows to weigh it: none. Fine-tuned
#: on 20 measurements of an unseen device, the residual pulled a ridge prior's ranking down (see
#: experiments/README.md, "Transfer from a pre-trained base model"); it must prove itself first.
UNVALIDATED_RESIDUAL_WEIGHT = 0.0
#: Samples per held-out row when a fit calibrates its spread (:attr:`RLMPredictor.spreads`).
CALIBRATION_SAMPLES = 32
#: Where a feature prior's forests are saved, beside ``config.json``.
PRIOR_FILE = "prior.safetensors"
#: Quantiles reported with every prediction.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: The base model shipped in the package (``nasrlm pretrain --ship``; what it saw: docs/base-model.md).
SHIPPED_BASE = Path(__file__).parent.parent / "base"  # nasrlm/base, beside this package


def _umask() -> int:
    """The process's file-creation mask, for the modes of saved files: read from ``/proc`` where there is
    one, else by setting it and back (the only portable way) when a model is saved, never at import."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class ModelNotFoundError(NasrlmError, FileNotFoundError):
    """A model directory lacks a file it needs (config, weights, tokenizer); the message names it."""


class ModelFileError(NasrlmError, ValueError):
    """A model directory's file is there but does not make a model (truncated, of another kind)."""


def shipped_base() -> Path:
    """The directory of the base model shipped in the package, or :class:`ModelNotFoundError` where an
    install left it out (a wheel built without package data)."""
    if not (SHIPPED_BASE / "config.json").is_file():
        raise ModelNotFoundError(f"{SHIPPED_BASE}: this install of nasrlm lacks its base model (reinstall "
                                 "it, or give a base directory written by 'nasrlm pretrain')")
    return SHIPPED_BASE


def _read_model_config(path: Path) -> dict:
    """``config.json`` of a model directory as a dict, checked far enough that loading can trust it.

    Unknown model settings are refused by name here: a config edited by hand, or written by another
    version, would otherwise fail inside the model's constructor with a message that names neither.
    """
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSON or UTF-8
        raise ModelFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: expected a JSON object, got a JSON {type(meta).__name__}")
    if meta.get("format") != "nasrlm-rlm":
        raise ModelFileError(f"{path} is not a nasrlm model config (format={meta.get('format')!r})")
    shapes = {"model": dict, "objectives": list, "normalizers": dict, "decode_order": list}
    wrong = [key for key, kind in shapes.items() if not isinstance(meta.get(key), kind)]
    wrong += [key for key, kind in (("spaces", list), ("spreads", dict))
              if not isinstance(meta.get(key, kind()), kind)]
    if wrong:
        raise ModelFileError(f"{path}: missing or malformed {', '.join(wrong)}")
    keys = {"format", "nasrlm_version", "prior", "spaces", "spreads", *shapes}
    unknown = sorted(set(meta) - keys)
    if unknown:
        raise ModelFileError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(keys))}")
    known = {f.name for f in fields(RLMConfig)}
    unknown = sorted(set(meta["model"]) - known)
    if unknown:
        raise ModelFileError(f"{path}: unknown model setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(known))}")
    return meta


@dataclass(frozen=True)
class Prediction:
    """One objective's predicted distribution, in the objective's own unit."""

    median: float
    mean: float
    quantiles: dict[str, float]  # "q05" → value, …
    unit: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _HeldOut:
    """How :meth:`RLMPredictor.fit` samples rows it did not train on, to calibrate its spread: the labels
    its prior reads (``prior_from`` decoded first and given, ``prior_inputs`` as features) of those rows."""

    prior_from: tuple[str, ...]
    prior_inputs: dict[str, np.ndarray]

    @property
    def inputs(self) -> tuple[str, ...]:
        """The prior's inputs (empty: no prior)."""
        return (*self.prior_from, *self.prior_inputs)

    def decoded(self, objectives: tuple[str, ...]) -> list[str]:
        return [o for o in objectives if o not in self.prior_from]

    def sample(self, predictor: RLMPredictor, texts: Sequence[str], values: np.ndarray,
               objectives: tuple[str, ...], rows: np.ndarray, *, seed: int) -> np.ndarray:
        """(rows, samples, decoded objectives) as decoded; ``values`` hold the given columns."""
        given = {f: values[rows, objectives.index(f)] for f in self.prior_from}
        features = {f: np.asarray(v, dtype=np.float64)[rows] for f, v in self.prior_inputs.items()}
        return predictor.sample([texts[i] for i in rows], self.decoded(objectives),
                                num_samples=CALIBRATION_SAMPLES, given=given, features=features, seed=seed)

    def fitted(self, draws: np.ndarray, truth: np.ndarray, objectives: tuple[str, ...]) -> dict[str, Spread]:
        """A spread per decoded objective with two known truths (``truth``: rows of every objective)."""
        spreads = {}
        for j, name in enumerate(self.decoded(objectives)):
            column = truth[:, objectives.index(name)]
            if np.count_nonzero(~np.isnan(column)) >= 2:
                spreads[name] = fit_spread(draws[..., j], column)
        return spreads

    def spreads(self, predictor: RLMPredictor, texts: Sequence[str], values: np.ndarray,
                objectives: tuple[str, ...], rows: np.ndarray, *, seed: int) -> dict[str, Spread]:
        draws = self.sample(predictor, texts, values, objectives, rows, seed=seed)
        return self.fitted(draws, values[rows], objectives)


def _typical_width(draws: np.ndarray) -> np.ndarray:
    """Per objective, the median over rows of the central-80 % width of ``draws`` (rows, samples,
    objectives): how sure a model is of the rows it trained on. A model fitted on all the rows is surer
    than the cross-fits on four fifths of them, and the stretch they fitted is corrected by the ratio."""
    low, high = np.quantile(draws, [0.1, 0.9], axis=1)
    return np.median(high - low, axis=0)


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
        #: per prior objective, the share of the model's residual that :meth:`sample` keeps by default,
        #: estimated on the validation rows of the latest fit
        #: (see :func:`~nasrlm.priors.prior.residual_weight`)
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

    @classmethod
    def create(cls, tokenizer: OnnxTokenizer, objectives: Sequence[Objective],
               **model_options) -> RLMPredictor:
        """A fresh, randomly initialised predictor with a tag for each of ``objectives``."""
        config = RLMConfig(text_vocab_size=tokenizer.vocab_size, text_pad_id=tokenizer.pad_id,
                           objectives=tuple(o.name for o in objectives), **model_options)
        return cls(tokenizer, RegressionLM(config), objectives)

    @classmethod
    def from_scratch(cls, objectives: Sequence[Objective], *, size: str = TRAIN_SIZE, seed: int = 0,
                     tokenizer: OnnxTokenizer | None = None, **model_options) -> RLMPredictor:
        """A fresh predictor for ``objectives``, with a tag for every free label decoded before them.

        The tokenizer is the default one learned on samples of every registered space (or the one
        given); ``size`` names a preset of :data:`nasrlm.rlm.presets.SIZES`, ``model_options`` override it.
        Initial weights depend only on ``seed``.
        """
        tokenizer = tokenizer or OnnxTokenizer.train_on_spaces(seed=seed)
        names = {o.name for o in objectives}
        free = [o for o in FREE_OBJECTIVES if o.name not in names]  # a published params_m is the same tag
        torch.manual_seed(seed)
        return cls.create(tokenizer, [*free, *objectives], **{**size_options(size), **model_options})

    @classmethod
    def from_base(cls, path: str | Path | None, objectives: Sequence[Objective], *, space: str
                  ) -> RLMPredictor:
        """A pre-trained base model (``nasrlm pretrain``; ``None``: the one shipped in the package) ready
        to fine-tune on ``objectives`` of ``space``.

        The base's tags of that space (``nb201:pixel3``) answer to their plain names (``pixel3``), so
        a column the base has seen keeps its learned tag and its normaliser; a new column gets a new
        tag (see :meth:`RegressionLM.with_objectives`). Tags of other spaces stay as they are.
        """
        base = cls.load(shipped_base() if path is None else path)
        prefix = f"{space}{TAG_SEPARATOR}"
        plain = set(base.model.config.objectives)
        renamed = {t: t.removeprefix(prefix) for t in plain  # a free label keeps its tag for the same name
                   if t.startswith(prefix) and t.removeprefix(prefix) not in plain}
        tags = [renamed.get(t, t) for t in base.model.config.objectives]
        known = set(tags)
        tags += [o.name for o in objectives if o.name not in known]
        metadata = {renamed.get(n, n): replace(o, name=renamed.get(n, n)) for n, o in base.objectives.items()}
        metadata.update((o.name, o) for o in objectives)
        like = {o.name: ACCURACY_RANK.name for o in objectives  # a new accuracy starts as the base's rank
                if o.name not in known and is_accuracy(o) and ACCURACY_RANK.name in known}
        model = base.model.with_objectives(tuple(tags), renamed=renamed, like=like)
        normalizers = {renamed.get(n, n): v for n, v in base.normalizers.items()}
        predictor = cls(base.tokenizer, model, list(metadata.values()), normalizers)
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
        """
        predictor = cls.from_base(path, (), space=space)
        if ACCURACY_RANK.name in predictor.normalizers:
            predictor.decode_order = (ACCURACY_RANK.name,)
        else:
            predictor.decode_order = predictor.space_columns()
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
            prior_reference: np.ndarray | None = None,
            derived_from: Sequence[int] | None = None, calibration_folds: int = 0) -> TrainReport:
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

        ``derived_from`` marks augmented rows (:func:`nasrlm.rlm.augment.equivalent_rows`): the row each
        was made from, -1 for originals. Normalisers and the prior are fitted on the originals only,
        and only originals are held out for validation (see :func:`~nasrlm.rlm.training.train`).

        The fit ends by calibrating the spread of every objective it decodes (:attr:`spreads`) on rows
        it did not train on: the validation rows where there are :data:`MIN_VALIDATION_ROWS`, else
        ``calibration_folds`` cross-fits (each the same fit on the other folds' rows, from the same
        starting weights: that many fits more; 0 or 1: none, the samples stay as decoded;
        :meth:`fine_tune` does :data:`~nasrlm.rlm.calibration.CALIBRATION_FOLDS`).
        """
        objectives = tuple(objectives)
        values = np.asarray(values, dtype=np.float64).reshape(len(texts), len(objectives))
        unknown = [o for o in objectives if o not in self.objectives]
        if unknown:
            raise ValueError(f"objective(s) {unknown} are not among this model's {list(self.objectives)}")
        source = derived_sources(derived_from, len(texts))
        original = source < 0
        config = config or TrainConfig()
        raw, held_out = values, _HeldOut(tuple(prior_from), dict(prior_inputs or {}))
        prior, inputs, predicted, x = None, (*prior_from, *(prior_inputs or {})), (), None
        if inputs:  # validated before anything changes: a refused call leaves the predictor as it was
            x = self._prior_matrix(values, objectives, tuple(prior_from), dict(prior_inputs or {}))
            prior, predicted, values = self._fit_prior(x, values, objectives, tuple(prior_from), prior_kind,
                                                       prior_reference, original,
                                                       line_inputs=[f != TRANSFER_LABEL for f in inputs])
        spreads: dict[str, Spread] = {}
        widths = None  # the cross-fits' in-sample widths, when they calibrate
        folds = min(calibration_folds, int(original.sum()) // 2)
        validated = validation_size(int(original.sum()), config.validation_fraction) >= MIN_VALIDATION_ROWS
        if folds >= 2 and not validated:
            options = {"refit_normalizers": refit_normalizers, "headroom": headroom,
                       "prior_kind": prior_kind, "prior_reference": prior_reference}
            spreads, widths = self._cross_fitted_spreads(texts, raw, objectives, config, source, folds,
                                                         held_out, options)
        self.prior, self.prior_inputs, self.prior_objectives = prior, inputs, predicted
        self.residual_weights = {}
        self.prior_errors = {}
        if prior is not None:
            rows = values[original][:, [objectives.index(name) for name in predicted]]
            self.prior_errors = {name: float(np.sqrt(np.nanmean(rows[:, j] ** 2)))
                                 for j, name in enumerate(predicted)}
        for k, name in enumerate(objectives):
            refit = refit_normalizers if isinstance(refit_normalizers, bool) else name in refit_normalizers
            if refit or name not in self.normalizers:
                self.normalizers[name] = Normalizer.fit(values[original, k], headroom=headroom)
        targets = self._targets(values, objectives)
        report = train(self.model, self.encode_texts(texts), targets, objectives, config,
                       derived_from=derived_from)
        self.decode_order = objectives
        if prior is not None and len(report.validation_rows) >= MIN_VALIDATION_ROWS:
            self.residual_weights = self._validated_weights(texts, x, values, objectives,
                                                            report.validation_rows)
        elif prior is not None:
            self.residual_weights = dict.fromkeys(predicted, UNVALIDATED_RESIDUAL_WEIGHT)
        if len(report.validation_rows) >= MIN_VALIDATION_ROWS:
            spreads = held_out.spreads(self, texts, raw, objectives, np.asarray(report.validation_rows),
                                       seed=config.seed)
        elif widths is not None:  # trained on all the rows, the model decodes narrower than the folds did
            mine = _typical_width(held_out.sample(self, texts, raw, objectives, np.flatnonzero(original),
                                                  seed=config.seed))
            ratio = np.where(mine > 0, widths / np.where(mine > 0, mine, 1.0), 1.0)
            stretch = dict(zip(held_out.decoded(objectives), ratio.tolist(), strict=True))
            spreads = {name: spread.stretched(stretch[name]) for name, spread in spreads.items()}
        self.spreads = spreads
        return report

    def _cross_fitted_spreads(self, texts: Sequence[str], values: np.ndarray, objectives: tuple[str, ...],
                              config: TrainConfig, source: np.ndarray, folds: int, held_out: _HeldOut,
                              options: dict) -> tuple[dict[str, Spread], np.ndarray]:
        """The spreads of :meth:`fit` from ``folds`` fits, each on the rows of the other folds, started
        from the weights and normalisers the model has now (put back when done), and the folds' mean
        :func:`_typical_width` of each decoded objective on their own training rows. An augmented row
        goes with the row it was made from."""
        originals = np.flatnonzero(source < 0)
        fold = np.empty(len(texts), dtype=np.int64)
        fold[originals] = np.random.default_rng(config.seed).permutation(len(originals)) % folds
        fold[source >= 0] = fold[source[source >= 0]]
        weights = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        normalizers = dict(self.normalizers)
        # with a prior, whose residual is not weighed with this few rows, the folds' errors are the prior's
        # whatever the model learns, and the width ratio matches their spread to the final model's: the
        # decoder alone is trained, at a fraction of the time
        quiet = replace(config, progress=False, freeze_encoder=config.freeze_encoder or bool(held_out.inputs))
        draws: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        widths: list[np.ndarray] = []
        try:
            for k in range(folds):
                kept = np.flatnonzero(fold != k)
                position = np.full(len(texts), -1, dtype=np.int64)
                position[kept] = np.arange(len(kept))
                derived = np.where(source[kept] >= 0, position[np.maximum(source[kept], 0)], -1)
                self.fit([texts[i] for i in kept], values[kept], objectives, quiet, **options,
                         prior_from=held_out.prior_from,
                         prior_inputs={f: np.asarray(v)[kept] for f, v in held_out.prior_inputs.items()},
                         derived_from=derived if (source >= 0).any() else None, calibration_folds=0)
                test = np.flatnonzero((fold == k) & (source < 0))
                draws.append(held_out.sample(self, texts, values, objectives, test, seed=config.seed))
                rows.append(test)
                seen = kept[source[kept] < 0]
                widths.append(_typical_width(held_out.sample(self, texts, values, objectives, seen,
                                                             seed=config.seed)))
        finally:
            self.model.load_state_dict(weights)
            self.normalizers = normalizers
        spreads = held_out.fitted(np.concatenate(draws), values[np.concatenate(rows)], objectives)
        return spreads, np.mean(widths, axis=0)

    def fine_tune(self, space: SearchSpace, arch_ids: Sequence[str], values: np.ndarray, names: Sequence[str],
                  config: TrainConfig | None = None, *, prior: str | None = "forest",
                  refit_normalizers: bool | Collection[str] = True,
                  derived_from: Sequence[int] | None = None, progress: bool = False,
                  calibration_folds: int = CALIBRATION_FOLDS) -> TrainReport:
        """Train on labelled architectures of ``space``: the recipe every caller shares.

        Each architecture's text and free labels come from one ONNX build. With a ``prior`` (a
        ``prior_kind`` of :meth:`fit`; ``None`` for none), the free labels this model has tags for
        (and that ``names`` does not hold) are decoded first, and every objective in ``names`` is
        learned as the residual of a prior on the free labels, and for ``"auto"``, ``"forest"`` and
        ``"ridge"`` on the graph labels too (:data:`~nasrlm.free_labels.GRAPH_OBJECTIVES`);
        :meth:`sample` then needs them: :meth:`known_labels` computes them. The default, a forest,
        ranked NB201 accuracy and latency best from 20 to 1,000 labels; with 20-50 rows ``"auto"``
        often picked a worse ridge (experiments/README.md, "Transfer from a pre-trained base model").
        The spread is calibrated as :meth:`fit` says, by ``calibration_folds`` cross-fits where the
        validation rows are too few.
        """
        if prior is not None and prior not in PRIOR_KINDS:
            raise ValueError(f"prior {prior!r}: expected None or one of {', '.join(PRIOR_KINDS)}")
        names = list(names)
        free = [k for k, o in enumerate(FREE_OBJECTIVES)
                if prior and o.name not in names and o.name in self.objectives]
        if prior == "line" and not free:
            raise ValueError("prior: the free labels are among the objectives trained, nothing is left to "
                             "predict from them")
        graph = prior not in (None, "line")
        texts, labels = texts_and_free_labels(space, arch_ids, graph=graph, progress=progress)
        free_names = [FREE_OBJECTIVES[k].name for k in free]
        inputs = {o.name: labels[:, k] for k, o in enumerate(ALL_FREE_OBJECTIVES)
                  if graph and o.name not in free_names and o.name not in names}
        if graph and self.transfer is not None:  # from the source space most like this one, kept
            self.transfer = self.transfer.for_space(space)
            inputs[TRANSFER_LABEL] = self.transfer.predict(labels)
        table = np.hstack([labels[:, free], np.asarray(values, dtype=np.float64).reshape(len(texts), -1)])
        self.spaces = tuple(sorted({*self.spaces, space.name}))
        return self.fit(texts, table, [*free_names, *names], config, refit_normalizers=refit_normalizers,
                        prior_from=tuple(free_names), prior_inputs=inputs, prior_kind=prior or "line",
                        derived_from=derived_from, calibration_folds=calibration_folds)

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

    def _validated_weights(self, texts: Sequence[str], x: np.ndarray, values: np.ndarray,
                           objectives: tuple[str, ...], rows: Sequence[int]) -> dict[str, float]:
        """Residual weight per prior objective from the model's median residual on held-out ``rows``
        (``x``: the prior's inputs; ``values`` holds the residuals the model was trained on)."""
        given = {f: values[rows, objectives.index(f)] for f in self.prior_inputs if f in objectives}
        features = {f: x[rows, j] for j, f in enumerate(self.prior_inputs)}
        predicted = self.sample([texts[i] for i in rows], self.prior_objectives, num_samples=16, given=given,
                                features=features, residual_weight=dict.fromkeys(self.prior_objectives, 1.0))
        median = self.prior.residuals(x[rows], np.median(predicted, axis=1))
        return {name: residual_weight(median[:, j], values[rows, objectives.index(name)])
                for j, name in enumerate(self.prior_objectives)}

    @staticmethod
    def _prior_matrix(values: np.ndarray, objectives: tuple[str, ...], prior_from: tuple[str, ...],
                      prior_inputs: dict[str, np.ndarray]) -> np.ndarray:
        """The prior's inputs, (n, len(prior_from) + len(prior_inputs)), checked."""
        absent = [f for f in prior_from if f not in objectives]
        if absent:
            raise ValueError(f"prior_from: {absent} are not among the objectives trained "
                             f"({list(objectives)})")
        trained = [f for f in prior_inputs if f in objectives]
        if trained:
            raise ValueError(f"prior_inputs: {trained} are objectives trained; name them in prior_from")
        columns = [values[:, objectives.index(f)] for f in prior_from]
        for name, column in prior_inputs.items():
            column = np.asarray(column, dtype=np.float64).ravel()
            if len(column) != len(values):
                raise ValueError(f"prior_inputs[{name!r}] has {len(column)} values for {len(values)} rows")
            columns.append(column)
        x = np.column_stack(columns)
        if not np.isfinite(x).all():
            names = [*prior_from, *prior_inputs]
            bad = [names[j] for j in np.flatnonzero(~np.isfinite(x).all(axis=0))]
            raise ValueError(f"the prior's inputs {bad} must be known for every row")
        return x

    @staticmethod
    def _fit_prior(x: np.ndarray, values: np.ndarray, objectives: tuple[str, ...],
                   prior_from: tuple[str, ...], kind: str, reference: np.ndarray | None, original: np.ndarray,
                   line_inputs: Sequence[bool]) -> tuple[ScoresPrior, tuple[str, ...], np.ndarray]:
        """The prior (fitted on the ``original`` rows), the objectives it predicts, and ``values`` with
        those as residuals: for a feature prior, the training rows' out-of-sample residuals.
        ``line_inputs``: the inputs a trend forest's line may follow (not the transfer forest's guess)."""
        rest = [k for k in range(len(objectives)) if objectives[k] not in prior_from]
        if not rest:
            raise ValueError("prior_from names every objective: nothing is left to predict from them")
        values = values.copy()
        if kind == "line":
            reference = x[original] if reference is None else np.asarray(reference, dtype=np.float64)
            if reference.ndim != 2 or reference.shape[1] != x.shape[1] or not len(reference):
                raise ValueError(f"prior_reference must be rows of the prior's {x.shape[1]} inputs, "
                                 f"got shape {reference.shape}")
            prior = FreeLabelPrior.fit(x[original], values[original][:, rest], reference)
            values[:, rest] = prior.residuals(x, values[:, rest])
        else:
            if reference is not None:
                raise ValueError("prior_reference applies to the line prior (prior_kind='line') only")
            prior, held_out = FeaturePrior.fit(x[original], values[original][:, rest], kind=kind,
                                               line_inputs=np.asarray(line_inputs, dtype=bool))
            residuals = prior.residuals(x, values[:, rest])
            residuals[original] += prior.mean(x[original]) - held_out
            values[:, rest] = residuals
        return prior, tuple(objectives[k] for k in rest), values

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

        ``residual_weight`` (objectives learned as residuals of the free-label prior only) scales the
        median of each text's decoded residual, keeping the samples' spread around it: 0 centres the
        prediction on the prior, 1 trusts the model. Objectives it does not name use
        :attr:`residual_weights` (fitted on validation rows, see :meth:`fit`).

        ``residual_spread`` replaces the decoded spread of those objectives' residuals by a normal
        one of the given standard deviation (in normal scores; one number, or one per text) around
        each text's (weighted) median,
        e.g. :attr:`prior_errors`: a model refitted on a few dozen labels is overconfident, and the
        prior's out-of-sample error is a spread measured on architectures it did not see.

        ``calibrated`` widens each objective's samples by its :attr:`spreads` (those of ``residual_spread``
        excepted), keeping each text's median; ``False``: the samples as decoded.
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
        device = self.device
        generator = torch.Generator(device=device).manual_seed(seed)
        ids = self.encode_texts(texts)
        out = np.empty((len(texts), num_samples, len(objectives)))
        starts = range(0, len(texts), batch_size)
        for start in tqdm(starts, desc="predicting", unit="batch", disable=not progress):
            input_ids, mask = pad_batch(ids[start : start + batch_size], self.model.config.text_pad_id)
            prefix = None
            if given_tokens is not None:
                prefix = (tuple(given), given_tokens[start : start + len(input_ids)])
            scaled = sample_scaled(self.model, input_ids.to(device), mask.to(device), objectives, num_samples,
                                   temperature=temperature, generator=generator, given=prefix)
            for k, name in enumerate(objectives):
                out[start : start + len(input_ids), :, k] = self.normalizers[name].inverse(scaled[..., k])
        for option, named in (("residual_weight", residual_weight), ("residual_spread", residual_spread)):
            unknown = [o for o in named or {} if o not in self.prior_objectives or o not in objectives]
            if unknown:
                raise ValueError(f"{option} for {unknown}: not residual objectives of this call "
                                 f"(residual objectives: {list(self.prior_objectives)})")
        if residual and self.prior is not None:
            x = np.stack([np.asarray(inputs[f], dtype=np.float64).reshape(len(texts))
                          for f in self.prior_inputs], axis=1)
            block = self._residual_block(out, objectives)
            weights = {**self.residual_weights, **(residual_weight or {})}
            for name, weight in weights.items():
                if name not in objectives or weight == 1.0:
                    continue
                j = self.prior_objectives.index(name)
                median = np.median(block[..., j], axis=1, keepdims=True)
                block[..., j] += (weight - 1.0) * median
            if residual_spread:
                rng = np.random.default_rng(seed)  # the median stays put: see stratified_normal
                for name, spread in residual_spread.items():
                    j = self.prior_objectives.index(name)
                    spread = np.asarray(spread, dtype=np.float64).reshape(-1, 1)  # one for all, or per text
                    if len(spread) not in (1, len(texts)):
                        raise ValueError(f"residual_spread for {name!r}: one number or one per text "
                                         f"({len(texts)}), got {len(spread)}")
                    median = np.median(block[..., j], axis=1, keepdims=True)
                    block[..., j] = median + spread * stratified_normal(len(texts), num_samples, rng)
            values = self.prior.values(x, block)
            for k in residual:
                out[..., k] = values[..., self.prior_objectives.index(objectives[k])]
        if calibrated and self.spreads:
            rng = np.random.default_rng([seed, 1])
            for k, name in enumerate(objectives):
                if name in self.spreads and name not in (residual_spread or {}):
                    out[..., k] = self.spreads[name].widen(out[..., k], rng)
        return out

    def _residual_block(self, out: np.ndarray, objectives: tuple[str, ...]) -> np.ndarray:
        """(n, samples, len(prior_objectives)) residual samples; objectives not asked for stay 0."""
        block = np.zeros((*out.shape[:2], len(self.prior_objectives)))
        for j, name in enumerate(self.prior_objectives):
            if name in objectives:
                block[..., j] = out[..., objectives.index(name)]
        return block

    def predict(self, texts: Sequence[str], objectives: Sequence[str] | None = None, **options
                ) -> list[dict[str, Prediction]]:
        """Median, mean and quantiles per objective for each text (see :meth:`sample` for options)."""
        objectives = tuple(objectives or self.predicts)
        samples = self.sample(texts, objectives, **options)
        qs = np.quantile(samples, QUANTILES, axis=1)  # (q, n, k)
        return [
            {name: Prediction(float(np.median(samples[i, :, k])), float(samples[i, :, k].mean()),
                              {f"q{round(q * 100):02d}": float(qs[j, i, k]) for j, q in enumerate(QUANTILES)},
                              self.objectives[name].unit)
             for k, name in enumerate(objectives)}
            for i in range(len(texts))
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
        """Write ``config.json``, ``model.safetensors`` and ``tokenizer.model`` into directory ``path``;
        ``half`` stores the weights in float16 (half the bytes; :meth:`load` reads them back in float32).

        The files are written into a staging directory first, so no file is ever seen truncated. A new
        ``path`` appears whole: the staging directory, made beside it, is renamed to it. An existing
        one (a checkpoint written again) gets the staged files, made inside it (same file system),
        each renamed over its namesake, ``config.json`` last, and files of the model's that it no
        longer has removed after that; a crash between two renames can leave new weights beside the
        old ``config.json``. Other files in ``path`` (a pre-training's optimiser state) stay.
        """
        path = Path(path)
        exists = path.is_dir()
        if not exists:
            path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-" if exists else f".{path.name}.",
                                        dir=path if exists else path.parent))
        try:
            self._write_files(staging, half=half)
            umask = _umask()
            for file in staging.iterdir():  # one mode for all (safetensors writes its file 0600)
                file.chmod(0o666 & ~umask)
            if not exists:
                staging.chmod(0o777 & ~umask)
                os.replace(staging, path)
                return path
            written = {f.name for f in staging.iterdir()}
            for file in sorted(staging.iterdir(), key=lambda f: f.name == "config.json"):
                os.replace(file, path / file.name)
            for name in {PRIOR_FILE, TRANSFER_FILE} - written:  # config.json no longer names them
                (path / name).unlink(missing_ok=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return path

    def _write_files(self, path: Path, *, half: bool = False) -> None:
        """The files of :meth:`save`, into the empty directory ``path``."""
        device = self.device
        model = copy.deepcopy(self.model).cpu().half() if half else self.model.cpu()
        save_model(model, path / "model.safetensors")  # de-duplicates the tied embeddings
        self.model.to(device)
        (path / "tokenizer.model").write_bytes(self.tokenizer.to_bytes())
        meta = {
            "format": "nasrlm-rlm",
            "nasrlm_version": __version__,
            "model": self.model.config.to_dict(),
            "objectives": [asdict(o) for o in self.objectives.values()],
            "normalizers": {k: v.to_dict() for k, v in self.normalizers.items()},
            "decode_order": list(self.decode_order),
            "spaces": list(self.spaces),
            "spreads": {k: v.to_dict() for k, v in self.spreads.items()},
        }
        arrays = {}
        if self.prior is not None:
            meta["prior"] = {"inputs": list(self.prior_inputs), "predicts": list(self.prior_objectives),
                             "fit": self.prior.to_dict(), "residual_weights": self.residual_weights}
            arrays = self.prior.arrays() if isinstance(self.prior, FeaturePrior) else {}
        if arrays:
            save_arrays(arrays, path / PRIOR_FILE)
        if self.transfer is not None:
            self.transfer.save(path / TRANSFER_FILE)
        (path / "config.json").write_text(json.dumps(meta, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> RLMPredictor:
        """Inverse of :meth:`save` (plain JSON and safetensors: nothing is unpickled).

        A directory without the files raises :class:`ModelNotFoundError`; files that are there but do
        not make a model (truncated weights, a config of another shape) :class:`ModelFileError`: each
        names the file at fault.
        """
        path = Path(path)
        files = [path / n for n in ("config.json", "model.safetensors", "tokenizer.model")]
        absent = [f.name for f in files if not f.is_file()]
        if absent:
            raise ModelNotFoundError(f"{path} is not a nasrlm model directory: missing {', '.join(absent)}")
        meta = _read_model_config(files[0])
        try:
            model = RegressionLM(RLMConfig(**meta["model"]))
        except (TypeError, ValueError) as error:  # a setting missing or out of range
            raise ModelFileError(f"{files[0]}: bad model settings ({error})") from None
        try:
            load_model(model, files[1])
        except (SafetensorError, RuntimeError) as error:  # not safetensors, or tensors of other shapes
            raise ModelFileError(f"{files[1]}: not the weights of the model {files[0].name} describes "
                                 f"({' '.join(str(error).split())[:200]})") from None
        model.eval()
        try:
            tokenizer = OnnxTokenizer.from_bytes(files[2].read_bytes())
        except RuntimeError:  # sentencepiece's "ParseFromArray" failure
            raise ModelFileError(f"{files[2]}: not a sentencepiece tokenizer model") from None
        try:
            normalizers = {k: Normalizer.from_dict(v) for k, v in meta["normalizers"].items()}
            predictor = cls(tokenizer, model, [Objective(**o) for o in meta["objectives"]], normalizers,
                            meta["decode_order"])
            if "prior" in meta:
                predictor._load_prior(path, meta["prior"])
            predictor.spaces = tuple(str(name) for name in meta.get("spaces", ()))
            predictor.spreads = {k: Spread.from_dict(v) for k, v in meta.get("spreads", {}).items()}
        except (AttributeError, KeyError, TypeError, ValueError, SafetensorError) as error:
            raise ModelFileError(f"{files[0]}: not a nasrlm model config ({type(error).__name__}: "
                                 f"{error})") from None
        if (path / TRANSFER_FILE).is_file():
            try:
                predictor.transfer = AccuracyTransfer.load(path / TRANSFER_FILE)
            except TransferFileError as error:
                raise ModelFileError(str(error)) from None
        elif TRANSFER_LABEL in predictor.prior_inputs:
            raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing "
                                     f"{TRANSFER_FILE} (the transfer forest its prior reads)")
        return predictor

    def _load_prior(self, path: Path, meta: dict) -> None:
        """The prior part of :meth:`load`: ``meta`` is the ``"prior"`` entry of ``config.json``."""
        fit = meta["fit"]
        if fit.get("kind") == "feature":
            arrays = load_arrays(path / PRIOR_FILE) if (path / PRIOR_FILE).is_file() else {}
            if any(m["kind"] != "ridge" for m in fit["models"]) and not arrays:
                raise ModelNotFoundError(f"{path} is not a complete nasrlm model directory: missing "
                                         f"{PRIOR_FILE} (the prior's forests)")
            self.prior = FeaturePrior.from_dict(fit, arrays)
        else:
            self.prior = FreeLabelPrior.from_dict(fit)
        self.prior_inputs = tuple(meta["inputs"])
        self.prior_objectives = tuple(meta["predicts"])
        self.residual_weights = dict(meta.get("residual_weights", {}))
