"""The label cache: each architecture described once, for every command, process and worker."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import nasrlm.free_labels as free_labels_module
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, describe_spaces, texts_and_free_labels
from nasrlm.label_cache import LabelCache, LabelCacheError, default_cache_dir, space_key
from nasrlm.search import ArchCache
from search_spaces import NasBench201

SPACE = NasBench201()
REPO = Path(__file__).resolve().parents[2]


def test_stored_texts_and_labels_come_back_as_they_went_in(tmp_path) -> None:
    path = tmp_path / "sub" / "labels.db"
    with LabelCache(path) as cache:
        cache.put_many("nb201:x", 6, {"a": ("old", np.array([9.0])), "b": ("text b", np.array([3.0]))})
        cache.put_many("nb201:x", 6, {"a": ("text a", np.array([1.0, 2.5]))})  # the newest row stays
        assert len(cache) == 2
    with LabelCache(path) as again:  # another process, later
        got = again.get_many("nb201:x", 6, ["a", "b", "c", "a"])
        assert set(got) == {"a", "b"}
        assert got["a"][0] == "text a" and np.array_equal(got["a"][1], [1.0, 2.5])
        assert again.get_many("nb201:x", 7, ["a"]) == {}  # another version of the labels: never read
        assert again.get_many("nb201:y", 6, ["a"]) == {}  # another definition of the space


def test_more_ids_than_one_query_takes(tmp_path) -> None:
    with LabelCache(tmp_path / "labels.db") as cache:
        rows = {f"id{k}": (f"t{k}", np.array([float(k)])) for k in range(1_234)}
        cache.put_many("s", 1, rows)
        got = cache.get_many("s", 1, list(rows))
        assert len(got) == 1_234 and got["id1000"][1][0] == 1000.0


def test_a_file_that_is_no_database_is_refused_by_name(tmp_path) -> None:
    bad = tmp_path / "labels.db"
    bad.write_text("not sqlite " * 100)
    with pytest.raises(LabelCacheError, match="labels.db"):
        LabelCache(bad)
    with pytest.raises(LabelCacheError, match="below"):  # a path below a file
        LabelCache(bad / "below" / "labels.db")


def _write(path: str, start: int) -> None:
    with LabelCache(path) as cache:
        for k in range(start, start + 200, 10):
            cache.put_many("s", 1, {f"id{j}": (f"t{j}", np.array([float(j)])) for j in range(k, k + 10)})


def test_two_processes_writing_at_once_lose_nothing(tmp_path) -> None:
    path = str(tmp_path / "labels.db")
    LabelCache(path).close()
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write, args=(path, start)) for start in (0, 100)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(60)
    assert [w.exitcode for w in writers] == [0, 0]
    with LabelCache(path) as cache:
        got = cache.get_many("s", 1, [f"id{j}" for j in range(300)])
    assert len(got) == 300 and all(got[f"id{j}"][1][0] == j for j in range(300))


def _open_at_once(path: str, go, k: int) -> None:
    go.wait()
    with LabelCache(path) as cache:
        cache.put_many("s", 1, {f"id{k}": (f"t{k}", np.array([float(k)]))})


def test_processes_creating_one_new_file_at_once_all_open_it(tmp_path) -> None:
    # workers started together on a new cache race to switch it to write-ahead logging; SQLite told the
    # losers "database is locked" at once (a four-worker search lost a worker so)
    context = multiprocessing.get_context("fork")
    for attempt in range(5):
        path, go = str(tmp_path / f"labels{attempt}.db"), context.Event()
        openers = [context.Process(target=_open_at_once, args=(path, go, k)) for k in range(8)]
        for p in openers:
            p.start()
        go.set()
        for p in openers:
            p.join(60)
        assert [p.exitcode for p in openers] == [0] * 8
        with LabelCache(path) as cache:
            assert len(cache) == 8


def test_a_version_bump_describes_every_architecture_again(tmp_path, monkeypatch) -> None:
    cache = LabelCache(tmp_path / "labels.db")
    ids = SPACE.sample_ids(4, seed=2)
    texts, labels = texts_and_free_labels(SPACE, ids, graph=True, cache=cache)
    described = []
    real = free_labels_module._describe_chunk
    monkeypatch.setattr(free_labels_module, "_describe_chunk",
                        lambda chunk, job: described.append(chunk[1]) or real(chunk, job))
    assert texts_and_free_labels(SPACE, ids, graph=True, cache=cache)[0] == texts  # all from the cache
    assert described == []
    monkeypatch.setattr(free_labels_module, "FREE_LABELS_VERSION", free_labels_module.FREE_LABELS_VERSION + 1)
    again = texts_and_free_labels(SPACE, ids, graph=True, cache=cache)[1]
    assert sorted(i for chunk in described for i in chunk) == sorted(ids)  # the stale rows were not read
    np.testing.assert_array_equal(again, labels)


def test_caches_sharing_a_file_describe_each_architecture_once(tmp_path, monkeypatch) -> None:
    described: list[str] = []
    real = free_labels_module._describe_chunk
    monkeypatch.setattr(free_labels_module, "_describe_chunk",
                        lambda chunk, job: described.extend(chunk[1]) or real(chunk, job))
    ids = SPACE.sample_ids(6, seed=1)
    first = ArchCache(SPACE, graph=True, cache=LabelCache(tmp_path / "labels.db"))
    labels = first.labels_of(ids[:4])
    second = ArchCache(SPACE, graph=True, cache=LabelCache(tmp_path / "labels.db"))  # a second worker
    assert np.array_equal(second.labels_of(ids[:4]), labels)
    assert second.texts_of(ids[:4]) == first.texts_of(ids[:4])
    second.labels_of(ids)
    assert sorted(described) == sorted(ids)  # each described once, whichever cache asked
    alone = ArchCache(SPACE, graph=True, cache=None)
    assert np.array_equal(alone.labels_of(ids[:4]), labels)


def test_worker_processes_describe_what_one_process_does() -> None:
    ids = SPACE.sample_ids(300, seed=5)
    one = texts_and_free_labels(SPACE, ids, graph=True, cache=None, jobs=1)
    two = texts_and_free_labels(SPACE, ids, graph=True, cache=None, jobs=2)
    assert one[0] == two[0]
    np.testing.assert_array_equal(one[1], two[1])


def test_spaces_are_described_in_turn_so_a_stop_leaves_each_as_far_along(tmp_path) -> None:
    other = NasBench201()
    requests = [(SPACE, SPACE.sample_ids(640, seed=1)), (other, other.sample_ids(128, seed=2))]
    order = [r for r, _ in describe_spaces(requests, cache=None, jobs=1)]
    assert order[:4] == [0, 1, 0, 1] and order[4:] == [0] * 8  # 10 chunks of 64, then 2


def test_a_space_whose_definition_changes_gets_another_key() -> None:
    class Edited(NasBench201):
        def build_onnx(self, arch):
            return super().build_onnx(arch)

    assert space_key(SPACE).startswith("nb201:")
    assert space_key(NasBench201()) == space_key(SPACE)
    assert space_key(Edited()) != space_key(SPACE)  # its class lives in another file: this one


def test_the_cache_folder_follows_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NASRLM_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.setenv("NASRLM_CACHE", "off")
    assert default_cache_dir() is None
    monkeypatch.delenv("NASRLM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "nasrlm"


def test_rows_without_every_label_are_described_again(tmp_path) -> None:
    cache = LabelCache(tmp_path / "labels.db")
    ids = SPACE.sample_ids(2, seed=3)
    cache.put_many(space_key(SPACE), free_labels_module.FREE_LABELS_VERSION,
                   {i: ("short", np.array([1.0])) for i in ids})
    texts, labels = texts_and_free_labels(SPACE, ids, graph=True, cache=cache)
    assert labels.shape == (2, len(ALL_FREE_OBJECTIVES)) and "short" not in texts
    assert all(len(row[1]) == len(ALL_FREE_OBJECTIVES) for row in cache.get_many(space_key(SPACE),
               free_labels_module.FREE_LABELS_VERSION, ids).values())  # and replaced in the cache


def test_worker_processes_describe_a_torch_space_after_the_parent_used_torch_threads(tmp_path) -> None:
    """A torch space traces its networks in the forked workers: with torch's thread pool forked from a
    parent that had used it, the first parallel op would wait forever unless the workers reset it."""
    code = (
        "import sys, torch; sys.path.insert(0, 'examples/plugin_example');"
        "from tiny_mobilenet import TinyMobileNet;"
        "import nasrlm.free_labels as f; from nasrlm.free_labels import texts_and_free_labels;"
        "f._PARALLEL_FROM, f._CHUNK = 2, 4;"  # eight architectures, two workers (not 260 of them)
        "torch.set_num_threads(2); torch.ones(512, 512) @ torch.ones(512, 512);"  # the pool is started
        "s = TinyMobileNet(); ids = s.sample_ids(8, seed=0);"
        "texts, labels = texts_and_free_labels(s, ids, graph=True, cache=None, jobs=2);"
        "print(len(texts), labels.shape)"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[0] == "8"
