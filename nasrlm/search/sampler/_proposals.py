"""How the RLMSampler's proposal rounds predict and pick: :class:`ProposalSettings`, checked as it is made.

Beside :class:`~nasrlm.search.FitSettings` (how the model trains) and
:class:`~nasrlm.search.CandidateSettings` (what each round scores), the third settings object an
``RLMSampler`` takes; together they are its recipe, each field set one way. Measurements behind the
defaults: experiments/README.md, "Pareto search".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nasrlm.priors.feature_prior import PRIOR_KINDS
from nasrlm.search.sampler._acquisition import MIN_FEASIBLE_SHARE

#: ``ProposalSettings.spread`` choices.
SPREADS = ("auto", "prior", "trees", "model")
#: ``ProposalSettings.surrogate`` choices.
SURROGATES = ("rlm", "prior")
#: ``ProposalSettings.refine``'s default: the completed-trial ranges in which the front is refined.
DEFAULT_REFINE = ((50, 100), (150, None))


@dataclass(frozen=True)
class ProposalSettings:
    """What predicts the candidates of a proposal round, and how many of them are proposed.

    A bad value raises ``ValueError`` naming the field, alone or with another (``spread="prior"`` needs a
    prior).
    """

    #: candidates proposed from one trained model for each worker of the study (greedily, each one's
    #: predicted median added to the front before picking the next); more means fewer, cheaper refits
    proposals_per_fit: int = 5
    #: ranges ``(start, stop)`` of completed trials, ``start`` included and ``stop`` not (``None``: to the
    #: end), in which a round scores only the mutants of the front found (while any is new): the search
    #: refines its front instead of looking further. The default refines from 50 to 100 and from 150 on;
    #: refining from 50 to the end found less at 300 (experiments/README.md, "Pareto search"). ``None``
    #: or ``()``: never. Any sequence of pairs (a JSON list) is kept as tuples.
    refine: tuple[tuple[int, int | None], ...] = DEFAULT_REFINE
    #: decoded samples per candidate for the expected improvement
    num_samples: int = 16
    #: softmax temperature of those samples (above 1 widens them)
    temperature: float = 1.0
    #: how far each candidate's samples scatter around its median: ``"prior"``, normally, as far as the
    #: prior erred (in normal scores) on the trials it was not fitted on (out of bag): an uncertainty
    #: measured on architectures it did not see, which a model refitted on a few dozen trials,
    #: overconfident, does not have; ``"trees"``, that error scaled per candidate by how much the prior
    #: forest's trees disagree on it (relative to their mean disagreement over the candidates scored),
    #: so that candidates unlike the trials scatter wider; ``"model"``, as the model decodes them;
    #: ``"auto"`` (the default): with a prior, ``"trees"`` for three objectives or more and ``"prior"``
    #: for fewer (what searched best on each, experiments/README.md), else ``"model"``
    spread: str = "auto"
    #: the prior the model learns the residual of (``RLMPredictor.fit``'s ``prior``): ``"line"``, a
    #: straight line (in normal scores) through the free label that best explains the trials
    #: (:mod:`nasrlm.priors.prior`); ``"forest"``, ``"trend-forest"``, ``"ridge"`` or ``"auto"``, a model
    #: of the free and graph labels (:mod:`nasrlm.priors.feature_prior`; each candidate's graph labels
    #: are then computed too); ``None``: the model learns each objective whole. ``"trend-forest"``
    #: extrapolates past the trials, so it can expect a candidate to extend the front, which a plain
    #: forest never does
    prior: str | None = "trend-forest"
    #: what predicts the candidates: ``"rlm"``, the regression language model learning the prior's
    #: residual (:class:`~nasrlm.search.RLMSurrogate`); ``"prior"``, the prior alone
    #: (:class:`~nasrlm.search.PriorSurrogate`: no model is trained or decoded, so the sampler's
    #: ``base``, ``weigh_residual`` and the :class:`~nasrlm.search.FitSettings` do not apply), the
    #: ablation that tells what the model adds, at a fraction of its cost
    surrogate: str = "rlm"
    #: with a feature prior and ``surrogate="rlm"``, once this many trials are complete the model is no
    #: longer refitted and the prior alone predicts, as with ``surrogate="prior"``: the model's residual
    #: helps most over the first hundred trials, the prior alone searched as well beyond them at a
    #: fraction of the cost (experiments/README.md, "Pareto search"). ``None``: the model throughout
    prior_alone_after: int | None = 100
    #: with the prior, scale the model's predicted residual (its median; the spread stays) by how well
    #: the model predicted its own evaluated proposals, in [0, 1] (``RLMSampler.residual_weights``)
    weigh_residual: bool = True
    #: under constraints, the share of a candidate's draws that must meet them for it to compete on its
    #: expected improvement while any candidate reaches it (:func:`~nasrlm.search.sampler._acquisition.
    #: greedy_ehvi`), in (0, 1]
    min_feasible_share: float = MIN_FEASIBLE_SHARE

    def __post_init__(self) -> None:
        object.__setattr__(self, "refine", refine_ranges(self.refine))
        for name in ("proposals_per_fit", "num_samples"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 < self.min_feasible_share <= 1:
            raise ValueError(f"min_feasible_share must be in (0, 1], got {self.min_feasible_share}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if self.prior is not None and self.prior not in PRIOR_KINDS:
            raise ValueError(f"prior {self.prior!r}: expected None or one of {', '.join(PRIOR_KINDS)}")
        if self.spread not in SPREADS:
            raise ValueError(f"spread {self.spread!r}: expected one of {', '.join(SPREADS)}")
        if self.spread in ("prior", "trees") and self.prior is None:
            raise ValueError(f"spread={self.spread!r} needs a prior (prior=None given)")
        if self.surrogate not in SURROGATES:
            raise ValueError(f"surrogate {self.surrogate!r}: expected one of {', '.join(SURROGATES)}")
        if self.surrogate == "prior" and self.prior in (None, "line"):
            raise ValueError(f"surrogate='prior' needs a feature prior (trend-forest, forest, ridge, auto), "
                             f"got prior={self.prior!r}")
        if self.prior_alone_after is not None and self.prior_alone_after < 1:
            raise ValueError(f"prior_alone_after must be positive or None, got {self.prior_alone_after}")
        if self.surrogate == "prior" and self.spread == "model":
            raise ValueError("surrogate='prior' has no model: spread='model' does not apply")

    def spread_for(self, num_objectives: int) -> str:
        """The spread the samples get in a study of ``num_objectives`` (``spread="auto"`` decided)."""
        if self.spread != "auto":
            return self.spread
        if self.prior is None:
            return "model"
        return "trees" if num_objectives >= 3 else "prior"


def refine_ranges(refine: Sequence[Sequence[int | None]] | None) -> tuple[tuple[int, int | None], ...]:
    """``refine`` checked and as tuples (a JSON list of pairs from the command line too)."""
    ranges = []
    for pair in refine or ():
        start, stop = pair if isinstance(pair, Sequence) and len(pair) == 2 else (None, None)
        if not (isinstance(start, int) and start >= 1
                and (stop is None or isinstance(stop, int) and stop > start)):
            raise ValueError(f"refine: each range is a pair (start, stop) with 1 <= start < stop, or stop "
                             f"None, got {pair!r}")
        ranges.append((start, stop))
    return tuple(ranges)
