"""NAS-Bench-101 published columns (validation accuracy at 4/12/36/108 epochs, parameters, training time).

Source: ``nb101/first_20k_by_hash.json`` in the user's data directory: the 20,001 cells with the smallest
module hashes (about 4.7 % of the 423,624), keyed by the benchmark's module hash only — no adjacency, no
operations. Rows are keyed by our canonical NB101 ids (:meth:`~search_spaces.NasBench101.arch_id`), so the
hashes have to be attached to cells:

* for given ``ids`` this is cheap: each id's module hash is computed and looked up (~0.1 ms per id);
* for the whole table every cell of the space must be hashed (its hash is an MD5 digest, there is no
  shortcut to the 20,001 smallest), about a minute on one core, shared by up to four processes. The
  resulting hash -> id map is kept for the process and on disk in the label cache's folder
  (:func:`~nasrlm.label_cache.default_cache_dir`; in memory alone where ``$NASRLM_CACHE`` is ``off``),
  keyed by a digest of the file's hash list, so it is computed once per machine. A cached map is
  spot-checked on reading (a sample of its ids re-hashed) and rebuilt if it is wrong.

The accuracies are fractions in the file and percent here. They are not the mean of the benchmark's three
training runs: on the 17 cells this file shares with NASLib's ``zero_cost_500.json`` (which holds single
runs) each value is at least NASLib's, and equals the largest of three different runs NASLib shows for the
two cells it repeats, so they look like the best of the three runs.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from nasrlm._files import keep_file
from nasrlm._processes import can_fork_workers, usable_cores
from nasrlm.data._catalogue import Catalogue, Column, Query, Rows
from nasrlm.data._datadir import DataFileError, data_file, file_version
from nasrlm.data._loader_utils import extra_ids
from nasrlm.data._table import BenchmarkTable, Objective
from nasrlm.label_cache import default_cache_dir
from search_spaces.nasbench101 import (
    NUM_CELLS,
    NasBench101,
    NB101Cell,
    canonical_id,
    hash_labels,
    hash_module,
    module_hashes,
)

SPACE = NasBench101.name
FIRST_20K_JSON = "nb101/first_20k_by_hash.json"
_ORIGIN = "NAS-Bench-101 via tiga1231/nasbench-vis; 20,001 smallest module hashes only"
#: cells whose ids a cached hash -> id map must hash back to their keys before it is trusted.
_SPOT_CHECKS = 64


def _percent(values: np.ndarray) -> np.ndarray:
    return values * 100.0


def _per_million(values: np.ndarray) -> np.ndarray:
    return values / 1e6  # divided, not times 1e-6: exact for parameter counts


def _columns() -> dict[str, Column]:
    columns: list[Column] = []

    def add(name: str, unit: str, desc: str, key: str, hib: bool,
            convert: Callable[[np.ndarray], np.ndarray] | None) -> None:
        source = f"{FIRST_20K_JSON} list {key} (data dir; {_ORIGIN})"
        columns.append(Column(Objective(name, unit, desc, source, hib), FIRST_20K_JSON, key, convert))

    run = "CIFAR-10 validation accuracy, best of 3 runs"
    add("acc", "%", f"{run}, full 108-epoch schedule (= cifar10_valid_acc_108ep)",
        "108_final_validation_accuracy", True, _percent)
    for epochs in (4, 12, 36, 108):
        add(f"cifar10_valid_acc_{epochs}ep", "%", f"{run}, {epochs}-epoch schedule",
            f"{epochs}_final_validation_accuracy", True, _percent)
    add("params_m", "M", "trainable parameters of the CIFAR-10 network, millions", "trainable_parameters",
        False, _per_million)
    add("train_time_s", "s", "training time of the 108-epoch run on a Google Cloud TPU v2 (batch 256), "
        "seconds", "final_training_time", False, None)
    return {c.objective.name: c for c in columns}


def _rows(query: Query) -> list[str]:
    """``ids`` checked canonical, else the file's cells then ids only ``extra`` has (without built-in
    objectives: those ids alone). Finds each row in the file by module hash (``query.located``)."""
    src: Rows | None = query.source(FIRST_20K_JSON) if query.names else None
    if query.ids is not None:
        space = NasBench101()
        row_ids = query.ids
        rows = np.full(len(row_ids), -1, dtype=np.intp)
        for k, i in enumerate(row_ids):
            cell = space.parse(i)  # ValueError names a malformed id
            canonical = space.arch_id(cell)
            if canonical != i:
                raise ValueError(f"{i!r} is not a canonical NB101 id; its canonical form is {canonical!r}")
            if src is not None:
                rows[k] = src.row_of.get(_cell_hash(cell), -1)
    elif src is not None:
        row_ids = list(_ids_for(src.keys))
        row_ids += extra_ids(query.extra, set(row_ids))
        rows = np.concatenate([np.arange(len(src.keys)), np.full(len(row_ids) - len(src.keys), -1)])
    else:  # measured columns only: their ids are the rows
        return extra_ids(query.extra)
    if src is not None:
        query.located[FIRST_20K_JSON] = rows
    return row_ids


def _read(root: Path | None, relpath: str) -> Rows:
    return _read_cached(file_version(data_file(root, relpath)))


CATALOGUE = Catalogue(SPACE, "NB101", _columns(), _read, _rows, needs_a_name=True)
#: every NB101 objective the data directory can provide, keyed by name.
NB101_OBJECTIVES: Mapping[str, Objective] = CATALOGUE.objectives


def available_nb101_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_nb101` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    return CATALOGUE.available(data_dir)


# --- reading ------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _read_cached(version: tuple[str, int, int]) -> Rows:
    """The file's lists, checked: every list as long as ``key``, hashes unique 32-digit hex, no gaps.

    Rows are keyed by module hash (not by our ids: see :func:`_rows`)."""
    with open(version[0], encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, dict) or "key" not in raw:
        raise DataFileError(f"{FIRST_20K_JSON}: expected a JSON object of lists with a 'key' list")
    needed = sorted(set(CATALOGUE.fields(FIRST_20K_JSON)))
    missing = [k for k in needed if k not in raw]
    if missing:
        raise DataFileError(f"{FIRST_20K_JSON}: missing list(s) {', '.join(missing)}; found {', '.join(raw)}")
    keys = tuple(str(k) for k in raw["key"])
    bad = next((k for k in keys if len(k) != 32 or set(k) - set("0123456789abcdef")), None)
    if bad is not None:
        raise DataFileError(f"{FIRST_20K_JSON}: {bad!r} is not a module hash (32 lower-case hex digits)")
    row_of = {k: i for i, k in enumerate(keys)}
    if len(row_of) != len(keys):
        raise DataFileError(f"{FIRST_20K_JSON}: duplicate module hashes")
    columns = {}
    for name in needed:
        if len(raw[name]) != len(keys):
            raise DataFileError(f"{FIRST_20K_JSON}: list {name} has {len(raw[name])} values, "
                                f"'key' {len(keys)}")
        arr = np.array(raw[name], dtype=np.float64)
        if not np.isfinite(arr).all():
            raise DataFileError(f"{FIRST_20K_JSON}: list {name} has missing or non-finite values")
        arr.flags.writeable = False
        columns[name] = arr
    return Rows(keys, MappingProxyType(row_of), MappingProxyType(columns))


# --- module hash -> canonical id ----------------------------------------------------------------------
def _cell_hash(cell: NB101Cell) -> str:
    """Module hash of a cell that is already pruned (every enumerated or canonical cell is)."""
    return hash_module(cell.matrix, hash_labels(cell))


def match_hashes(keys: Iterable[str], cells: Iterable[NB101Cell], *, progress: bool = False,
                 total: int | None = None, canonical: bool = False) -> dict[str, str]:
    """``{module hash: canonical id}`` for ``keys``, found by hashing ``cells`` until every key is met.

    ``canonical``: every cell is its own canonical representative already (``NasBench101.enumerate``'s
    are), so its id is written down without looking for it (half the time of a whole enumeration).
    Raises ``ValueError`` naming a key that no cell has (a file that is not of this space).
    """
    from tqdm.auto import tqdm

    wanted = set(keys)
    space = NasBench101()
    found: dict[str, str] = {}
    bar = tqdm(cells, total=total, desc="nb101: hashing cells", unit="cell",
               disable=None if progress else True, mininterval=1.0)  # None: only on a terminal
    for cell in bar:
        h = _cell_hash(cell)
        if h in wanted and h not in found:
            found[h] = canonical_id(cell) if canonical else space.arch_id(cell)
            if len(found) == len(wanted):
                break
    bar.close()
    return _all_found(wanted, found)


#: keys from which :func:`match_all_hashes` shares the whole space among processes (the published table's
#: 20,001 smallest hashes are spread over all of it)
_SHARDED_FROM = 1_000


def match_all_hashes(keys: Iterable[str], jobs: int = 1) -> dict[str, str]:
    """:func:`match_hashes` over the whole space, shared among ``jobs`` processes by edge mask
    (:func:`~search_spaces.nasbench101.module_hashes`, each building its own masks' cells alone). Fewer
    than :data:`_SHARDED_FROM` keys are looked for in one process, which stops at the last one found:
    keys of cells early in the enumeration need no pass over the whole space."""
    wanted = set(keys)
    if jobs == 1 or len(wanted) < _SHARDED_FROM:
        return match_hashes(wanted, NasBench101().enumerate(), progress=True, total=NUM_CELLS, canonical=True)
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        shards = pool.map(_hashes_of_shard, [(k, jobs, wanted) for k in range(jobs)])
        found = {h: arch_id for shard in shards for h, arch_id in shard.items()}
    return _all_found(wanted, found)


def _all_found(wanted: set[str], found: dict[str, str]) -> dict[str, str]:
    """``found``, once it holds every wanted key; else ``ValueError`` naming one no cell has."""
    if len(found) != len(wanted):
        missing = sorted(wanted - found.keys())
        raise ValueError(f"{len(missing)} module hash(es) match no NB101 cell, e.g. {missing[0]}")
    return found


def _hashes_of_shard(job: tuple[int, int, set[str]]) -> dict[str, str]:
    """``{hash: id}`` of the wanted hashes among the cells of part ``k`` of ``jobs`` (``module_hashes``)."""
    k, jobs, wanted = job
    space = NasBench101()
    return {h: canonical_id(space.cell_of(key)) for h, key in module_hashes(k, jobs) if h in wanted}


def _hash_jobs() -> int:
    """Processes to hash the whole space in: every core (at most 4), one where fork is missing or inside a
    daemonic process, which may have no children."""
    return min(4, usable_cores()) if can_fork_workers() else 1


def _ids_for(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Canonical id of every key, in key order (memory, then disk cache, then a full enumeration)."""
    folder = default_cache_dir()  # None: the user turned the cache off, the map is kept in memory only
    digest = hashlib.sha256("\n".join(keys).encode("ascii")).hexdigest()[:20]
    return _ids_for_cached(keys, None if folder is None else str(folder / f"nb101_ids_{digest}.json"))


@functools.lru_cache(maxsize=2)
def _ids_for_cached(keys: tuple[str, ...], cache_file: str | None) -> tuple[str, ...]:
    cached = None if cache_file is None else _read_id_cache(Path(cache_file), keys)
    if cached is not None:
        return cached
    jobs = _hash_jobs()
    kept = ("not kept: the cache is off" if cache_file is None
            else f"the map is cached in {Path(cache_file).parent}")
    print(f"nb101: attaching the {len(keys):,} module hashes of {FIRST_20K_JSON} to cells by hashing the "
          f"whole space in {jobs} process{'es' if jobs > 1 else ''} (once, about a minute; {kept})",
          file=sys.stderr)
    found = match_all_hashes(keys, jobs)
    ids = tuple(found[k] for k in keys)
    if cache_file is not None:
        _write_id_cache(Path(cache_file), ids)
    return ids


def _read_id_cache(path: Path, keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """The cached ids if the file is there, complete, and a sample of them hashes back to its keys."""
    try:
        ids = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(ids, list) or len(ids) != len(keys) or len(set(ids)) != len(ids):
        return None
    space = NasBench101()
    rng = np.random.default_rng(len(keys))
    try:
        for k in rng.choice(len(keys), size=min(_SPOT_CHECKS, len(keys)), replace=False):
            cell = space.parse(ids[k])
            if space.arch_id(cell) != ids[k] or _cell_hash(cell) != keys[k]:
                return None
    except (ValueError, TypeError):
        return None
    return tuple(ids)


def _write_id_cache(path: Path, ids: tuple[str, ...]) -> None:
    """A cache that cannot be written only costs the next process the enumeration."""
    keep_file(path, json.dumps(list(ids)).encode("utf-8"))


# --- public loader ------------------------------------------------------------------------------------
def load_nb101(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
               ids: Sequence[str] | None = None, *,
               extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None) -> BenchmarkTable:
    """Table of the named NB101 objectives, rows keyed by canonical NB101 ids.

    Rows: ``ids`` if given (canonical ids; a cell outside the file's 20,001 gets NaN), else the file's
    20,001 cells in its order (ascending module hash) followed by any further ids that ``extra`` has
    values for, sorted (only the latter where no built-in objective is asked for). ``extra`` supplies
    further columns by name (e.g. latencies measured by nasrlm): name -> (Objective, arch id -> value);
    its names must not shadow built-in ones. ``data_dir`` falls back to ``$NASRLM_DATA``.

    Raises :class:`~nasrlm.data.UnknownObjectiveError` for an unknown name and
    :class:`~nasrlm.data.DataFileNotFoundError` when a built-in objective is asked for without the file.
    """
    return CATALOGUE.load(objectives, data_dir, ids, extra=extra)
