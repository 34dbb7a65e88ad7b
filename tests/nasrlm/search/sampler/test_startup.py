"""Start-up trials from the transfer forest: one per stratum of MACs, the best-ranked in each, never the
searched space's own forest."""

from __future__ import annotations

import numpy as np
import pytest

from nasrlm.data import Objective
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.priors.transfer import AccuracyTransfer
from nasrlm.search.sampler._startup import startup_picks, startup_transfer

WIDTH = len(ALL_FREE_OBJECTIVES)
MACS = [o.name for o in ALL_FREE_OBJECTIVES].index("macs_m")
ACC = Objective("acc", "%", "accuracy", "test", True)
LATENCY = Objective("pixel3", "ms", "latency", "test", False)


@pytest.fixture(scope="module")
def forests() -> AccuracyTransfer:
    """Forests of two spaces, nb101 and nb201, whose accuracy rises with label 5."""
    rng = np.random.default_rng(0)
    tables = []
    for space in ("nb101", "nb201"):
        labels = rng.uniform(0, 10, size=(100, WIDTH))
        tables.append((space, [f"{space}:acc"], labels, labels[:, 5:6] + rng.normal(0, 0.1, (100, 1))))
    return AccuracyTransfer.fit(tables)


def _one(forests: AccuracyTransfer, space: str) -> AccuracyTransfer:
    return AccuracyTransfer(tuple(s for s in forests.sources if s.space == space))


def test_one_pick_per_stratum_of_macs_and_the_best_ranked_in_each(forests: AccuracyTransfer) -> None:
    rng = np.random.default_rng(0)
    transfer = _one(forests, "nb101")
    labels = rng.uniform(0, 10, size=(200, WIDTH))
    labels[:, MACS] = np.repeat(np.arange(20), 10)  # ties: ten candidates share each MACs value
    picks = startup_picks(labels, transfer, 4, np.random.default_rng(1))
    assert len(picks) == 4
    assert (labels[picks, MACS] // 5).tolist() == [0, 1, 2, 3]  # 4 strata of 50 rows
    predicted = transfer.predict(labels)
    for pick in picks:
        stratum = labels[:, MACS] // 5 == labels[pick, MACS] // 5
        assert predicted[pick] == predicted[stratum].max()


def test_asking_for_more_picks_than_candidates_picks_each_once(forests: AccuracyTransfer) -> None:
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 10, size=(3, WIDTH))
    transfer = forests.narrowed(labels)
    assert sorted(startup_picks(labels, transfer, 10, rng)) == [0, 1, 2]
    assert startup_picks(labels[:0], transfer, 10, rng) == []


def test_the_searched_space_never_reads_its_own_forest(forests: AccuracyTransfer, tmp_path) -> None:
    forests.save(tmp_path / "transfer.safetensors")
    transfer = startup_transfer(tmp_path, "nb201", [ACC, LATENCY])
    assert transfer is not None and [s.space for s in transfer.sources] == ["nb101"]
    assert startup_transfer(tmp_path, "nb201", [LATENCY]) is None  # no accuracy to rank by
    _one(forests, "nb201").save(tmp_path / "transfer.safetensors")
    assert startup_transfer(tmp_path, "nb201", [ACC]) is None  # only its own forest: none left
    assert startup_transfer(tmp_path / "missing", "nb201", [ACC]) is None


def test_the_shipped_base_has_forests_for_nb201_from_other_spaces() -> None:
    transfer = startup_transfer("shipped", "nb201", [ACC])
    assert transfer is not None and "nb201" not in {s.space for s in transfer.sources}
