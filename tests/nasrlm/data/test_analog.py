"""analog-nasbench: restricted reading, and the op/edge mapping onto NB201 arch strings."""

from __future__ import annotations

import csv
import itertools
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr

from nasrlm.data import _analog, load_analog_nasbench

REPO_ROOT = Path(__file__).resolve().parents[3]
NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
ARCH_RE = re.compile(r"^\|({o})~0\|\+\|({o})~0\|({o})~1\|\+\|({o})~0\|({o})~1\|({o})~2\|$".format(
    o="|".join(NB201_OPS)))


def _parse(arch: str) -> tuple[int, ...]:
    """Op indices (NB201_OPS order) of an arch string, in arch-string edge order."""
    m = ARCH_RE.match(arch)
    assert m, arch
    return tuple(NB201_OPS.index(op) for op in m.groups())


def _c10_test_acc(data_dir: Path) -> dict[str, float]:
    path = data_dir / "nb201" / "cifar10_200ep.csv"
    if not path.is_file():
        pytest.skip(f"benchmark data not found: {path}")
    with path.open(newline="") as f:
        return {r["arch_str"]: float(r["cifar10_test_acc"]) for r in csv.DictReader(f)}


def test_all_15625_cells_map_to_distinct_valid_arch_strings() -> None:
    acc = load_analog_nasbench()
    assert len(acc) == 15625
    assert all(ARCH_RE.match(a) for a in acc)
    assert len({_parse(a) for a in acc}) == 15625


def test_values_are_percent_with_known_anchors() -> None:
    acc = load_analog_nasbench()
    values = np.array(list(acc.values()))
    assert values.min() >= 10.0 and 90.0 < values.max() < 100.0
    # a cell of only `none` edges passes nothing to its output: chance accuracy on CIFAR-10
    assert acc["|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"] == pytest.approx(10.0)
    # the package's first record, tuple (0,0,0,0,0,0): op code 0 is skip_connect
    all_skip = ("|skip_connect~0|+|skip_connect~0|skip_connect~1|"
                "+|skip_connect~0|skip_connect~1|skip_connect~2|")
    assert acc[all_skip] == pytest.approx(60.7836)
    assert _analog._records()[(0,) * 6].baseline_accuracy == pytest.approx(60.7836)


def test_tuple_positions_are_edges_sorted_by_source() -> None:
    # one nor_conv_3x3 (code 2) among `none`s (code 1): it must land on the edge documented for its position
    for pos, (src, dst) in enumerate(_analog.ANALOG_EDGES):
        codes = [1] * 6
        codes[pos] = 2
        arch = _analog.analog_tuple_to_arch_str(tuple(codes))
        assert arch.count("nor_conv_3x3") == 1
        node_inputs = arch[1:-1].split("|+|")[dst - 1].split("|")
        assert f"nor_conv_3x3~{src}" in node_inputs


def test_result_is_a_fresh_copy() -> None:
    a = load_analog_nasbench()
    a.clear()
    assert len(load_analog_nasbench()) == 15625


def test_other_metrics_and_unknown_metric() -> None:
    ptq = load_analog_nasbench("ptq_accuracy")
    assert len(ptq) == 15625 and ptq != load_analog_nasbench()
    with pytest.raises(ValueError, match="baseline_accuracy"):
        load_analog_nasbench("architecture")


def test_spearman_with_nb201_200ep_test_accuracy(data_dir: Path) -> None:
    ref = _c10_test_acc(data_dir)
    acc = load_analog_nasbench()
    assert acc.keys() == ref.keys()
    keys = sorted(ref)
    rho = spearmanr([acc[k] for k in keys], [ref[k] for k in keys]).statistic
    assert rho >= 0.99


