"""The label store: architectures described once, for every sampler and worker that names the file."""

from __future__ import annotations

import numpy as np
import pytest

import nasrlm.search._arch_cache as arch_cache
from nasrlm.search import ArchCache, LabelStore, LabelStoreError
from search_spaces import NasBench201

SPACE = NasBench201()


def test_stored_texts_and_labels_come_back_as_they_went_in(tmp_path) -> None:
    path = tmp_path / "sub" / "labels.db"
    with LabelStore(path) as store:
        store.put_many("nb201", True, {"a": ("text a", np.array([1.0, 2.5])),
                                       "b": ("text b", np.array([3.0]))})
        store.put_many("nb201", True, {"a": ("changed", np.array([9.0]))})  # stored already: kept
        assert len(store) == 2
    with LabelStore(path) as again:  # another process, later
        got = again.get_many("nb201", True, ["a", "b", "c", "a"])
        assert set(got) == {"a", "b"}
        assert got["a"][0] == "text a" and np.array_equal(got["a"][1], [1.0, 2.5])
        assert again.get_many("nb201", False, ["a"]) == {}  # without graph labels: another description
        assert again.get_many("nb101", True, ["a"]) == {}


def test_more_ids_than_one_query_takes(tmp_path) -> None:
    with LabelStore(tmp_path / "labels.db") as store:
        rows = {f"id{k}": (f"t{k}", np.array([float(k)])) for k in range(1_234)}
        store.put_many("s", False, rows)
        got = store.get_many("s", False, list(rows))
        assert len(got) == 1_234 and got["id1000"][1][0] == 1000.0


def test_a_file_that_is_no_database_is_refused_by_name(tmp_path) -> None:
    bad = tmp_path / "labels.db"
    bad.write_text("not sqlite " * 100)
    with pytest.raises(LabelStoreError, match="labels.db"):
        LabelStore(bad)
    with pytest.raises(LabelStoreError, match="below"):  # a path below a file
        LabelStore(bad / "below" / "labels.db")


def test_caches_sharing_a_store_describe_each_architecture_once(tmp_path, monkeypatch) -> None:
    described: list[str] = []
    real = arch_cache.texts_and_free_labels

    def counting(space, ids, **kwargs):
        described.extend(ids)
        return real(space, ids, **kwargs)

    monkeypatch.setattr(arch_cache, "texts_and_free_labels", counting)
    ids = SPACE.sample_ids(6, seed=1)
    first = ArchCache(SPACE, graph=True, store=LabelStore(tmp_path / "labels.db"))
    labels = first.labels_of(ids[:4])
    second = ArchCache(SPACE, graph=True, store=LabelStore(tmp_path / "labels.db"))  # a second worker
    assert np.array_equal(second.labels_of(ids[:4]), labels)
    assert second.texts_of(ids[:4]) == first.texts_of(ids[:4])
    second.labels_of(ids)
    assert sorted(described) == sorted(ids)  # each described once, whichever cache asked
    alone = ArchCache(SPACE, graph=True)
    assert np.array_equal(alone.labels_of(ids[:4]), labels)
