"""OFA-MobileNetV3 (``ofa_mbv3``) columns: HELP's GPU latencies and a labelled accuracy SURROGATE.

Two files of the user's data directory (formats in its README):

* ``ofa/latency_ms.csv``: 5,000 subnets of ``ofa_mbv3_d234_e346_k357_w1.2`` as HELP sampled them
  (``ks``/``e``/``d``/``r``) with latencies in milliseconds on four GPUs at batch 1, 32 and 64;
* ``ofa/acc_predictor_mbv3.npz``: OFA's own ImageNet accuracy predictor (``ofa/tutorial/
  accuracy_predictor.py``), an MLP 128-400-400-400-1 with ReLUs. ``acc_surrogate`` is its output,
  not a measurement, and every description says so.

The predictor's input is OFA's ``spec2feats``: 60 kernel features (3 per supernet layer, kernel 3/5/7
→ 0/1/2), 60 expand features (expand 3/4/6 → 0/1/2), all zero for layers beyond their stage's depth,
then one of 8 resolution features at ``(r - 112) // 16``. Only resolutions 160–224 were trained: the
first-layer weights of the features for 112–159 (indices 0–2 of the 8) are still inside their
uniform-initialisation bound ±1/√128, and OFA's tutorial searches r ∈ {160, 176, 192, 208, 224}. So
``acc_surrogate`` is NaN below r = 160, and within 160–224 the resolution counts only in 16-px
steps (r = 172 scores as 160).
"""

from __future__ import annotations

import csv
import functools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from nasrlm.data._catalogue import Catalogue, Column, Query, Rows
from nasrlm.data._datadir import DataFileError, data_file, file_version
from nasrlm.data._table import BenchmarkTable, Objective
from search_spaces.ofa import EXPANDS, KERNELS, OFAMBv3Arch, OFAMobileNetV3

SPACE = OFAMobileNetV3.name
LATENCY_CSV = "ofa/latency_ms.csv"
PREDICTOR_NPZ = "ofa/acc_predictor_mbv3.npz"
HELP_SOURCE = "HELP, HayeonLee/HELP data/ofa"
PREDICTOR_SOURCE = "OFA accuracy predictor, mit-han-lab/once-for-all ofa/tutorial/accuracy_predictor.py"

_GPUS = {"2080ti": "NVIDIA GeForce RTX 2080 Ti", "titan_rtx": "NVIDIA Titan RTX",
         "titan_xp": "NVIDIA Titan Xp", "v100": "NVIDIA Tesla V100"}
_BATCHES = (1, 32, 64)
#: The predictor's layers (``nn.Sequential`` indices) and their weight shapes.
_PREDICTOR_LAYERS = {0: (400, 128), 2: (400, 400), 4: (400, 400), 6: (1, 400)}
#: Lowest resolution the predictor was trained on (see the module docstring).
MIN_TRAINED_RESOLUTION = 160


def _surrogate(query: Query) -> np.ndarray:
    """``acc_surrogate`` of every row: the predictor on the archs the row hook parsed (or HELP's)."""
    predictor: OFAAccuracyPredictor = query.source(PREDICTOR_NPZ)
    return 100.0 * predictor.predict(query.state["archs"])


def _columns() -> dict[str, Column]:
    columns = []
    for gpu, gpu_name in _GPUS.items():
        for batch in _BATCHES:
            name = f"{gpu}_{batch}"
            desc = (f"latency of the OFA-MobileNetV3 (w1.2) subnet at its own resolution on {gpu_name}, "
                    f"batch {batch}")
            source = f"{LATENCY_CSV} column {name} (data dir; {HELP_SOURCE})"
            columns.append(Column(Objective(name, "ms", desc, source, False), LATENCY_CSV, name))
    columns.append(Column(Objective(
        "acc_surrogate", "%", "SURROGATE ImageNet top-1 accuracy: OFA's accuracy predictor (MLP on one-hot "
        "kernel/expand/resolution), not measured; NaN for r < 160, outside its trained resolutions",
        f"{PREDICTOR_NPZ} (data dir; {PREDICTOR_SOURCE})", True), PREDICTOR_NPZ, None, compute=_surrogate))
    return {c.objective.name: c for c in columns}


def _rows(query: Query) -> list[str]:
    """HELP's 5,000 subnets in file order, or ``ids`` parsed (kept in ``query.state`` for the predictor)."""
    if query.ids is None:
        latency: _Latency = query.source(LATENCY_CSV)
        query.state["archs"] = list(latency.archs)
        return list(latency.keys)
    query.state["archs"] = _parse_ids(query.ids)
    return query.ids


def _read(root: Path | None, relpath: str) -> _Latency | OFAAccuracyPredictor:
    if relpath == PREDICTOR_NPZ:
        return _predictor_cached(file_version(data_file(root, PREDICTOR_NPZ)))
    return _latency_cached(file_version(data_file(root, LATENCY_CSV)))


CATALOGUE = Catalogue(SPACE, "ofa_mbv3", _columns(), _read, _rows)
#: every ``ofa_mbv3`` objective, keyed by name.
OFA_MBV3_OBJECTIVES: Mapping[str, Objective] = CATALOGUE.objectives


