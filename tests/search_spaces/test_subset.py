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


class TestSubsetSpaceByIndex(SearchSpaceTests):
    space = SubsetSpace(BASE, IDS, draw_by="index")


class _NoParams(NasBench201):
    def params_of(self, arch):  # type: ignore[no-untyped-def]
        raise NotImplementedError("no inverse here")


def _edit(arch_id: str, changes: dict[int, str]) -> str:
    """``arch_id`` with the ops of the given edges (in ``suggest``'s order) replaced."""
    params = BASE.params_of(BASE.parse(arch_id))
    names = list(params)
    return BASE.arch_id(BASE.suggest(optuna.trial.FixedTrial(
        {**params, **{names[k]: op for k, op in changes.items()}})))


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


def test_suggest_snaps_the_base_parameters_to_the_nearest_listed_architecture() -> None:
    near = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
    far = _edit(near, {0: "none", 1: "none", 2: "none", 3: "none"})
    subset = SubsetSpace(BASE, [near, far])
    assert subset.draw_by == "params"
    one_off = _edit(near, {5: "skip_connect"})  # one parameter from near, five from far
    assert subset.arch_id(subset.nearest(BASE.parse(one_off))) == near
    fixed = optuna.trial.FixedTrial(BASE.params_of(BASE.parse(_edit(far, {4: "avg_pool_3x3"}))))
    assert subset.arch_id(subset.suggest(fixed)) == far
    assert subset.arch_id(subset.nearest(BASE.parse(far))) == far  # a listed one is itself


def test_ties_go_to_one_of_the_tied_architectures_chosen_by_the_draw() -> None:
    convs = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
    far = _edit(convs, {0: "avg_pool_3x3", 1: "avg_pool_3x3", 2: "avg_pool_3x3", 3: "avg_pool_3x3"})
    picked_first = set()
    for op in ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"):
        drawn = _edit(convs, {5: op})
        tied = [_edit(drawn, {0: "none"}), _edit(drawn, {1: "none"})]  # one parameter away, both
        subset = SubsetSpace(BASE, [*tied, far])
        chosen = subset.arch_id(subset.nearest(BASE.parse(drawn)))
        assert chosen in tied and subset.arch_id(subset.nearest(BASE.parse(drawn))) == chosen
        picked_first.add(chosen == tied[0])
    assert picked_first == {True, False}, "ties always went to the same position"


def test_without_params_of_it_draws_a_row_index() -> None:
    base = _NoParams()
    assert SubsetSpace(base, IDS).draw_by == "index"
    trial = optuna.trial.FixedTrial({"arch_index": 3})
    assert SubsetSpace(base, IDS).arch_id(SubsetSpace(base, IDS).suggest(trial)) == IDS[3]
    with pytest.raises(ValueError, match="needs nb201.params_of"):
        SubsetSpace(base, IDS, draw_by="params")
    with pytest.raises(ValueError, match="draw_by must be"):
        SubsetSpace(BASE, IDS, draw_by="rows")  # type: ignore[arg-type]
