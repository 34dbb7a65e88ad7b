"""The RLMSampler's model of the objectives: what ``_ParzenEstimator`` is to Optuna's TPE.

An :class:`~nasrlm.rlm.predictor.RLMPredictor` refitted on the completed trials each round, and sampled for
the candidates' objectives. It starts either from a base model (``nasrlm pretrain``), copied afresh for
every refit, or from a model learned here: a tokenizer trained on the candidate pool's texts and a
pre-training pass on their free labels (parameters, MACs), which cost nothing to compute. Or, as a
:class:`PriorSurrogate`, the prior alone that the model learns the residual of: what the sampler uses
once the model stops paying for itself (``ProposalSettings(prior_alone_after=)``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from nasrlm.data import Objective
from nasrlm.priors.feature_prior import KINDS, FeaturePrior
from nasrlm.priors.inputs import InputRoles
from nasrlm.priors.prior import residual_weight
from nasrlm.rlm.recipes import REFIT, SIZES, TrainConfig
from nasrlm.search.sampler._arch_cache import FREE_NAMES, ArchCache
from nasrlm.search.sampler._warm_start import EvidenceInputs

#: Appended to the model's tag of a study objective named like a free label (``params_m``), which the
#: decoder is given already: the two stay apart.
OWN_TAG_SUFFIX = "#objective"
#: Network for the sampler's model: small enough to refit in seconds on two cores (the ``compact`` size;
#: why no dropout: experiments/README.md, "Pareto search").
DEFAULT_MODEL = SIZES["compact"]
#: torch threads the sampler's model trains and decodes on, whatever the rest of the process uses
#: (``--threads``): a sum split over another number of threads adds in another order, and a seed's trials
#: would part from the second refit on (experiments/README.md, "Same seed, same search"). The count is the
#: process's: while the model fits, a torch objective running beside it (``n_jobs > 1``) runs on it too.
MODEL_THREADS = 1


@contextmanager
def model_threads() -> Iterator[None]:
    """Run the block on :data:`MODEL_THREADS` torch threads, then restore the process's count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(MODEL_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass(frozen=True)
