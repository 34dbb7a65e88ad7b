"""FBNet (HW-NAS-Bench, CIFAR-100) published columns: latency on 27 device settings, FLOPs, zero-cost proxies.

Two files in the user's data directory, both keyed by the benchmark's ``op_idx_list`` (22 block ids,
space separated), which :meth:`~search_spaces.FBNetArch.from_op_indices` turns into our canonical FBNet
ids (block names joined by ``-``):

* ``fbnet/latency_ms.csv`` (HELP): 5,000 sampled architectures, latency in milliseconds of the
  CIFAR-100 network (32×32 input) on GPUs at batch 1/32/64, Intel CPUs, phones, a Raspberry Pi 4 and two
  estimated accelerators (batch 1). Its ``op_names`` column is checked against ``op_idx_list``.
* ``fbnet/zero_cost.csv`` (nasflat_latency): the same 5,000: trainable parameters, the benchmark's FLOP
  count and zero-cost proxy scores. No accuracy is published for these architectures.

Rows are the architectures of the files that the requested objectives come from (in file order, the
latency file first), then those only ``extra`` (measured) columns know.
"""

from __future__ import annotations

import csv
import functools
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np

from nasrlm.data._catalogue import Catalogue, Column, Query, Rows
from nasrlm.data._datadir import DataFileError, data_file, file_version
from nasrlm.data._devices import BATCH1_DEVICES, GPUS, ZC_LOWER_IS_BETTER
from nasrlm.data._loader_utils import extra_ids
from nasrlm.data._table import BenchmarkTable, Objective
from search_spaces.fbnet import FBNet, FBNetArch

SPACE = FBNet.name
LATENCY_CSV = "fbnet/latency_ms.csv"
ZERO_COST_CSV = "fbnet/zero_cost.csv"
_HELP = "HELP, HayeonLee/HELP data/fbnet"
_NASFLAT = "abdelfattah-lab/nasflat_latency zc_fbnet.json"
GPU_BATCHES = (1, 32, 64)
ZC_PROXIES = ("synflow", "zen", "epe_nas", "fisher", "grad_norm", "grasp", "jacov", "l2_norm", "nwot",
              "plain", "snip")


def _per_million(values: np.ndarray) -> np.ndarray:
    return values / 1e6


