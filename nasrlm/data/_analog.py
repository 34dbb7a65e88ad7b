"""NAS-Bench-201 accuracies shipped by the ``analog-nasbench`` PyPI package (AnalogNAS-Bench).

This is the one accuracy table every user has after ``pip install``, so nasrlm can evaluate NB201
searches without any downloaded benchmark. The package's file ``analognasbench/data.anb`` is a pickle
of the package's own classes, and ``import analognasbench`` itself fails on current setuptools (it
imports ``pkg_resources``). We therefore locate the file with :func:`importlib.util.find_spec` (which
does not execute the package) and read it with a restricted unpickler that resolves only the two
record classes, to local inert stand-ins: no code from the package or the pickle ever runs.

Record layout (verified on analog-nasbench 0.1.3): a ``dict`` mapping a 6-tuple of op codes to an
``Architecture`` whose ``__dict__`` holds ``architecture`` (the same tuple), ``baseline_accuracy``,
``ptq_accuracy``, ``qat_accuracy``, ``noisy_accuracy``, ``analog_accuracy`` (floats, already in percent:
baseline ranges 10.0–94.07) and eight ``*_drift_*`` ``DriftMeasurement`` objects (``value``,
``uncertainty``). The pickle references no other global (no numpy, no pandas).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import pickle
from pathlib import Path
from typing import Any

from nasrlm.data._datadir import DataFileError
from nasrlm.errors import NasrlmError
from search_spaces.nasbench201 import EDGES, NasBench201, NB201Arch

_NB201 = NasBench201()

# --- tuple -> arch string ------------------------------------------------------------------------
# The package's tuples use neither NB201's op order nor its edge order. The mapping below was derived
# empirically (tests/nasrlm/data/test_analog.py::test_mapping_is_the_best_of_all_permutations redoes it):
# every one of the 5! op-code permutations x 6! position permutations maps the 15,625 tuples
# bijectively onto the 15,625 arch strings (the tuples are the full product {0..4}^6), so bijectivity
# cannot decide; the Spearman correlation of baseline_accuracy with the 200-epoch cifar10_test_acc of
# NAS-Bench-201 does. Best three of the 86,400 candidates:
#   0.9910  ops (skip, none, 3x3, 1x1, pool), positions (0->1, 0->2, 0->3, 1->2, 1->3, 2->3)   <- used
#   0.9688  same ops, positions (2->3, 1->3, 0->3, 1->2, 0->2, 0->1): the mirrored cell (reverse
#           every edge and rename node k -> 3-k), a different network of very similar accuracy
#   0.9051  same ops, 0->2 and 2->3 swapped
# The median candidate scores ~0.00. In words: op codes 0..4 = skip_connect, none, nor_conv_3x3,
# nor_conv_1x1, avg_pool_3x3, and tuple positions list the edges sorted by (source, target), whereas arch
# strings group them by target node.

#: op name of each analog-nasbench op code.
ANALOG_OPS: tuple[str, ...] = ("skip_connect", "none", "nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3")
#: (source, target) edge of each analog-nasbench tuple position.
ANALOG_EDGES: tuple[tuple[int, int], ...] = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
#: for each arch-string edge, the tuple position that holds its op.
_POSITION_OF_STRING_EDGE: tuple[int, ...] = tuple(ANALOG_EDGES.index(e) for e in EDGES)

#: float metrics of a record that :func:`load_analog_nasbench` can return (all CIFAR-10 accuracy, %).
ANALOG_METRICS: tuple[str, ...] = ("baseline_accuracy", "ptq_accuracy", "qat_accuracy", "noisy_accuracy",
                                   "analog_accuracy")

_INSTALL_HINT = "pip install analog-nasbench"


class AnalogNasBenchNotFoundError(NasrlmError, ModuleNotFoundError):
    """analog-nasbench (or its data file) is not installed."""


class _Inert:
    """Stand-in for a pickled record class: no methods, so NEWOBJ makes a bare instance and BUILD can only
    fill its ``__dict__`` from a dict state (pickle's C code rejects any other state)."""


class _Architecture(_Inert):
    """Stand-in for ``analognasbench.data.Architecture``."""


class _DriftMeasurement(_Inert):
    """Stand-in for ``analognasbench.data.DriftMeasurement``."""


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the analog-nasbench record classes, to inert local stand-ins.

    Any other global (``os.system``, ``builtins.eval``, even harmless ones) raises
    :class:`pickle.UnpicklingError`: a data file has no business referencing code.
    """

    ALLOWED: dict[tuple[str, str], type] = {
        ("analognasbench.data", "Architecture"): _Architecture,
        ("analognasbench.data", "DriftMeasurement"): _DriftMeasurement,
    }

    def find_class(self, module: str, name: str) -> Any:
        try:
            return self.ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from a data pickle "
                                         f"(only {', '.join(f'{m}.{n}' for m, n in self.ALLOWED)} "
                                         f"are allowed)") from None


def restricted_loads(data: bytes) -> Any:
    """Unpickle ``data`` with :class:`RestrictedUnpickler`."""
    return RestrictedUnpickler(io.BytesIO(data)).load()


def analog_data_path() -> Path:
    """Path of ``analognasbench/data.anb``, found without importing (and so without running) the package."""
    spec = importlib.util.find_spec("analognasbench")
    if spec is None or not spec.submodule_search_locations:
        raise AnalogNasBenchNotFoundError(f"the analog-nasbench package is not installed; {_INSTALL_HINT}")
    path = Path(next(iter(spec.submodule_search_locations))) / "data.anb"
    if not path.is_file():
        raise AnalogNasBenchNotFoundError(f"analog-nasbench is installed but its data file {path} is "
                                          f"missing; reinstall it ({_INSTALL_HINT})")
    return path


@functools.cache
def _records() -> dict[tuple[int, ...], _Architecture]:
    """All records keyed by their op-code tuple, validated (cached: ~0.3 s to read)."""
    path = analog_data_path()
    data = restricted_loads(path.read_bytes())
    if not isinstance(data, dict):
        raise DataFileError(f"{path}: expected a dict of records, got {type(data).__name__}")
    for key, rec in data.items():
        if not (isinstance(key, tuple) and len(key) == 6
                and all(isinstance(c, int) and 0 <= c < len(ANALOG_OPS) for c in key)):
            raise DataFileError(f"{path}: unexpected architecture key {key!r}")
        if not isinstance(rec, _Architecture) or getattr(rec, "architecture", None) != key:
            raise DataFileError(f"{path}: record for {key!r} is malformed")
    return data


def analog_tuple_to_arch_str(codes: tuple[int, ...]) -> str:
    """Canonical NB201 arch string of an analog-nasbench op-code tuple (see the mapping above)."""
    return _NB201.arch_id(NB201Arch(tuple(ANALOG_OPS[codes[p]] for p in _POSITION_OF_STRING_EDGE)))


@functools.cache
def _load(metric: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, rec in _records().items():
        value = getattr(rec, metric, None)
        if not isinstance(value, (int, float)):
            raise ValueError(f"analog-nasbench record {key!r} has no numeric {metric}: {value!r}")
        out[analog_tuple_to_arch_str(key)] = float(value)
    if len(out) != len(_records()):
        raise ValueError("analog-nasbench: the op-code mapping is not one-to-one (two tuples, one arch)")
    return out


def load_analog_nasbench(metric: str = "baseline_accuracy") -> dict[str, float]:
    """CIFAR-10 accuracy (%) of all 15,625 NB201 cells from analog-nasbench, keyed by NB201 arch string.

    ``baseline_accuracy`` is the ordinary (digital, full-precision) model; the package stores it in
    percent already, so no conversion is applied. ``metric`` may name another float field (see
    :data:`ANALOG_METRICS`). Cached per process; returns a fresh dict each call so callers may mutate it.
    """
    if metric not in ANALOG_METRICS:
        raise ValueError(f"unknown analog-nasbench metric {metric!r}; "
                         f"expected one of {', '.join(ANALOG_METRICS)}")
    return dict(_load(metric))
