"""``LanguageModel``: the estimator that reads ONNX text and writes numbers, digit by digit.

It is the tokenizer, the regression model (:class:`~nasrlm.rlm.model.RegressionLM`), one label normaliser per
objective and, after a fit with ``TrainConfig.members`` > 1, the weights of its other decoders
(:mod:`nasrlm.rlm._members`). It knows nothing of priors or calibration:
:class:`~nasrlm.rlm.predictor.RLMPredictor` composes it with them.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.rlm._members import Weights, pooled, train_members, wearing
from nasrlm.rlm.inference import sample_scaled
from nasrlm.rlm.model import RegressionLM
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.recipes import TrainConfig
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.training import TrainReport, derived_sources, pad_batch


class TextTooLongError(NasrlmError, ValueError):
    """An architecture's text has more tokens than the model reads (``max_input_tokens``): refused, never
    truncated. One line on the command line (large ImageNet cells under the shipped base's tokenizer)."""


class LanguageModel:
    """Tokenizer + regression model + per-objective normalisers: text in, samples in the objectives' units."""

    def __init__(self, tokenizer: OnnxTokenizer, model: RegressionLM, objectives: Sequence[Objective],
                 normalizers: Mapping[str, Normalizer] | None = None, decode_order: Sequence[str] = (),
                 reads_first: Sequence[str] = (), members: Sequence[Weights] = ()) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.objectives = {o.name: o for o in objectives}
        missing = [o for o in model.config.objectives if o not in self.objectives]
        if missing:
            raise ValueError(f"model has tags for objectives without metadata: {missing}")
        self.normalizers = dict(normalizers or {})
        #: the objectives of the latest :meth:`fit`, in the order it decoded them
        self.decode_order = tuple(decode_order)
        #: labels :meth:`sample` first decodes greedily from the text itself, then conditions its samples on,
        #: never reporting them (a fit's ``reads``; a zero-shot base's free labels)
        self.reads_first = tuple(reads_first)
        #: the latest fit's other decoders, when it trained several (``TrainConfig.members``): their weights;
        #: :meth:`sample` pools their samples with the model's own
        self.members = list(members)

    def clone(self) -> LanguageModel:
        """A copy with weights of its own, to train apart from this one (the tokenizer is shared)."""
        return LanguageModel(self.tokenizer, copy.deepcopy(self.model), list(self.objectives.values()),
                             self.normalizers, self.decode_order, self.reads_first, self.members)

    def first_member(self) -> LanguageModel:
        """This model without its other decoders (:attr:`members`): the same weights, not a copy."""
        return LanguageModel(self.tokenizer, self.model, list(self.objectives.values()), self.normalizers,
                             self.decode_order, self.reads_first)

    @property
    def trained_objectives(self) -> tuple[str, ...]:
        """Objectives with a fitted normaliser, in the model's tag order."""
        return tuple(o for o in self.model.config.objectives if o in self.normalizers)

    @property
    def device(self) -> torch.device:
        """Where the model's weights are."""
        return next(self.model.parameters()).device

    def encode_texts(self, texts: Sequence[str]) -> list[list[int]]:
        ids = self.tokenizer.encode_batch(list(texts))
        limit = self.model.config.max_input_tokens
        too_long = [len(s) for s in ids if len(s) > limit]
        if too_long:
            raise TextTooLongError(f"{len(too_long)} text(s) exceed max_input_tokens={limit} "
                                   f"(longest {max(too_long)} tokens); raise it in the model config")
        return ids

    def targets(self, values: np.ndarray, objectives: tuple[str, ...]) -> np.ndarray:
        """The digit tokens of ``values`` (n, len(objectives)) under their normalisers; NaN: -1, unknown."""
        numbers = self.model.vocab.numbers
        out = np.full((len(values), len(objectives), numbers.length), -1, dtype=np.int64)
        for k, name in enumerate(objectives):
            known = ~np.isnan(values[:, k])
            scaled = self.normalizers[name].forward(values[known, k])
            out[known, k] = numbers.encode_many(scaled)
        return out

    def check(self, objectives: tuple[str, ...], reads: tuple[str, ...]) -> None:
        """What :meth:`fit` refuses, before anything is done."""
        unknown = [o for o in objectives if o not in self.objectives]
        if unknown:
            raise ValueError(f"objective(s) {unknown} are not among this model's {list(self.objectives)}")
        unread = [o for o in reads if o not in self.normalizers or o in objectives]
        if unread:
            raise ValueError(f"reads {unread}: a label read first must be one the model already decodes "
                             f"({list(self.trained_objectives)}), and not one the fit trains")

    def fit(self, texts: Sequence[str], values: np.ndarray, objectives: tuple[str, ...], config: TrainConfig,
            *, refit_normalizers: bool | Collection[str] = True, headroom: float = 0.0,
            derived_from: Sequence[int] | None = None, reads: tuple[str, ...] = (),
            signed: Collection[str] = ()) -> tuple[TrainReport, np.ndarray]:
        """Train on ``values`` (n, len(objectives); NaN = unknown), decoding ``reads`` then ``objectives``:
        the report and every row some member held out. The normalisers of ``refit_normalizers`` (all, none or
        those named; an objective without one always gets one) are fitted on the original rows first; the
        ``reads`` are the model's own greedy reading of them before the fit, their normalisers kept. Those of
        ``signed`` objectives (either sign: a constraint's value) are never taken in logs."""
        self.check(objectives, reads)
        original = derived_sources(derived_from, len(texts)) < 0
        reading = self.read(texts, reads) if reads else None
        for k, name in enumerate(objectives):
            refit = refit_normalizers if isinstance(refit_normalizers, bool) else name in refit_normalizers
            if refit or name not in self.normalizers:
                self.normalizers[name] = Normalizer.fit(values[original, k], headroom=headroom,
                                                        log=False if name in signed else None)
        targets = self.targets(values, objectives)
        if reading is not None:
            targets = np.concatenate([self.targets(reading, reads), targets], axis=1)
        self.members = []  # an earlier fit's, if any: the weights they differ in are trained again
        report, self.members, held_out = train_members(self.model, self.encode_texts(texts), targets,
                                                       (*reads, *objectives), config,
                                                       derived_from=derived_from)
        self.decode_order, self.reads_first = objectives, reads
        return report, held_out

    def sample(self, texts: Sequence[str], objectives: tuple[str, ...], *, num_samples: int = 64,
               batch_size: int = 16, temperature: float = 1.0, seed: int = 0, progress: bool = False,
               given: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """Samples of ``objectives`` (len(texts), num_samples, len(objectives)) in their units, each text's
        conditioned on the values ``given`` for it, and on :attr:`reads_first` that ``given`` lacks, read
        greedily first (one that ``objectives`` asks for is sampled instead, still before the others)."""
        given = given or {}
        missing = [o for o in (*given, *objectives) if o not in self.normalizers]
        if missing:
            raise ValueError(f"objective(s) {missing} were never trained; trained: {self.trained_objectives}")
        prefix = None
        if given:
            known = np.stack([np.asarray(v, dtype=np.float64).reshape(len(texts)) for v in given.values()], 1)
            if not np.isfinite(known).all():
                raise ValueError("given values must all be known (finite)")
            prefix = (tuple(given), torch.as_tensor(self.targets(known, tuple(given))))
        reads = tuple(o for o in self.reads_first if o not in given and o not in objectives)
        first = tuple(o for o in self.reads_first if o in objectives and o not in given)
        order = (*first, *(o for o in objectives if o not in first))
        generator = torch.Generator(device=self.device).manual_seed(seed)
        decoded = self.decode(texts, order, num_samples, batch_size=batch_size, temperature=temperature,
                              generator=generator, progress=progress, reads=reads, given=prefix)
        return decoded[..., [order.index(name) for name in objectives]]

    def read(self, texts: Sequence[str], labels: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """The model's greedy reading of ``labels`` for every text, (len(texts), len(labels)) in their
        units: the most likely digit at every step, decoded in the order given from the text alone (no
        label of :attr:`reads_first` before them, no prior added, no spread)."""
        return self.decode(texts, tuple(labels), 1, batch_size=batch_size, temperature=0.0)[:, 0]

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

    def decode(self, texts: Sequence[str], objectives: tuple[str, ...], num_samples: int, *,
               batch_size: int, temperature: float, generator: torch.Generator | None = None,
               progress: bool = False, given: tuple[tuple[str, ...], torch.Tensor] | None = None,
               reads: tuple[str, ...] = ()) -> np.ndarray:
        """Samples of ``objectives`` as the decoder writes them, (len(texts), num_samples, len(objectives)) in
        their units, batch by batch, the members' pooled: ``given`` (names, digit ids of every text) fed
        first, then ``reads`` read (:func:`~nasrlm.rlm.inference.sample_digits`)."""
        device = self.device
        ids = self.encode_texts(texts)
        out = np.empty((len(texts), num_samples, len(objectives)))
        members = pooled([None, *self.members], num_samples)
        starts = range(0, len(texts), batch_size)
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