def _columns() -> dict[str, Column]:
    columns: list[Column] = []

    def add(name: str, unit: str, desc: str, file: str, column: str, origin: str, hib: bool,
            convert: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        source = f"{file} column {column} (data dir; {origin})"
        columns.append(Column(Objective(name, unit, desc, source, hib), file, column, convert))

    net = "the CIFAR-100 FBNet network (32x32 input)"
    for gpu, gpu_name in GPUS.items():
        for batch in GPU_BATCHES:
            add(f"{gpu}_{batch}", "ms", f"latency of {net} on {gpu_name}, batch {batch}", LATENCY_CSV,
                f"{gpu}_{batch}", _HELP, False)
    for dev, dev_note in BATCH1_DEVICES.items():
        dev_name, _, note = dev_note.partition("; ")
        desc = f"latency of {net} on {dev_name}, batch 1" + (f" ({note})" if note else "")
        add(dev, "ms", desc, LATENCY_CSV, dev, _HELP, False)
    add("params_m", "M", f"trainable parameters of {net}, millions", ZERO_COST_CSV, "params", _NASFLAT, False,
        _per_million)
    add("zc_flops_m", "MFLOPs", f"FLOPs of {net} as the table counts them (conv multiply-adds plus "
        "element-wise ops, above nasrlm's macs_m), millions", ZERO_COST_CSV, "flops", _NASFLAT, False,
        _per_million)
    for proxy in ZC_PROXIES:
        add(f"zc_{proxy}", "", f"{proxy} zero-cost proxy score at initialisation, CIFAR-100 (direction "
            "taken from NB201: no FBNet accuracy to check it)", ZERO_COST_CSV, proxy, _NASFLAT,
            proxy not in ZC_LOWER_IS_BETTER)
    return {c.objective.name: c for c in columns}


def _rows(query: Query) -> list[str]:
    """The files' rows (latency file first, then ids only ``extra`` has), or ``ids`` checked canonical.

    The needed files are read first, so a missing one is reported before a malformed id.
    """
    sources: list[Rows] = [query.source(f) for f in query.needed_sources()]
    if query.ids is not None:
        space = FBNet()
        for i in query.ids:
            canonical = space.arch_id(space.parse(i))  # ValueError names a malformed id
            if canonical != i:
                raise ValueError(f"{i!r} is not a canonical FBNet id; its canonical form is {canonical!r}")
        return query.ids
    row_ids = list(dict.fromkeys(i for src in sources for i in src.keys))
    return row_ids + extra_ids(query.extra, set(row_ids))


def _read(root: Path | None, relpath: str) -> Rows:
    return _read_cached(file_version(data_file(root, relpath)), relpath)


CATALOGUE = Catalogue(SPACE, "FBNet", _columns(), _read, _rows, needs_a_name=True)
#: every FBNet objective the data directory can provide, keyed by name.
FBNET_OBJECTIVES: Mapping[str, Objective] = CATALOGUE.objectives


def available_fbnet_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_fbnet` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    return CATALOGUE.available(data_dir)


# --- reading ------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4)
def _read_cached(version: tuple[str, int, int], relpath: str) -> Rows:
    """The objective fields of one file, rows keyed by canonical id (keys validated, no duplicates)."""
    numeric = CATALOGUE.fields(relpath)
    with open(version[0], newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        missing = [c for c in ["op_idx_list", *numeric] if c not in header]
        if missing:
            raise DataFileError(f"{relpath}: missing column(s) {', '.join(missing)}; "
                                f"found {', '.join(header)}")
        rows = [row for row in reader if row]
    key, names = header.index("op_idx_list"), header.index("op_names") if "op_names" in header else None
    ids = []
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise DataFileError(f"{relpath}: line {line} has {len(row)} fields, expected {len(header)}")
        try:
            arch = FBNetArch.from_op_indices(row[key])
        except ValueError as err:
            raise DataFileError(f"{relpath}: line {line}: {err}") from None
        if names is not None and tuple(row[names].split()) != arch.blocks:
            raise DataFileError(f"{relpath}: line {line}: op_names {row[names]!r} disagree with op_idx_list "
                                f"{row[key]!r}")
        ids.append("-".join(arch.blocks))
    row_of = {i: k for k, i in enumerate(ids)}
    if len(row_of) != len(ids):
        raise DataFileError(f"{relpath}: an architecture is listed twice")
    columns = {}
    for name in numeric:
        k = header.index(name)
        arr = np.array([float(row[k]) if row[k] else math.nan for row in rows], dtype=np.float64)
        arr.flags.writeable = False
        columns[name] = arr
    return Rows(tuple(ids), MappingProxyType(row_of), MappingProxyType(columns))


# --- public loader ------------------------------------------------------------------------------------
def load_fbnet(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
               ids: Sequence[str] | None = None, *,
               extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None) -> BenchmarkTable:
    """Table of the named FBNet objectives, rows keyed by canonical FBNet ids.

    Rows: ``ids`` if given (canonical ids; an architecture no file has gets NaN), else every architecture
    of the files the requested objectives come from, in file order (latency file first), followed by
    any further ids that ``extra`` has values for, sorted. ``extra`` supplies further columns by name
    (e.g. latencies measured by nasrlm): name -> (Objective, arch id -> value); its names must not shadow
    built-in ones. ``data_dir`` falls back to ``$NASRLM_DATA``.

    Raises :class:`~nasrlm.data.UnknownObjectiveError` for an unknown name and
    :class:`~nasrlm.data.DataFileNotFoundError` when a built-in objective is asked for without its file.
    """
    return CATALOGUE.load(objectives, data_dir, ids, extra=extra)
