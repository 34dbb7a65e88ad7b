"""NAS-Bench-301 columns for the 725 DARTS architectures of NASLib's zero-cost benchmark, as a table.

Source: ``nb301/zero_cost_725.json`` in the user's data directory (NASLib ``zc_nasbench301.json``):
``{"cifar10": {<compact>: {"val_accuracy", "params": {"score"}, "flops": {"score"}, <proxy>: {"score"}}}}``
where ``<compact>`` is NASLib's compact genotype string. Rows are keyed by canonical ``nb301`` ids
(:class:`search_spaces.nds.NB301`); every record's key is parsed, checked to equal its ``arch`` field and
to give a distinct id, so a mis-keyed file fails loudly.

Counting conventions (checked in ``tests/nasrlm/data/test_nb301.py``): ``params`` is NASLib's count of its
own NB301 network, whose cell operations use non-affine BatchNorm: it equals the parameter count of our
(DARTS-faithful, affine) ``nb301`` model minus 2 per channel of each BatchNorm inside a cell operation,
with no auxiliary head in either. ``flops`` (millions) equals our multiply–accumulates plus one per
element of every BatchNorm and ReLU output, plus k²+1 per output element of every k×k pooling (NASLib
follows each pool with a BatchNorm), plus a constant 565,760.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from nasrlm.data._catalogue import Catalogue, Column, Query, Rows
from nasrlm.data._datadir import DataFileError, data_file, file_version
from nasrlm.data._table import BenchmarkTable, Objective
from search_spaces.nds import NB301

SPACE = NB301.name
ZERO_COST_JSON = "nb301/zero_cost_725.json"
_ORIGIN = "NASLib zc_nasbench301.json, 725 architectures"
_PROXIES = ("synflow", "grasp", "fisher", "grad_norm", "l2_norm", "plain", "nwot", "epe_nas", "jacov", "snip")
#: proxies whose Spearman correlation with val_accuracy is negative on the 725 (fisher -0.30, plain -0.30).
_LOWER_IS_BETTER = {"fisher", "plain"}


def _columns() -> dict[str, Column]:
    source = f"{ZERO_COST_JSON} field {{}} (data dir; {_ORIGIN})"
    columns = [
        Column(Objective("acc", "%", "CIFAR-10 top-1 validation accuracy, NAS-Bench-301 pipeline (C=32, 8 "
                         "cells, 100 epochs), as NAS-Bench-Suite-Zero records it (measured or NB301 "
                         "surrogate: the file does not say)", source.format("val_accuracy"), True),
               ZERO_COST_JSON, "val_accuracy"),
        Column(Objective("params_m", "M", "parameters, millions, counted by NASLib (cell-op BatchNorms "
                         "non-affine, no auxiliary head)", source.format("params"), False), ZERO_COST_JSON,
               "params"),
        Column(Objective("flops_m", "MFLOPs", "FLOPs, millions, counted by NASLib (MACs plus BatchNorm, ReLU "
                         "and pooling elements)", source.format("flops"), False), ZERO_COST_JSON, "flops"),
    ]
    columns += [Column(Objective(f"zc_{p}", "", f"{p} zero-cost proxy score at initialisation, CIFAR-10",
                                 source.format(p), p not in _LOWER_IS_BETTER), ZERO_COST_JSON, p)
                for p in _PROXIES]
    return {c.objective.name: c for c in columns}


def _rows(query: Query) -> list[str]:
    """The file's 725 in NASLib's idx order, or ``ids`` checked to parse (after reading the file, where a
    built-in objective needs it)."""
    table: Rows | None = query.source(ZERO_COST_JSON) if query.ids is None or query.names else None
    if query.ids is None:
        assert table is not None
        return list(table.keys)
    space = NB301()
    for i in query.ids:
        space.parse(i)  # ValueError naming the malformed part
    return query.ids


def _read_source(root: Path | None, relpath: str) -> Rows:
    return _read(file_version(data_file(root, relpath)))


@functools.lru_cache(maxsize=4)
def _read(version: tuple[str, int, int]) -> Rows:
    """Parse and check the file (cached per path, mtime and size); rows in NASLib's idx order."""
    with open(version[0], encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("cifar10"), dict):
        raise DataFileError(f"{ZERO_COST_JSON}: expected {{'cifar10': {{compact genotype: record}}}}")
    records = data["cifar10"]
    space = NB301()
    order, ids = [], []
    for key, record in records.items():
        if record.get("arch", key) != key:
            raise DataFileError(f"{ZERO_COST_JSON}: record {key!r} has a different arch field "
                                f"{record['arch']!r}")
        try:
            ids.append(space.arch_id(space.from_compact(key)))
        except ValueError as err:
            raise DataFileError(f"{ZERO_COST_JSON}: {err}") from None
        order.append(int(record.get("idx", len(order))))
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise DataFileError(f"{ZERO_COST_JSON}: two records are the same architecture {dup!r}")
    rows = sorted(range(len(ids)), key=order.__getitem__)
    recs = list(records.values())
    columns = {}
    for key in CATALOGUE.fields(ZERO_COST_JSON):
        values = [_score(recs[r], key) for r in rows]
        arr = np.array(values, dtype=np.float64)
        arr.flags.writeable = False
        columns[key] = arr
    keys = tuple(ids[r] for r in rows)
    return Rows(keys, {k: i for i, k in enumerate(keys)}, columns)


def _score(record: Mapping, key: str) -> float:
    value = record.get(key)
    if isinstance(value, Mapping):
        value = value.get("score")
    return math.nan if value is None else float(value)


CATALOGUE = Catalogue(SPACE, "NB301", _columns(), _read_source, _rows)
#: every built-in NB301 objective, keyed by name.
NB301_OBJECTIVES: Mapping[str, Objective] = CATALOGUE.objectives


def available_nb301_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_nb301` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    return CATALOGUE.available(data_dir)


def load_nb301(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
               ids: Sequence[str] | None = None, *,
               extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None) -> BenchmarkTable:
    """Table of the named NB301 objectives for ``ids`` (canonical ``nb301`` ids; default: the 725 rows).

    ``extra`` adds columns by name (name -> (Objective, id -> value)); its names must not shadow built-in
    ones. Unknown names raise :class:`UnknownObjectiveError`; a missing file
    :class:`~nasrlm.data.DataFileNotFoundError` (the file is the only source of these columns).
    """
    return CATALOGUE.load(objectives, data_dir, ids, extra=extra)
