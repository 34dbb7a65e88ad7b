"""Equivalent architectures: extra training rows, and the texts an accuracy is read through."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from nasrlm.data import Objective
from nasrlm.priors.transfer import ACCURACY_RANK
from nasrlm.rlm.augment import equivalent_readings, equivalent_rows, shared_by_equivalents
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.tokenizers import OnnxTokenizer
from nasrlm.rlm.tuning import sample_archs
from search_spaces import NasBench201

DEAD_BRANCH = "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"  # one of 341 equivalent cells
ALL_LIVE = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


def goal(name: str, unit: str) -> Objective:
    return Objective(name, unit, "", "a test", True)


def test_equivalents_carry_only_the_named_objectives() -> None:
    space = NasBench201()
    values = np.array([[70.0, 3.5], [93.0, 9.0]])
    rows = equivalent_rows(space, [DEAD_BRANCH, ALL_LIVE], values, ("acc", "lat"), {"acc"}, copies=3, seed=0)
    assert len(rows.arch_ids) == 3 and len(set(rows.arch_ids)) == 3
    assert list(rows.derived_from) == [0, 0, 0]
    np.testing.assert_array_equal(rows.values[:, 0], 70.0)
    assert np.isnan(rows.values[:, 1]).all()
    equivalents = {space.arch_id(a) for a in space.equivalents(space.parse(DEAD_BRANCH))}
    assert set(rows.arch_ids) <= equivalents
    again = equivalent_rows(space, [DEAD_BRANCH, ALL_LIVE], values, ("acc", "lat"), {"acc"}, copies=3, seed=0)
    assert again.arch_ids == rows.arch_ids
    ids, joined, derived_from = rows.joined([DEAD_BRANCH, ALL_LIVE], values)
    assert ids == [DEAD_BRANCH, ALL_LIVE, *rows.arch_ids] and list(derived_from) == [-1, -1, 0, 0, 0]
    np.testing.assert_array_equal(joined[:2], values)


def test_labelled_and_excluded_architectures_are_never_drawn() -> None:
    space = NasBench201()
    equivalents = [space.arch_id(a) for a in space.equivalents(space.parse(DEAD_BRANCH))]
    labelled, excluded = [DEAD_BRANCH, equivalents[0]], set(equivalents[1:100])
    rows = equivalent_rows(space, labelled, np.array([[70.0], [70.5]]), ("acc",), {"acc"}, copies=200,
                           exclude=excluded)
    assert len(equivalents) == 340 and list(np.bincount(rows.derived_from)) == [200, 40]  # 240, once each
    assert not set(rows.arch_ids) & (set(labelled) | excluded)


def test_rows_without_a_carried_label_and_bad_arguments() -> None:
    space = NasBench201()
    rows = equivalent_rows(space, [DEAD_BRANCH], np.array([[np.nan, 3.0]]), ("acc", "lat"), {"acc"})
    assert rows.arch_ids == [] and rows.values.shape == (0, 2)
    with pytest.raises(ValueError, match="'top1'"):
        equivalent_rows(space, [DEAD_BRANCH], np.array([[70.0]]), ("acc",), {"top1"})
    with pytest.raises(ValueError, match="copies"):
        equivalent_rows(space, [DEAD_BRANCH], np.array([[70.0]]), ("acc",), {"acc"}, copies=-1)


def test_equivalent_architectures_are_read_through_the_same_texts_of_their_class() -> None:
    space = NasBench201()
    equivalents = [space.arch_id(a) for a in space.equivalents(space.parse(DEAD_BRANCH))]
    asked = [DEAD_BRANCH, ALL_LIVE, equivalents[7], DEAD_BRANCH]
    readings = equivalent_readings(space, asked, 4, seed=3)
    read = [[readings.readers[r] for r in group] for group in readings.groups]
    assert len(read[0]) == 4 and read[0] == read[2] == read[3]  # one class, one reading, whoever asks
    assert set(read[0]) <= {DEAD_BRANCH, *equivalents} and read[1] == [ALL_LIVE]  # a class of one: itself
    assert len(readings.readers) == 5 and not readings.trivial
    # the reading of a class does not depend on what else is asked, nor on which member asks
    alone = equivalent_readings(space, [equivalents[100]], 4, seed=3)
    assert [alone.readers[r] for r in alone.groups[0]] == read[0]
    assert equivalent_readings(space, asked, 4, seed=4).readers != readings.readers
    own = equivalent_readings(space, asked, 1)
    assert own.trivial and [own.readers[g[0]] for g in own.groups] == asked


def test_accuracies_are_shared_by_equivalents_latencies_are_not() -> None:
    assert shared_by_equivalents(goal("acc", "%")) and shared_by_equivalents(ACCURACY_RANK)
    assert not shared_by_equivalents(goal("pixel3", "ms"))
    assert not shared_by_equivalents(goal("params_m", "M"))


def stub_predictor(monkeypatch: pytest.MonkeyPatch, space: NasBench201, ids: list[str]
                   ) -> tuple[RLMPredictor, list[tuple[int, int]]]:
    """A predictor whose samples of a text are its identity (:func:`identity_of`) plus 0.00, 0.01, ...
    (the accuracy) and their negatives (the latency), and the (texts, samples) of every call."""
    texts = [space.to_text(space.parse(i)) for i in ids]
    predictor = RLMPredictor.from_scratch([goal("acc", "%"), goal("lat", "ms")], size="tiny",
                                          tokenizer=OnnxTokenizer.train(texts, seed=0), d_model=16, d_ff=32)
    calls: list[tuple[int, int]] = []

    def sample(batch: list[str], objectives: tuple[str, ...], *, num_samples: int, **options: object
               ) -> np.ndarray:
        calls.append((len(batch), num_samples))
        ids = np.array([zlib.crc32(t.encode()) % 100_000 for t in batch], float)
        draws = ids[:, None, None] + np.arange(num_samples)[None, :, None] / 100
        return np.concatenate([draws, -draws], axis=2)[..., [("acc", "lat").index(o) for o in objectives]]

    monkeypatch.setattr(predictor, "sample", sample)
    return predictor, calls


def identity_of(space: NasBench201, arch_id: str) -> int:
    return zlib.crc32(space.to_text(space.parse(arch_id)).encode()) % 100_000


def test_sampling_by_id_pools_an_accuracy_over_the_class_and_reads_latency_from_its_own_text(monkeypatch
                                                                                              ) -> None:
    space = NasBench201()
    equivalent = space.arch_id(space.equivalents(space.parse(DEAD_BRANCH))[0])
    asked = [DEAD_BRANCH, ALL_LIVE, equivalent]
    predictor, calls = stub_predictor(monkeypatch, space, asked)
    draws = sample_archs(predictor, space, asked, ["acc", "lat"], equivalents=4, num_samples=8)
    assert draws.shape == (3, 8, 2)
    np.testing.assert_array_equal(draws[0, :, 0], draws[2, :, 0])  # equivalents: one accuracy
    readings = equivalent_readings(space, asked, 4)
    read = [identity_of(space, readings.readers[r]) + k / 100 for r in readings.groups[0] for k in (0, 1)]
    # four texts, two samples each, each text's spread around the class's median
    np.testing.assert_allclose(draws[0, :, 0], np.median(read) + np.tile([-0.005, 0.005], 4))
    for row, arch_id in enumerate(asked):  # the latency of each is its own text's
        np.testing.assert_allclose(draws[row, :, 1], -(identity_of(space, arch_id) + np.arange(8) / 100))
    np.testing.assert_allclose(draws[1, :, 0], identity_of(space, ALL_LIVE) + np.arange(8) / 100)  # alone
    assert calls == [(3, 8), (4, 2)]  # their own texts, then the class's four readers (ALL_LIVE: its own)
    calls.clear()
    own = sample_archs(predictor, space, asked, ["acc", "lat"], equivalents=1, num_samples=8)
    assert calls == [(3, 8)]
    np.testing.assert_allclose(own[2, :, 0], identity_of(space, equivalent) + np.arange(8) / 100)


def test_an_accuracy_alone_divides_the_samples_unevenly_and_keeps_two_a_text(monkeypatch) -> None:
    space = NasBench201()
    asked = [DEAD_BRANCH, ALL_LIVE]
    predictor, calls = stub_predictor(monkeypatch, space, asked)
    draws = sample_archs(predictor, space, asked, ["acc"], equivalents=4, num_samples=9)
    assert draws.shape == (2, 9, 1) and calls == [(3, 2), (1, 3), (1, 9)]  # 3 + 2 + 2 + 2; ALL_LIVE's 9
    readings = equivalent_readings(space, asked, 4)
    raw = [identity_of(space, readings.readers[r]) + j / 100
           for r, n in zip(readings.groups[0], (3, 2, 2, 2), strict=True) for j in range(n)]
    offsets = [-0.01, 0, 0.01, *[-0.005, 0.005] * 3]  # each text's spread around its own median
    np.testing.assert_allclose(draws[0, :, 0], np.median(raw) + np.array(offsets))
    calls.clear()
    few = sample_archs(predictor, space, asked, ["acc"], equivalents=4, num_samples=4)
    assert calls == [(2, 2), (1, 4)]  # two texts of two samples, never one sample a text (no spread)
    readings = equivalent_readings(space, asked, 2)
    raw = [identity_of(space, readings.readers[r]) + j / 100 for r in readings.groups[0] for j in (0, 1)]
    np.testing.assert_allclose(few[0, :, 0], np.median(raw) + np.array([-0.005, 0.005] * 2))


def test_sampling_by_id_refuses_what_it_computes_itself_and_unknown_objectives(monkeypatch) -> None:
    space = NasBench201()
    predictor, _ = stub_predictor(monkeypatch, space, [DEAD_BRANCH])
    with pytest.raises(ValueError, match="given"):
        sample_archs(predictor, space, [DEAD_BRANCH], ["acc"], given={"params_m": np.ones(1)})
    with pytest.raises(ValueError, match="'top1'"):
        sample_archs(predictor, space, [DEAD_BRANCH], ["top1"])
