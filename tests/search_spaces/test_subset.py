from __future__ import annotations

import numpy as np
import optuna
import pytest

from search_spaces import NasBench201, SubsetSpace
from search_spaces.testing import SearchSpaceTests

BASE = NasBench201()
IDS = BASE.sample_ids(40, seed=0)


class TestSubsetSpace(SearchSpaceTests):
    space = SubsetSpace(BASE, IDS)


def test_draws_only_listed_architectures_with_the_base_ids_and_texts() -> None:
    subset = SubsetSpace(BASE, IDS + IDS[:5])  # repeats collapse
    assert subset.size == 40 and subset.name == "nb201"
    assert {subset.arch_id(a) for a in subset.enumerate()} == set(IDS)
    assert set(subset.sample_ids(100, seed=1)) <= set(IDS)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(20):
        trial = study.ask()
        assert subset.arch_id(subset.suggest(trial)) in IDS
        study.tell(trial, 0.0)
    assert subset.to_text(subset.parse(IDS[0])) == BASE.to_text(BASE.parse(IDS[0]))


def test_rejects_architectures_outside_it() -> None:
    outside = next(i for i in BASE.sample_ids(100, seed=9) if i not in IDS)
    with pytest.raises(ValueError, match="not among this subset's 40"):
        SubsetSpace(BASE, IDS).parse(outside)
    with pytest.raises(ValueError, match="at least one"):
        SubsetSpace(BASE, [])
    assert SubsetSpace(BASE, IDS).sample(np.random.default_rng(0)) is not None