def test_mapping_is_the_best_of_all_permutations(data_dir: Path) -> None:
    """Re-derive the hard-coded mapping: all 5! op-code x 6! position permutations, scored by Spearman."""
    ref = _c10_test_acc(data_dir)
    a = np.empty((5,) * 6)  # NB201 accuracy indexed by op (NB201_OPS order) of each arch-string edge
    for arch, v in ref.items():
        a[_parse(arch)] = v
    b = np.empty((5,) * 6)  # analog accuracy indexed by op code of each tuple position
    for codes, rec in _analog._records().items():
        b[codes] = rec.baseline_accuracy

    def standardised_ranks(x: np.ndarray) -> np.ndarray:
        r = rankdata(x.ravel()).reshape(x.shape)
        r -= r.mean()
        return r / np.sqrt((r**2).sum())

    ra, rb = standardised_ranks(a), standardised_ranks(b)
    # Candidate (op_of_code, pos): code c means NB201 op op_of_code[c]; arch-string edge e is tuple
    # position pos[e]. Spearman = <ra re-indexed into tuple space, rb> = <ra[op_of_code...], rb^T(pos)>.
    positions = list(itertools.permutations(range(6)))
    rb_t = np.stack([rb.transpose(p).ravel() for p in positions])  # (720, 15625)
    scores = []
    for op_of_code in itertools.permutations(range(5)):
        ix = np.array(op_of_code)
        ra_codes = ra[np.ix_(ix, ix, ix, ix, ix, ix)].ravel()
        for pos, s in zip(positions, rb_t @ ra_codes, strict=True):
            scores.append((float(s), op_of_code, pos))
    scores.sort(reverse=True)
    best, second, third = scores[:3]

    derived_ops = tuple(NB201_OPS[i] for i in best[1])
    string_edges = ((0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3))
    derived_edges = [None] * 6
    for e, p in enumerate(best[2]):
        derived_edges[p] = string_edges[e]
    assert derived_ops == _analog.ANALOG_OPS
    assert tuple(derived_edges) == _analog.ANALOG_EDGES
    # values quoted in _analog.py's comment
    assert [round(s[0], 4) for s in (best, second, third)] == [0.991, 0.9688, 0.9051]
    # the check against the direct implementation: same Spearman as the shipped mapping
    acc = load_analog_nasbench()
    keys = sorted(ref)
    assert spearmanr([acc[k] for k in keys], [ref[k] for k in keys]).statistic == pytest.approx(best[0])


def test_restricted_unpickler_refuses_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    # protocol-0 pickle that calls os.system(...) when loaded by a plain unpickler
    evil = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    with pytest.raises(pickle.UnpicklingError, match=r"os\.system"):
        _analog.restricted_loads(evil)
    assert not marker.exists()

    class Evil:
        def __reduce__(self):  # noqa: ANN204
            return (os.system, (f"touch {marker}",))

    with pytest.raises(pickle.UnpicklingError, match="system"):
        _analog.restricted_loads(pickle.dumps(Evil()))
    with pytest.raises(pickle.UnpicklingError, match=r"builtins\.eval"):
        _analog.restricted_loads(pickle.dumps(eval))
    assert not marker.exists()


def test_restricted_unpickler_reads_stand_ins() -> None:
    # Hand-assembled protocol-4 pickle of the package's record shape (the real classes cannot be pickled
    # here without importing the package): PROTO 4, FRAME, 'analognasbench.data', 'Architecture',
    # STACK_GLOBAL, EMPTY_TUPLE, NEWOBJ, EMPTY_DICT, 'baseline_accuracy', BINFLOAT 99.0, SETITEM, BUILD, STOP.
    data = (b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x13analognasbench.data\x8c\x0cArchitecture"
            b"\x93)\x81}\x8c\x11baseline_accuracy\x47\x40\x58\xc0\x00\x00\x00\x00\x00sb.")
    rec = _analog.restricted_loads(data)
    assert type(rec).__module__ == "nasrlm.data._analog"
    assert rec.baseline_accuracy == 99.0


def test_missing_package_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_analog.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModuleNotFoundError, match="pip install analog-nasbench"):
        _analog.analog_data_path()


def test_loading_runs_no_package_code_and_no_torch() -> None:
    code = ("import sys, nasrlm.data as d; assert len(d.load_analog_nasbench()) == 15625; "
            "bad = [m for m in ('analognasbench', 'torch', 'pandas', 'pkg_resources') if m in sys.modules]; "
            "assert not bad, bad")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