class FitSettings:
    """How the surrogate learns: pre-training once, then a short refit per proposal round.

    A bad value raises ``ValueError`` naming the field. With ``surrogate="prior"`` no model is trained
    and none of it applies; from a base model (``RLMSampler(base=)``), ``model`` and the pre-training
    fields do not apply (a base has its own size and was pre-trained already).
    """

    #: optimiser steps per refit (:data:`~nasrlm.rlm.recipes.REFIT`'s)
    fit_steps: int = REFIT.steps
    #: trials per step of a refit (fewer when fewer trials exist)
    batch_size: int = TrainConfig.batch_size
    #: peak learning rate of a refit, and the share of its steps spent warming up to it
    learning_rate: float = REFIT.learning_rate
    warmup_fraction: float = REFIT.warmup_fraction
    #: architectures whose free labels pre-train a model learned from scratch (0: none)
    pretrain_archs: int = 2000
    #: least passes over them (more when ``2 * fit_steps`` steps need more)
    pretrain_epochs: int = 3
    #: the pre-training's learning rate
    pretrain_learning_rate: float = 2e-3
    #: share of the decoder's range kept at each end for objective values beyond those observed, or no
    #: candidate could ever be predicted to extend the front
    headroom: float = 0.1
    #: :class:`~nasrlm.rlm.model.RLMConfig` overrides of a model learned from scratch (default
    #: :data:`DEFAULT_MODEL`; kept as a copy)
    model: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_MODEL))

    def __post_init__(self) -> None:
        if not isinstance(self.model, Mapping):
            raise ValueError(f"model must be a mapping of RLMConfig settings, got {self.model!r}")
        object.__setattr__(self, "model", dict(self.model))  # a copy: the caller's may change
        for name in ("fit_steps", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("learning_rate", "pretrain_learning_rate"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in ("pretrain_archs", "pretrain_epochs"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")
        if not 0 <= self.warmup_fraction <= 1:
            raise ValueError(f"warmup_fraction must be in [0, 1], got {self.warmup_fraction}")
        if not 0 <= self.headroom < 0.5:
            raise ValueError(f"headroom must be in [0, 0.5), got {self.headroom}")


def scaled_by_trees(errors: np.ndarray, disagreement: np.ndarray) -> np.ndarray:
    """(n, m) spreads: each objective's prior error (m,) scaled per architecture by how much the prior's
    trees disagree on it (``disagreement``, (n, m)) relative to their mean disagreement; an objective
    whose prior has no trees (a ridge: NaN) keeps one spread for all."""
    out = np.tile(np.asarray(errors, dtype=np.float64), (len(disagreement), 1))
    for k in range(out.shape[1]):
        d = disagreement[:, k]
        if np.isfinite(d).all() and d.mean() > 0:
            out[:, k] *= d / d.mean()
    return out


class RLMSurrogate:
    """An RLM refitted on trials, sampled for candidates.

    Args:
        cache: texts and labels of the space's architectures (shared with the sampler).
        objectives: the study's objectives, in its order.
        prior: the prior the model learns the residual of (see :class:`~nasrlm.search.ProposalSettings`).
        settings: how it trains, and the size of a model learned from scratch (``settings.model``).
        base: a base model directory to start every refit from instead.
        device: ``"cpu"`` or ``"cuda"``.
        seed: seeds the tokenizer, the initial weights and every refit (with the round number).
        progress: progress bars while it trains and samples.
        log: called with a line before each long step.
        evidence: what earlier studies measured of other quantities, which the prior reads beside the graph
            labels (a warm start's :class:`~nasrlm.search.sampler._warm_start.EvidenceInputs`).
        signed: names of ``objectives`` that may take either sign (the constraints' values), never read in
            logs: before any trial is feasible, they are all positive and may well span a decade, and in logs
            no draw would ever meet the constraint.
    """

    def __init__(self, cache: ArchCache, objectives: Sequence[Objective], *, prior: str | None,
                 settings: FitSettings, base: str | None = None,
                 device: str = "cpu", seed: int = 0, progress: bool = False,
                 log: Callable[[str], None] = lambda line: None,
                 evidence: EvidenceInputs | None = None, signed: Sequence[str] = ()) -> None:
        self.cache = cache
        self.evidence = evidence
        self.signed = tuple(signed)
        # an objective named like a free label (NB101's published params_m) is the study's own column,
        # decoded under its own tag after the free labels; the prior can still read the free label
        self.objectives = tuple(replace(o, name=o.name + OWN_TAG_SUFFIX) if o.name in FREE_NAMES else o
                                for o in objectives)
        self.objective_names = tuple(o.name for o in self.objectives)
        #: lower the better (a latency, a constraint's value): the prior may read them as sums
        self.costs = tuple(o.name for o in self.objectives if not o.higher_is_better)
        self.prior = prior
        self.settings = settings
        self.base = base
        self.device = device
        self.seed = seed
        self.progress = progress
        self.log = log
        #: refits so far
        self.rounds = 0
        self._base_predictor: Any = None
        self._predictor: Any = None
        self._pool_free: np.ndarray | None = None

    @property
    def predictor(self) -> Any:
        """The latest :class:`~nasrlm.rlm.predictor.RLMPredictor` (``None`` before :meth:`start`)."""
        return self._predictor

    def start(self, pool: Sequence[str]) -> None:
        """Load the base model, or learn a tokenizer on the ``pool`` and pre-train on free labels.

        The pool is the population the proposals come from: the ``"line"`` prior takes its normal
        scores over it, and pre-training reads its architectures first (their texts are needed anyway).
        """
        with model_threads():
            self._start(pool)

    def _start(self, pool: Sequence[str]) -> None:
        from nasrlm.rlm.predictor import RLMPredictor
        from nasrlm.rlm.tokenizers import OnnxTokenizer

        self._pool_free = self.cache.free_labels_of(pool) if self.prior == "line" else None
        if self.base is not None:
            self.log(f"starting from the base model {self.base}")
            self._base_predictor = RLMPredictor.from_base(self.base, self.objectives,
                                                          space=self.cache.space.name)
            self._predictor = copy.deepcopy(self._base_predictor).to(self.device)
            return
        self.log(f"learning the ONNX tokenizer on {len(pool):,} architectures")
        tokenizer = OnnxTokenizer.train(self.cache.texts_of(pool), seed=self.seed)
        s = self.settings
        self._predictor = RLMPredictor.from_scratch(self.objectives, size=None, seed=self.seed,
                                                    tokenizer=tokenizer, **s.model).to(self.device)
        if not s.pretrain_archs:
            return
        # many architectures seen a few times beat a few seen many times (same number of steps)
        ids = list(pool[: s.pretrain_archs])
        if len(ids) < s.pretrain_archs:
            extra = self.cache.space.sample_ids(s.pretrain_archs - len(ids), seed=self.seed)
            ids = self.cache.buildable(list(dict.fromkeys([*ids, *extra])))  # random ones may fail to build
        self.log(f"pre-training on free labels (parameters, MACs) of {len(ids):,} architectures")
        texts = self.cache.texts_of(ids)
        epochs = max(s.pretrain_epochs, math.ceil(2 * s.fit_steps / math.ceil(len(ids) / s.batch_size)))
        self._predictor.fit(texts, self.cache.free_labels_of(ids), FREE_NAMES,
                            TrainConfig(max_epochs=epochs, validation_fraction=0.0, seed=self.seed,
                                        learning_rate=s.pretrain_learning_rate, progress=self.progress))

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the log hook, which is the process's (the sampler gives it again on load)."""
        return {k: v for k, v in vars(self).items() if k != "log"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state, log=lambda line: None)

    def fit(self, arch_ids: Sequence[str], targets: np.ndarray) -> None:
        """Refit on the trials: ``targets`` (len(arch_ids), objectives) in the study's order.

        The free labels come first in the decode order, so the model learns each objective given them.
        Free labels keep the scale they were pre-trained with (without pre-training, none was fitted on
        more than the trials: all are refitted); the objectives get :attr:`FitSettings.headroom`.
        """
        with model_threads():
            self._fit(arch_ids, targets)

    def _fit(self, arch_ids: Sequence[str], targets: np.ndarray) -> None:
        if self._predictor is None:
            raise RuntimeError("start() the surrogate before fitting it")
        if self._base_predictor is not None:  # every refit starts from the base, not from the latest round
            self._predictor = copy.deepcopy(self._base_predictor).to(self.device)
        s = self.settings
        free, graph = self._labels(arch_ids)
        values = np.hstack([np.column_stack(list(free.values())), targets])
        recipe = replace(REFIT, steps=s.fit_steps, learning_rate=s.learning_rate,
                         warmup_fraction=s.warmup_fraction)
        config = recipe.config(len(arch_ids), batch_size=min(s.batch_size, len(arch_ids)),
                               seed=self.seed + self.rounds, progress=self.progress)
        refit = self.objective_names if (s.pretrain_archs or self._base_predictor is not None) else True
        prior: dict[str, Any] = {}
        if self.prior == "line":
            prior = {"prior_from": FREE_NAMES, "prior_reference": self._pool_free, "prior": "line"}
        elif self.prior is not None:
            prior = {"prior_from": FREE_NAMES, "prior_inputs": graph, "prior": self.prior}
        order = (*FREE_NAMES, *self.objective_names)
        self._predictor.fit(self.cache.texts_of(arch_ids), values, order, config,
                            refit_normalizers=refit, headroom=s.headroom, signed=self.signed,
                            costs=self.costs, **prior)
        self.rounds += 1

    def sample(self, arch_ids: Sequence[str], *, num_samples: int, temperature: float, seed: int,
               residual_weight: dict[str, float] | None = None, spread: str = "model") -> np.ndarray:
        """Decoded samples (len(arch_ids), num_samples, objectives), given each one's free labels.

        ``residual_weight``: per objective, the share of the predicted residual kept (``None``: all).
        ``spread``: how far the samples scatter around each median: ``"model"``, as the model decodes
        them; ``"prior"``, as far as the prior errs on trials it did not see
        (``PriorPart.errors``); ``"trees"``, that error scaled per architecture by how much
        the prior's trees disagree on it, relative to their mean disagreement over ``arch_ids``.
        """
        if self._predictor is None:
            raise RuntimeError("the sampler has not trained a model yet")
        if residual_weight is None:
            part = self._predictor.prior_part
            residual_weight = dict.fromkeys(part.objectives if part is not None else (), 1.0)
        given, graph = self._labels(arch_ids)  # describes new ones in one batch
        with model_threads():
            return self._predictor.sample(self.cache.texts_of(arch_ids), self.objective_names, given=given,
                                          features=graph, batch_size=64, seed=seed, temperature=temperature,
                                          residual_weight=residual_weight, num_samples=num_samples,
                                          residual_spread=self._spread(spread, {**given, **graph}),
                                          progress=self.progress)

    def _labels(self, arch_ids: Sequence[str]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The free labels the decoder is given, and what else the prior reads: the graph labels and the
        warm start's evidence (:class:`~nasrlm.search.sampler._warm_start.EvidenceInputs`)."""
        labels = self.cache.labels_of(arch_ids)
        free, graph = self.cache.split(labels)
        if self.evidence is not None:
            graph.update(self.evidence.of(arch_ids, labels))
        return free, graph

    def _spread(self, spread: str, labels: dict[str, np.ndarray]) -> dict[str, Any] | None:
        """``residual_spread`` of :meth:`RLMPredictor.sample` for a ``spread`` of :meth:`sample`."""
        predictor = self._predictor
        if spread == "model" or predictor.prior_part is None:
            return None
        part = predictor.prior_part
        errors = dict(part.errors)
        if spread != "trees" or not hasattr(part.prior, "disagreement"):
            return errors
        x = np.column_stack([labels[name] for name in part.inputs])
        names = part.objectives
        scales = scaled_by_trees(np.array([errors[n] for n in names]), part.prior.disagreement(x))
        return {**errors, **{name: scales[:, j] for j, name in enumerate(names)}}

    def residual_weights(self, arch_ids: Sequence[str], actual: np.ndarray,
                         predicted: np.ndarray) -> dict[str, float] | None:
        """Per objective, the least-squares slope (through 0, clipped to [0, 1]) of the residual that
        came true (``actual`` values) on the residual the model predicted (``predicted`` values), both
        in the current prior's normal scores; ``None`` without a prior."""
        part = self._predictor.prior_part if self._predictor is not None else None
        if part is None:
            return None
        prior = part.prior
        free, graph = self._labels(arch_ids)
        labels = np.column_stack([{**free, **graph}[name] for name in part.inputs])  # the prior's inputs
        came, said = prior.residuals(labels, actual), prior.residuals(labels, predicted)
        return {name: residual_weight(said[:, k], came[:, k])
                for k, name in enumerate(part.objectives)}


class PriorSurrogate:
    """The RLMSampler's prior alone: a feature prior refitted on the trials, no language model.

    What :class:`RLMSurrogate` predicts once the model's residual is weighed down to nothing, at a
    fraction of its cost: nothing is trained or decoded, so a round takes a forest fit (about a second
    on a few hundred trials) instead of a refit and the decoding of every candidate. The ablation that
    tells what the RLM's residual adds to a search (``ProposalSettings(surrogate="prior")``;
    experiments/README.md, "Pareto search").

    Args:
        cache: texts and labels of the space's architectures (shared with the sampler).
        objectives: the study's objectives, in its order.
        prior: a feature prior's kind (:data:`~nasrlm.priors.feature_prior.KINDS`).
        seed: seeds the forests (with the round number) and the samples.
        evidence: a warm start's evidence, read beside the labels (as :class:`RLMSurrogate` reads it).
        signed: names of ``objectives`` that may take either sign (as :class:`RLMSurrogate` reads them).
    """

    def __init__(self, cache: ArchCache, objectives: Sequence[Objective], *, prior: str,
                 seed: int = 0, evidence: EvidenceInputs | None = None, signed: Sequence[str] = ()) -> None:
        if prior not in KINDS:
            raise ValueError(f"the prior surrogate needs a feature prior ({', '.join(KINDS)}), got {prior!r}")
        self.cache = cache
        self.objectives = tuple(objectives)
        self.prior = prior
        self.seed = seed
        self.evidence = evidence
        self.signed = tuple(signed)
        #: refits so far
        self.rounds = 0
        self._prior: FeaturePrior | None = None
        self._errors = np.zeros(len(self.objectives))

    @property
    def predictor(self) -> None:
        """No model: ``None`` (the sampler's ``predictor`` then is too)."""
        return None

    def start(self, pool: Sequence[str]) -> None:
        """Nothing to load or pre-train."""

    def fit(self, arch_ids: Sequence[str], targets: np.ndarray) -> None:
        """Refit the prior on the trials (``targets`` in the study's order) and note its out-of-bag error."""
        x = self._inputs(arch_ids)
        names = [*self.cache.columns, *(self.evidence.names if self.evidence is not None else ())]
        self._prior, held_out = FeaturePrior.fit(x, targets, kind=self.prior, seed=self.seed + self.rounds,
                                                 signed=[o.name in self.signed for o in self.objectives],
                                                 costs=[not o.higher_is_better for o in self.objectives],
                                                 **InputRoles.of(names).keywords())
        # a constraint a trial did not set is NaN there: its column's error is that of the others
        self._errors = np.sqrt(np.nanmean((self._prior.scores(targets) - held_out) ** 2, axis=0))
        self.rounds += 1

    def sample(self, arch_ids: Sequence[str], *, num_samples: int, temperature: float, seed: int,
               residual_weight: dict[str, float] | None = None, spread: str = "prior") -> np.ndarray:
        """Samples (len(arch_ids), num_samples, objectives): random normal draws (in normal scores)
        around the prior's mean, as wide as its out-of-bag error (``spread="trees"``: scaled per
        architecture by its trees' disagreement). ``temperature`` and ``residual_weight`` concern a
        model's residual: unused."""
        if self._prior is None:
            raise RuntimeError("the sampler has not fitted its prior yet")
        x = self._inputs(arch_ids)
        scale = np.broadcast_to(self._errors, (len(x), len(self.objectives)))
        if spread == "trees":
            scale = scaled_by_trees(self._errors, self._prior.disagreement(x))
        # random draws, not stratified quantiles: with the prior's mean alone the stratified samples of
        # every candidate sit alike around it and the proposals stop exploring (experiments/README.md)
        scatter = np.random.default_rng(seed).normal(size=(len(x), num_samples, len(self.objectives)))
        return self._prior.values(x, scatter * scale[:, None, :])

    def _inputs(self, arch_ids: Sequence[str]) -> np.ndarray:
        """The prior's inputs: the labels, then any evidence."""
        labels = self.cache.labels_of(arch_ids)
        if self.evidence is None or not self.evidence.names:
            return labels
        return np.column_stack([labels, *self.evidence.of(arch_ids, labels).values()])

    def residual_weights(self, arch_ids: Sequence[str], actual: np.ndarray,
                         predicted: np.ndarray) -> dict[str, float] | None:
        """No residual to weigh: ``None``."""
        return None
