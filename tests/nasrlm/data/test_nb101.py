"""NB101 loader: module hashes joined to our canonical ids, checked against the networks we build."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from exporters import count_parameters, materialize
from nasrlm.data import (
    DataFileNotFoundError,
    Objective,
    UnknownObjectiveError,
    available_objectives,
    load_table,
)
from nasrlm.data import _nb101 as nb101
from nasrlm.label_cache import CACHE_ENV
from search_spaces import NasBench101

SPACE = NasBench101()
NAMES = ["acc", "cifar10_valid_acc_4ep", "cifar10_valid_acc_12ep", "cifar10_valid_acc_36ep",
         "cifar10_valid_acc_108ep", "params_m", "train_time_s"]


@pytest.fixture(scope="module")
def nb101_dir(data_dir: Path) -> Path:
    if not (data_dir / nb101.FIRST_20K_JSON).is_file():
        pytest.skip(f"benchmark data not found: {data_dir / nb101.FIRST_20K_JSON}")
    return data_dir


@pytest.fixture(scope="module")
def raw(nb101_dir: Path) -> dict[str, list]:
    with open(nb101_dir / nb101.FIRST_20K_JSON) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def early_cells() -> list:
    """The first 3,000 cells in enumeration order (about 140 of them are in the file)."""
    return list(itertools.islice(SPACE.enumerate(), 3000))


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    nb101._ids_for_cached.cache_clear()
    yield tmp_path / "cache"
    nb101._ids_for_cached.cache_clear()


def params(arch_id: str) -> int:
    """Trainable parameters of the network we build (shapes only; BatchNorm statistics not counted)."""
    return count_parameters(materialize(SPACE.build_onnx(SPACE.parse(arch_id)), weights=False))


def test_objectives_are_listed_only_with_the_file(nb101_dir: Path, tmp_path: Path) -> None:
    assert [o.name for o in available_objectives("nb101", nb101_dir)] == NAMES
    assert available_objectives("nb101", tmp_path) == []
    for o in available_objectives("nb101", nb101_dir):
        assert o.unit in ("%", "M", "s") and nb101.FIRST_20K_JSON in o.source and o.description


def test_given_ids_join_by_module_hash_and_params_match_our_networks(nb101_dir: Path, raw: dict) -> None:
    """Random cells whose hash is in the file: every published column lands on the right row, and the
    parameter count of the network we build for that id is the published one."""
    row_of = {k: i for i, k in enumerate(raw["key"])}
    rng = np.random.default_rng(1)
    ids: dict[str, None] = {}
    outside: dict[str, None] = {}
    while len(ids) < 25:
        cell = SPACE.sample(rng)
        (ids if SPACE.module_hash(cell) in row_of else outside)[SPACE.arch_id(cell)] = None
    ids, outside = list(ids), list(outside)  # type: ignore[assignment]
    table = load_table("nb101", NAMES, nb101_dir, ids=[*ids, *outside[:5]])
    assert table.ids == [*ids, *outside[:5]] and table.space == "nb101"
    for k, arch_id in enumerate(ids):
        i = row_of[SPACE.module_hash(SPACE.parse(arch_id))]
        assert round(table.column("params_m")[k] * 1e6) == raw["trainable_parameters"][i] == params(arch_id)
        assert table.column("acc")[k] == pytest.approx(100 * raw["108_final_validation_accuracy"][i])
        acc4 = table.column("cifar10_valid_acc_4ep")[k]
        assert acc4 == pytest.approx(100 * raw["4_final_validation_accuracy"][i])
        assert table.column("train_time_s")[k] == raw["final_training_time"][i]
    assert np.isnan(table.values[len(ids):]).all()  # cells outside the 20,001
    np.testing.assert_array_equal(table.column("acc"), table.column("cifar10_valid_acc_108ep"))


def test_ids_must_be_canonical(nb101_dir: Path) -> None:
    arch_id = "010.001.000|input,conv3x3-bn-relu,output"
    malformed = "0100.0010.0000.0000|input,conv3x3-bn-relu,output,output"
    with pytest.raises(ValueError, match="malformed NB101 id"):
        load_table("nb101", ["acc"], nb101_dir, ids=[malformed])
    spec = "0110.0001.0001.0000|input,conv1x1-bn-relu,conv3x3-bn-relu,output"  # branches swapped
    canonical = SPACE.arch_id(SPACE.parse(spec))
    assert canonical != spec
    with pytest.raises(ValueError, match="not a canonical NB101 id.*" + canonical.replace("|", r"\|")):
        load_table("nb101", ["acc"], nb101_dir, ids=[spec])
    assert load_table("nb101", ["acc"], nb101_dir, ids=[arch_id]).ids == [arch_id]


def test_unknown_objective_and_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    with pytest.raises(UnknownObjectiveError, match="did you mean 'params_m'.*train_time_s"):
        load_table("nb101", ["params"])
    with pytest.raises(DataFileNotFoundError, match="nb101/first_20k_by_hash.json"):
        load_table("nb101", ["acc"], tmp_path)
    with pytest.raises(ValueError, match="twice"):
        load_table("nb101", ["acc", "acc"], tmp_path)


def test_measured_columns_alone_need_no_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    a, b = (SPACE.arch_id(SPACE.sample(np.random.default_rng(s))) for s in (0, 1))
    cpu = Objective("cpu-1t-b1", "ms", "ONNX Runtime, 1 thread, batch 1", "measured", False)
    table = load_table("nb101", ["cpu-1t-b1"], extra={"cpu-1t-b1": (cpu, {b: 2.0, a: 1.0})})
    assert table.ids == sorted([a, b]) and table.column("cpu-1t-b1").tolist() == [
        {a: 1.0, b: 2.0}[i] for i in table.ids]
    with pytest.raises(ValueError, match="shadows"):
        load_table("nb101", ["acc"], extra={"acc": (cpu, {})})


def test_hashes_are_matched_by_enumeration(raw: dict, early_cells: list) -> None:
    in_file = set(raw["key"])
    expected = {nb101._cell_hash(c): SPACE.arch_id(c) for c in early_cells if nb101._cell_hash(c) in in_file}
    assert 100 < len(expected) < 200
    assert nb101.match_hashes(expected, early_cells) == expected
    assert nb101.match_hashes(expected, early_cells, canonical=True) == expected  # enumerated: canonical
    with pytest.raises(ValueError, match="match no NB101 cell"):
        nb101.match_hashes([*expected, "f" * 32], early_cells)


def test_id_map_is_cached_on_disk_and_checked(raw: dict, early_cells: list, own_cache: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    in_file = set(raw["key"])
    keys = tuple(sorted(h for h in map(nb101._cell_hash, early_cells) if h in in_file))
    ids = nb101._ids_for(keys)  # enumeration stops once every key is found: these are early cells
    [cache_file] = own_cache.iterdir()
    assert json.loads(cache_file.read_text()) == list(ids)
    assert nb101._read_id_cache(cache_file, keys) == ids
    monkeypatch.setattr(nb101, "_SPOT_CHECKS", len(keys))  # so the check surely meets the swapped pair
    tampered = list(ids)
    tampered[0], tampered[1] = tampered[1], tampered[0]
    cache_file.write_text(json.dumps(tampered))
    assert nb101._read_id_cache(cache_file, keys) is None
    assert nb101._read_id_cache(cache_file, keys[1:]) is None  # wrong length
    cache_file.write_text("not json")
    assert nb101._read_id_cache(cache_file, keys) is None
    nb101._ids_for_cached.cache_clear()
    assert nb101._ids_for(keys) == ids  # rebuilt and rewritten
    assert json.loads(cache_file.read_text()) == list(ids)


def test_id_map_is_kept_in_memory_alone_where_the_cache_is_off(
        raw: dict, early_cells: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    in_file = set(raw["key"])
    keys = tuple(sorted(h for h in map(nb101._cell_hash, early_cells[:500]) if h in in_file))
    monkeypatch.chdir(tmp_path)  # where a folder named "off" would once have been made
    monkeypatch.setenv(CACHE_ENV, "off")
    nb101._ids_for_cached.cache_clear()
    try:
        ids = nb101._ids_for(keys)
        assert [nb101._cell_hash(SPACE.parse(i)) for i in ids] == list(keys)
        assert list(tmp_path.iterdir()) == []
    finally:
        nb101._ids_for_cached.cache_clear()


@pytest.mark.slow
def test_full_table_has_every_row_of_the_file(nb101_dir: Path, raw: dict) -> None:
    """All 20,001 hashes find a cell. Cold this hashes the whole space (under a minute on two cores); the
    map is then read from the cache directory ($NASRLM_CACHE or ~/.cache/nasrlm) in about a second."""
    table = load_table("nb101", ["params_m", "acc"], nb101_dir)
    assert len(table.ids) == len(set(table.ids)) == len(raw["key"]) == 20001
    assert not np.isnan(table.values).any()
    rng = np.random.default_rng(0)
    for k in rng.choice(len(table.ids), size=20, replace=False):
        arch_id = table.ids[k]
        assert SPACE.arch_id(SPACE.parse(arch_id)) == arch_id
        assert SPACE.module_hash(SPACE.parse(arch_id)) == raw["key"][k]
        assert round(table.column("params_m")[k] * 1e6) == params(arch_id)
    assert math.isclose(table.column("acc").max(), 100 * max(raw["108_final_validation_accuracy"]))
