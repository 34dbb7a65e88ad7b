"""A pre-trained base model's pieces made ready to fine-tune on one search space's objectives: what
:meth:`RLMPredictor.from_base <nasrlm.rlm.predictor.RLMPredictor.from_base>` builds its predictor of,
and where the tag of an objective the base never saw starts once its first labels are known.

This module does not import the predictor's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy import stats

from nasrlm.data import Objective
from nasrlm.free_labels import FREE_OBJECTIVES
from nasrlm.priors.transfer import ACCURACY_RANK, TAG_SEPARATOR, is_accuracy
from nasrlm.rlm.inference import sample_scaled
from nasrlm.rlm.model import RegressionLM
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.training import pad_batch

if TYPE_CHECKING:
    from nasrlm.rlm.predictor import RLMPredictor


def for_space(base: RLMPredictor, objectives: Sequence[Objective], space: str
              ) -> tuple[RegressionLM, list[Objective], dict[str, Normalizer]]:
    """The model, objectives' metadata and normalisers of ``base`` with its tags of ``space``
    (``nb201:pixel3``) renamed to their plain names (``pixel3``) and a new tag for each new objective."""
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
    return model, list(metadata.values()), normalizers


#: Labelled rows at most that choose where a new tag starts (the first ones with a value).
START_ROWS = 64


def start_like_best(predictor: RLMPredictor, name: str, texts: Sequence[str], values: np.ndarray
                    ) -> str | None:
    """Start the tag of ``name``, an objective ``predictor`` was never trained on, as the trained column
    of its space (or the cross-space accuracy rank, or a free label) whose greedy decoding ranks the
    labelled ``texts`` most like their ``values`` (Spearman, NaN = unknown; at most :data:`START_ROWS`
    of them); the name of that column, or ``None`` (the tag keeps its start) where there are fewer than
    three labels or no column ranks them alike.

    Each column is decoded alone, as the new tag will be at its first step. A new device's latency
    then starts as the seen device most like it, a new accuracy as whichever column ranks it best,
    instead of as an average tag: with 16-20 labels, where a fine-tune cannot go far, the start carries
    much of the prediction (experiments/README.md, "Who carries the prediction").
    """
    free = [o.name for o in FREE_OBJECTIVES]
    candidates = [c for c in (*predictor.space_columns(), ACCURACY_RANK.name, *free)
                  if c != name and c in predictor.normalizers]
    known = np.flatnonzero(np.isfinite(values))[:START_ROWS]
    if not candidates or len(known) < 3:
        return None
    model, device = predictor.model.eval(), predictor.device
    input_ids, mask = pad_batch(predictor.encode_texts([texts[i] for i in known]), model.config.text_pad_id)
    input_ids, mask = input_ids.to(device), mask.to(device)
    with torch.no_grad():
        memory = model.encode(input_ids, mask)
    rho = np.array([stats.spearmanr(sample_scaled(model, input_ids, mask, (c,), 1, temperature=0.0,
                                                  memory=memory)[:, 0, 0], values[known]).statistic
                    for c in candidates])
    if not (rho > 0).any():  # NaN compares False: no column ranks the labels even slightly alike
        return None
    best = candidates[int(np.nanargmax(rho))]
    tags, weight = model.vocab.tags, model.t5.shared.weight
    with torch.no_grad():
        weight[tags[name]] = weight[tags[best]]
    return best
