"""Equivalent architectures as extra training rows."""

from __future__ import annotations

import numpy as np
import pytest

from nasrlm.rlm.augment import equivalent_rows
from search_spaces import NasBench201

DEAD_BRANCH = "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"  # one of 341 equivalent cells
ALL_LIVE = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


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
