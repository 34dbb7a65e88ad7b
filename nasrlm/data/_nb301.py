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
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from nasrlm.data._datadir import DataFileError, data_file, file_version, resolve_data_dir
from nasrlm.data._loader_utils import check_names, checked_extra
from nasrlm.data._table import BenchmarkTable, Objective
from search_spaces.nds import NB301

SPACE = NB301.name
ZERO_COST_JSON = "nb301/zero_cost_725.json"
_ORIGIN = "NASLib zc_nasbench301.json, 725 architectures"
_PROXIES = ("synflow", "grasp", "fisher", "grad_norm", "l2_norm", "plain", "nwot", "epe_nas", "jacov", "snip")
#: proxies whose Spearman correlation with val_accuracy is negative on the 725 (fisher -0.30, plain -0.30).
_LOWER_IS_BETTER = {"fisher", "plain"}


@dataclass(frozen=True)
class _Spec:
    objective: Objective
    key: str  # record field; a dict field's value is its "score"


def _catalogue() -> dict[str, _Spec]:
    source = f"{ZERO_COST_JSON} field {{}} (data dir; {_ORIGIN})"
    specs = [
        _Spec(Objective("acc", "%", "CIFAR-10 top-1 validation accuracy, NAS-Bench-301 pipeline (C=32, 8 "
                        "cells, 100 epochs), as NAS-Bench-Suite-Zero records it (measured or NB301 "
                        "surrogate: the file does not say)", source.format("val_accuracy"), True),
              "val_accuracy"),
        _Spec(Objective("params_m", "M", "parameters, millions, counted by NASLib (cell-op BatchNorms "
                        "non-affine, no auxiliary head)", source.format("params"), False), "params"),
        _Spec(Objective("flops_m", "MFLOPs", "FLOPs, millions, counted by NASLib (MACs plus BatchNorm, ReLU "
                        "and pooling elements)", source.format("flops"), False), "flops"),
    ]
    specs += [_Spec(Objective(f"zc_{p}", "", f"{p} zero-cost proxy score at initialisation, CIFAR-10",
                              source.format(p), p not in _LOWER_IS_BETTER), p) for p in _PROXIES]
    return {s.objective.name: s for s in specs}


_SPECS = _catalogue()
#: every built-in NB301 objective, keyed by name.
NB301_OBJECTIVES: Mapping[str, Objective] = MappingProxyType({n: s.objective for n, s in _SPECS.items()})


def available_nb301_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_nb301` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    root = resolve_data_dir(data_dir)
    if root is None or not (root / ZERO_COST_JSON).is_file():
        return []
    return list(NB301_OBJECTIVES.values())


@dataclass(frozen=True)
class _Table:
    ids: tuple[str, ...]  # in NASLib's idx order
    row_of: Mapping[str, int]
    columns: Mapping[str, np.ndarray]  # read-only float64, by record key


@functools.lru_cache(maxsize=4)
def _read(version: tuple[str, int, int]) -> _Table:
    """Parse and check the file (cached per path, mtime and size)."""
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
    for spec in _SPECS.values():
        values = [_score(recs[r], spec.key) for r in rows]
        arr = np.array(values, dtype=np.float64)
        arr.flags.writeable = False
        columns[spec.key] = arr
    keys = tuple(ids[r] for r in rows)
    return _Table(keys, {k: i for i, k in enumerate(keys)}, columns)


def _score(record: Mapping, key: str) -> float:
    value = record.get(key)
    if isinstance(value, Mapping):
        value = value.get("score")
    return math.nan if value is None else float(value)


def load_nb301(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
               ids: Sequence[str] | None = None, *,
               extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None) -> BenchmarkTable:
    """Table of the named NB301 objectives for ``ids`` (canonical ``nb301`` ids; default: the 725 rows).

    ``extra`` adds columns by name (name -> (Objective, id -> value)); its names must not shadow built-in
    ones. Unknown names raise :class:`UnknownObjectiveError`; a missing file
    :class:`~nasrlm.data.DataFileNotFoundError` (the file is the only source of these columns).
    """
    names = [objectives] if isinstance(objectives, str) else list(objectives)
    extra = checked_extra(extra, _SPECS, "NB301")
    check_names(names, _SPECS, extra, "NB301")

    root = resolve_data_dir(data_dir)
    needs_file = ids is None or any(n in _SPECS for n in names)
    table = _read(file_version(data_file(root, ZERO_COST_JSON))) if needs_file else None
    if ids is None:
        row_ids = list(table.ids)  # type: ignore[union-attr]
    else:
        row_ids = [ids] if isinstance(ids, str) else list(ids)
        space = NB301()
        for i in row_ids:
            space.parse(i)  # ValueError naming the malformed part
    values = np.empty((len(row_ids), len(names)), dtype=np.float64)
    used: list[Objective] = []
    rows = None
    for j, name in enumerate(names):
        if name in extra:
            obj, mapping = extra[name]
            values[:, j] = [float(mapping[i]) if i in mapping else math.nan for i in row_ids]
            used.append(obj)
            continue
        if rows is None:
            rows = np.fromiter((table.row_of.get(i, -1) for i in row_ids), np.intp,  # type: ignore[union-attr]
                               count=len(row_ids))
        column = table.columns[_SPECS[name].key]  # type: ignore[union-attr]
        values[:, j] = np.where(rows >= 0, column[rows], math.nan)
        used.append(_SPECS[name].objective)
    return BenchmarkTable(SPACE, row_ids, used, values, str(root) if root is not None else None)
