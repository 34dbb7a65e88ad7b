"""A pre-trained base's language model made ready to fine-tune on one search space's objectives: what
:meth:`RLMPredictor.from_base <nasrlm.rlm.predictor.RLMPredictor.from_base>` builds its predictor of.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from nasrlm.data import Objective
from nasrlm.priors.transfer import ACCURACY_RANK, TAG_SEPARATOR, is_accuracy
from nasrlm.rlm.language_model import LanguageModel


def for_space(base: LanguageModel, objectives: Sequence[Objective], space: str) -> LanguageModel:
    """``base`` with its tags of ``space`` (``nb201:pixel3``) renamed to their plain names (``pixel3``) and
    a new tag for each new objective: a new accuracy starts as the base's accuracy rank."""
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
    return LanguageModel(base.tokenizer, model, list(metadata.values()), normalizers)