# --- the accuracy predictor -----------------------------------------------------------------------------
def predictor_features(arch: OFAMBv3Arch) -> np.ndarray:
    """OFA's ``spec2feats``: the 128 one-hot inputs of the accuracy predictor for ``arch``."""
    x = np.zeros(128, dtype=np.float64)
    for i, (k, e) in enumerate(zip(arch.ks, arch.e, strict=True)):
        if k:  # 0 marks a layer beyond its stage's depth: no feature set
            x[3 * i + KERNELS.index(k)] = 1.0
        if e:
            x[60 + 3 * i + EXPANDS.index(e)] = 1.0
    x[120 + (arch.r - 112) // 16] = 1.0
    return x


class OFAAccuracyPredictor:
    """OFA's MobileNetV3 accuracy predictor in numpy (weights from ``acc_predictor_mbv3.npz``)."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        self.layers: list[tuple[np.ndarray, np.ndarray]] = []
        for index, shape in _PREDICTOR_LAYERS.items():
            w, b = weights.get(f"{index}.weight"), weights.get(f"{index}.bias")
            if w is None or b is None or tuple(w.shape) != shape or tuple(b.shape) != shape[:1]:
                raise ValueError(f"accuracy predictor layer {index}: expected weight {shape} and bias "
                                 f"{shape[:1]}, got {None if w is None else w.shape} and "
                                 f"{None if b is None else b.shape}")
            self.layers.append((np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> OFAAccuracyPredictor:
        with np.load(path, allow_pickle=False) as npz:
            return cls({k: npz[k] for k in npz.files})

    def predict_features(self, features: np.ndarray) -> np.ndarray:
        """Predicted top-1 accuracy (a fraction) for rows of :func:`predictor_features`."""
        h = np.atleast_2d(np.asarray(features, dtype=np.float64))
        for i, (w, b) in enumerate(self.layers):
            h = h @ w.T + b
            if i < len(self.layers) - 1:
                h = np.maximum(h, 0.0)
        return h[:, 0]

    def predict(self, archs: Sequence[OFAMBv3Arch]) -> np.ndarray:
        """Predicted top-1 accuracy (a fraction) of each arch; NaN where r < 160 (untrained inputs)."""
        if not archs:
            return np.empty(0)
        out = self.predict_features(np.stack([predictor_features(a) for a in archs]))
        out[[a.r < MIN_TRAINED_RESOLUTION for a in archs]] = math.nan
        return out


@functools.lru_cache(maxsize=4)
def _predictor_cached(version: tuple[str, int, int]) -> OFAAccuracyPredictor:
    return OFAAccuracyPredictor.load(version[0])


# --- HELP's latency table -------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Latency(Rows):
    archs: tuple[OFAMBv3Arch, ...] = ()  # of each row


@functools.lru_cache(maxsize=4)
def _latency_cached(version: tuple[str, int, int]) -> _Latency:
    """HELP's rows as canonical ids (every row must parse; no two may be the same network)."""
    space = OFAMobileNetV3()
    names = CATALOGUE.fields(LATENCY_CSV)
    with open(version[0], newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in ("ks", "e", "d", "r", *names) if c not in (reader.fieldnames or [])]
        if missing:
            raise DataFileError(f"{LATENCY_CSV}: missing column(s) {', '.join(missing)}")
        rows = list(reader)
    archs = []
    for i, row in enumerate(rows):
        try:
            archs.append(OFAMBv3Arch.from_help_row(row))
        except ValueError as err:
            raise DataFileError(f"{LATENCY_CSV}: line {i + 2}: {err}") from None
    ids = tuple(space.arch_id(a) for a in archs)
    row_of = {arch_id: i for i, arch_id in enumerate(ids)}
    if len(row_of) != len(ids):
        raise DataFileError(f"{LATENCY_CSV}: two rows describe the same network")
    columns = {}
    for name in names:
        col = np.array([float(row[name]) if row[name] else math.nan for row in rows], dtype=np.float64)
        col.flags.writeable = False
        columns[name] = col
    return _Latency(ids, row_of, columns, tuple(archs))


def available_ofa_mbv3_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_ofa_mbv3` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    return CATALOGUE.available(data_dir)


def load_ofa_mbv3(objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
                  ids: Sequence[str] | None = None, *,
                  extra: Mapping[str, tuple[Objective, Mapping[str, float]]] | None = None) -> BenchmarkTable:
    """Table of the named ``ofa_mbv3`` objectives.

    Rows: ``ids`` if given (canonical ``ofa_mbv3`` ids; latencies are NaN for networks HELP did not
    measure, ``acc_surrogate`` is computed for any), else HELP's 5,000 subnets in file order.
    ``extra`` adds further columns by name (e.g. latencies measured by nasrlm), as for NB201.

    Raises :class:`~nasrlm.data.UnknownObjectiveError` for an unknown name and
    :class:`~nasrlm.data.DataFileNotFoundError` where a needed file is missing.
    """
    return CATALOGUE.load(objectives, data_dir, ids, extra=extra)


def _parse_ids(ids: Sequence[str]) -> list[OFAMBv3Arch]:
    """Each id parsed by the ``ofa_mbv3`` space (a ValueError names the malformed part)."""
    space = OFAMobileNetV3()
    return [cast(OFAMBv3Arch, space.parse(arch_id)) for arch_id in ids]
