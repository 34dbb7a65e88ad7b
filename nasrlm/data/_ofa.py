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
from types import MappingProxyType
from typing import cast

import numpy as np

from nasrlm.data._datadir import DataFileError, data_file, file_version, resolve_data_dir
from nasrlm.data._loader_utils import check_names, checked_extra
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


@dataclass(frozen=True)
class _Spec:
    objective: Objective
    file: str
    column: str | None  # None: computed by the predictor


def _catalogue() -> dict[str, _Spec]:
    specs = []
    for gpu, gpu_name in _GPUS.items():
        for batch in _BATCHES:
            name = f"{gpu}_{batch}"
            desc = (f"latency of the OFA-MobileNetV3 (w1.2) subnet at its own resolution on {gpu_name}, "
                    f"batch {batch}")
            source = f"{LATENCY_CSV} column {name} (data dir; {HELP_SOURCE})"
            specs.append(_Spec(Objective(name, "ms", desc, source, False), LATENCY_CSV, name))
    specs.append(_Spec(Objective(
        "acc_surrogate", "%", "SURROGATE ImageNet top-1 accuracy: OFA's accuracy predictor (MLP on one-hot "
        "kernel/expand/resolution), not measured; NaN for r < 160, outside its trained resolutions",
        f"{PREDICTOR_NPZ} (data dir; {PREDICTOR_SOURCE})", True), PREDICTOR_NPZ, None))
    return {s.objective.name: s for s in specs}


_SPECS = _catalogue()
#: every ``ofa_mbv3`` objective, keyed by name.
OFA_MBV3_OBJECTIVES: Mapping[str, Objective] = MappingProxyType({n: s.objective for n, s in _SPECS.items()})


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
class _Latency:
    ids: tuple[str, ...]
    archs: tuple[OFAMBv3Arch, ...]
    row_of: Mapping[str, int]
    columns: Mapping[str, np.ndarray]


@functools.lru_cache(maxsize=4)
def _latency_cached(version: tuple[str, int, int]) -> _Latency:
    """HELP's rows as canonical ids (every row must parse; no two may be the same network)."""
    space = OFAMobileNetV3()
    names = [n for n, s in _SPECS.items() if s.column is not None]
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
    return _Latency(ids, tuple(archs), row_of, columns)


def available_ofa_mbv3_objectives(data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Objectives :func:`load_ofa_mbv3` can serve from this data directory (``None``: ``$NASRLM_DATA``)."""
    root = resolve_data_dir(data_dir)
    if root is None:
        return []
    return [s.objective for s in _SPECS.values() if (root / s.file).is_file()]


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
    names = [objectives] if isinstance(objectives, str) else list(objectives)
    extra = checked_extra(extra, _SPECS, "ofa_mbv3")
    check_names(names, _SPECS, extra, "ofa_mbv3")

    root = resolve_data_dir(data_dir)
    latency: _Latency | None = None
    if ids is None:
        latency = _read_latency(root)
        row_ids, archs = list(latency.ids), list(latency.archs)
    else:
        row_ids = [ids] if isinstance(ids, str) else list(ids)
        archs = _parse_ids(row_ids)

    values = np.empty((len(row_ids), len(names)), dtype=np.float64)
    used: list[Objective] = []
    rows: np.ndarray | None = None
    for j, name in enumerate(names):
        if name in extra:
            obj, mapping = extra[name]
            values[:, j] = [float(mapping[i]) if i in mapping else math.nan for i in row_ids]
            used.append(obj)
            continue
        spec = _SPECS[name]
        if spec.column is None:
            predictor = _predictor_cached(file_version(data_file(root, PREDICTOR_NPZ)))
            values[:, j] = 100.0 * predictor.predict(archs)
        else:
            latency = latency or _read_latency(root)
            if rows is None:
                rows = np.fromiter((latency.row_of.get(i, -1) for i in row_ids), np.intp, count=len(row_ids))
            values[:, j] = np.where(rows >= 0, latency.columns[spec.column][rows], math.nan)
        used.append(spec.objective)
    return BenchmarkTable(SPACE, row_ids, used, values, str(root) if root is not None else None)


def _read_latency(root: Path | None) -> _Latency:
    return _latency_cached(file_version(data_file(root, LATENCY_CSV)))


def _parse_ids(ids: Sequence[str]) -> list[OFAMBv3Arch]:
    """Each id parsed by the ``ofa_mbv3`` space (a ValueError names the malformed part)."""
    space = OFAMobileNetV3()
    return [cast(OFAMBv3Arch, space.parse(arch_id)) for arch_id in ids]
