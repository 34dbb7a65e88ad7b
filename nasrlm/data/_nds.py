"""NDS result files (Radosavovic et al. 2019, "On Network Design Spaces for Visual Recognition") as tables.

The NDS release (facebookresearch/nds, ``nds_data/<Space>.json``) is not shipped here; this reads its
published format, as NNI's ``nni/nas/benchmarks/nds/db_gen.py`` and the nas-without-training loaders read
it. A file is a JSON list of records, or ``{"top": [...], "mid": [...]}`` (both lists are read). A
record is one training run::

    {"net": {...}, "optim": {"base_lr", "wd", "max_ep", ...}, "rng_seed": 1,
     "train_ep_top1": [...], "train_ep_loss": [...], "test_ep_top1": [...],   # per epoch; top-1 ERROR %
     "params": 812345, "flops": 123456789, "iter_time": 0.1, "prec_time": {...}, ...}

``net`` is a cell space's ``{"genotype": {"normal": [[op, input], ...], "normal_concat": [...],
"reduce": ..., "reduce_concat": ...}, "width", "depth", "aux", "drop_prob"}`` or an AnyNet space's
``{"block_type", "ds", "ws", "ss", "bot_muls", "num_gs"}``; the space's ``from_nds_net`` turns it into an
id and refuses configs it would not build exactly (wrong concat, strides, stem, block type).

File names say the space: ``<Space>.json`` plus the variants ``_fix-w-d`` (NDS fixed width and depth),
``_reruns`` and ``_rng1..3`` (repeated runs), each read into the space itself; a final ``_in`` says
ImageNet networks, read into the ``_in`` space (``DARTS_in.json`` and ``DARTS_fix-w-d_in.json`` ->
``nds_darts_in``). ``_lr-wd`` files (learning rate and weight decay swept, so accuracy is not a function
of the architecture) are refused. ``nasrlm data`` reads ``<Space>.json`` / ``<Space>_in.json``; the
variants are read by naming the file (:func:`load_nds_json`, public as ``nasrlm.data.load_nds_json``).
Several records of one architecture (reruns, seeds) become one row: the mean of each column, with
``n_runs`` saying how many records it averages.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from nasrlm.data._catalogue import Catalogue, Column, Query, Rows
from nasrlm.data._datadir import DataFileError, data_file, file_version
from nasrlm.data._loader_utils import check_names
from nasrlm.data._table import BenchmarkTable, Objective
from search_spaces._dataset import CIFAR10, IMAGENET
from search_spaces.anynet import ANYNET_SPACES
from search_spaces.nds import NDS_CELL_SPACES

_CIFAR_FILES = {
    "nds_amoeba": "Amoeba", "nds_darts": "DARTS", "nds_enas": "ENAS", "nds_nasnet": "NASNet",
    "nds_pnas": "PNAS", "nds_resnet": "ResNet", "nds_resnext-a": "ResNeXt-A", "nds_resnext-b": "ResNeXt-B",
    "nds_vanilla": "Vanilla",
}
#: nasrlm space -> NDS file stem (``nds_data/<stem>.json``); ImageNet spaces and files end in ``_in``.
NDS_FILES: Mapping[str, str] = MappingProxyType({
    **_CIFAR_FILES,
    **{space + IMAGENET.suffix: stem + IMAGENET.suffix for space, stem in _CIFAR_FILES.items()},
})
NDS_DIR = "nds_data"
_SPACES: dict[str, Callable[[], Any]] = {**NDS_CELL_SPACES, **ANYNET_SPACES}
_SAME_NETWORK_VARIANTS = ("fix-w-d", "reruns", "rng1", "rng2", "rng3")


def _last_acc(key: str) -> Callable[[Mapping[str, Any]], float]:
    return lambda r: 100.0 - float(r[key][-1]) if r.get(key) else math.nan


def _best_acc(key: str) -> Callable[[Mapping[str, Any]], float]:
    return lambda r: 100.0 - float(min(r[key])) if r.get(key) else math.nan


def _millions(key: str) -> Callable[[Mapping[str, Any]], float]:
    return lambda r: float(r[key]) / 1e6 if r.get(key) is not None else math.nan


def _objectives(dataset: str) -> dict[str, tuple[Objective, Callable[[Mapping[str, Any]], float]]]:
    """Objective name -> (objective, record -> value), for the networks of ``dataset`` (its name)."""
    src = "NDS json field {} (data dir nds_data/<Space>.json; facebookresearch/nds)"
    out = [
        (Objective("acc", "%", f"{dataset} top-1 test accuracy after the last epoch, NDS training",
                   src.format("100 - test_ep_top1[-1]"), True), _last_acc("test_ep_top1")),
        (Objective("best_acc", "%", f"{dataset} top-1 test accuracy of the best epoch, NDS training",
                   src.format("100 - min(test_ep_top1)"), True), _best_acc("test_ep_top1")),
        (Objective("train_acc", "%", f"{dataset} top-1 training accuracy after the last epoch",
                   src.format("100 - train_ep_top1[-1]"), True), _last_acc("train_ep_top1")),
        (Objective("params_m", "M", "parameters, millions, as NDS (pycls) counted them; may include an "
                   "auxiliary head where the record's net has aux on", src.format("params"), False),
         _millions("params")),
        (Objective("flops_m", "MFLOPs", "FLOPs, millions, as NDS (pycls) counted them",
                   src.format("flops"), False), _millions("flops")),
        (Objective("n_runs", "", "number of records (training runs) averaged into this row",
                   "count of records per architecture", True), lambda r: 1.0),
    ]
    return {obj.name: (obj, value) for obj, value in out}


#: dataset name -> objective name -> (objective, record -> value).
_RECORD_VALUES = {d.name: _objectives(d.name) for d in (CIFAR10, IMAGENET)}
#: every NDS objective of a CIFAR-10 space, keyed by name.
NDS_OBJECTIVES: Mapping[str, Objective] = MappingProxyType(
    {n: o for n, (o, _) in _RECORD_VALUES[CIFAR10.name].items()})
#: the same columns for an ImageNet (``_in``) space, described as ImageNet's.
NDS_IMAGENET_OBJECTIVES: Mapping[str, Objective] = MappingProxyType(
    {n: o for n, (o, _) in _RECORD_VALUES[IMAGENET.name].items()})


def _objectives_of(space: str) -> Mapping[str, Objective]:
    return NDS_IMAGENET_OBJECTIVES if _SPACES[space].dataset == IMAGENET else NDS_OBJECTIVES


def nds_space_of(path: str | os.PathLike[str]) -> str:
    """The nasrlm space a published NDS file holds, from its name (``DARTS_fix-w-d.json`` -> nds_darts,
    ``DARTS_fix-w-d_in.json`` -> nds_darts_in)."""
    stem = Path(path).name.removesuffix(".json")
    imagenet = stem.endswith(IMAGENET.suffix)
    base, _, variant = stem.removesuffix(IMAGENET.suffix).partition("_")
    if variant and variant not in _SAME_NETWORK_VARIANTS:
        raise ValueError(f"NDS file {stem!r}: variant {variant!r} is not supported (supported: none, "
                         f"{', '.join(_SAME_NETWORK_VARIANTS)}; lr-wd sweeps vary the training, not only the "
                         "network)")
    base += IMAGENET.suffix if imagenet else ""
    spaces = [name for name, file in NDS_FILES.items() if file == base]
    if not spaces:
        raise ValueError(f"no nasrlm space for NDS file {stem!r}; known: {', '.join(NDS_FILES.values())}")
    return spaces[0]


def read_nds_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a published NDS json file (a list, or the ``top`` and ``mid`` lists of a dict)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict) and "top" in data and "mid" in data:
        data = [*data["top"], *data["mid"]]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataFileError(f"{path}: not an NDS file (expected a list of records or {{'top': [...], 'mid': "
                            "[...]}})")
    return data


@functools.lru_cache(maxsize=8)
def _read(version: tuple[str, int, int], space_name: str) -> Rows:
    """Records grouped by architecture (first-appearance order), each column the mean of its records."""
    path = version[0]
    space = _SPACES[space_name]()
    records = read_nds_records(path)
    ids: list[str] = []
    for k, record in enumerate(records):
        if not record.get("test_ep_top1"):
            raise DataFileError(f"{path}: record {k} has no test_ep_top1 (per-epoch test error)")
        try:
            ids.append(space.arch_id(space.from_nds_net(record["net"])))
        except (KeyError, ValueError) as err:
            raise DataFileError(f"{path}: record {k}: {err}") from None
    order = list(dict.fromkeys(ids))
    row_of = {i: r for r, i in enumerate(order)}
    rows = np.fromiter((row_of[i] for i in ids), np.intp, count=len(ids))
    counts = np.bincount(rows, minlength=len(order)).astype(np.float64)
    columns = {}
    for name, (_, value) in _RECORD_VALUES[space.dataset.name].items():
        values = np.array([value(r) for r in records], dtype=np.float64)
        sums = np.bincount(rows, weights=np.nan_to_num(values), minlength=len(order))
        present = np.bincount(rows, weights=~np.isnan(values), minlength=len(order))
        with np.errstate(invalid="ignore", divide="ignore"):
            column = counts if name == "n_runs" else np.where(present > 0, sums / present, math.nan)
        column.flags.writeable = False
        columns[name] = column
    return Rows(tuple(order), row_of, columns)


def load_nds_json(path: str | os.PathLike[str], space: str | None = None,
                  objectives: Sequence[str] | None = None) -> BenchmarkTable:
    """All rows of one published NDS file, keyed by canonical ids of ``space`` (default: from the name).

    ``objectives`` defaults to every column of :data:`NDS_OBJECTIVES`.
    """
    path = Path(path)
    space = space or nds_space_of(path)
    if space not in _SPACES:
        raise ValueError(f"{space!r} is not an NDS space; expected one of {', '.join(NDS_FILES)}")
    known = _objectives_of(space)
    names = list(objectives) if objectives is not None else list(known)
    check_names(names, known, {}, "NDS")
    table = _read(file_version(path), space)
    values = np.column_stack([table.columns[n] for n in names]) if names else None
    return BenchmarkTable(space, list(table.keys), [known[n] for n in names],
                          values if values is not None else np.empty((len(table.keys), 0)), str(path.parent))


def _rows(query: Query) -> list[str]:
    """The file's architectures, or ``ids`` checked to parse (after reading the file, where a built-in
    objective needs it)."""
    relpath = _relpath(query.catalogue.space)
    table: Rows | None = query.source(relpath) if query.ids is None or query.names else None
    if query.ids is None:
        assert table is not None
        return list(table.keys)
    checker = _SPACES[query.catalogue.space]()
    for i in query.ids:
        checker.parse(i)  # ValueError naming the malformed part
    return query.ids


def _relpath(space: str) -> str:
    return f"{NDS_DIR}/{NDS_FILES[space]}.json"


def _read_source(space: str, root: Path | None, relpath: str) -> Rows:
    return _read(file_version(data_file(root, relpath)), space)


def _catalogue(space: str) -> Catalogue:
    relpath = _relpath(space)
    columns = {name: Column(obj, relpath, name) for name, obj in _objectives_of(space).items()}
    return Catalogue(space, "NDS", columns, functools.partial(_read_source, space), _rows)


#: one catalogue per NDS space: the same columns, each from its own file.
_CATALOGUES = {space: _catalogue(space) for space in NDS_FILES}


def available_nds_objectives(data_dir: str | os.PathLike[str] | None = None, *,
                             space: str) -> list[Objective]:
    """Objectives :func:`load_nds` serves for ``space`` from ``data_dir`` (none without its NDS file)."""
    return _CATALOGUES[space].available(data_dir)


def load_nds(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
             ids: Sequence[str] | None = None, *,
             extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None,
             space: str) -> BenchmarkTable:
    """Table of ``objectives`` for ``space`` from ``<data_dir>/nds_data/<Space>.json`` (the loader that
    ``TABLE_LOADERS`` holds, with ``space`` bound). ``ids`` picks rows (NaN where the file lacks one);
    ``extra`` adds columns as for the other tables."""
    return _CATALOGUES[space].load(objectives, data_dir, ids, extra=extra)


#: one ``TABLE_LOADERS`` entry per NDS space: (loader, lister), each with the space bound.
NDS_TABLE_LOADERS: dict[str, tuple[Callable[..., BenchmarkTable], Callable[..., list[Objective]]]] = {
    name: (functools.partial(load_nds, space=name), functools.partial(available_nds_objectives, space=name))
    for name in NDS_FILES
}
