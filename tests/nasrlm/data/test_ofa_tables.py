"""OFA-MobileNetV3 table: HELP's latencies keyed by our canonical ids, and OFA's accuracy predictor (a
labelled surrogate) with its exact input encoding.

(Named ``test_ofa_tables.py``: ``tests/search_spaces/test_ofa.py`` holds the basename ``test_ofa``.)
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from nasrlm.cli import main
from nasrlm.data import (
    TABLE_LOADERS,
    BenchmarkTable,
    DataFileNotFoundError,
    Objective,
    UnknownObjectiveError,
    available_objectives,
    load_table,
)
from nasrlm.data import _ofa as ofa
from search_spaces import OFAMBv3Arch, OFAMobileNetV3

SPACE = OFAMobileNetV3()
LATENCIES = [f"{g}_{b}" for g in ("2080ti", "titan_rtx", "titan_xp", "v100") for b in (1, 32, 64)]
SMALLEST = "r224|" + "|".join(["k3e3-k3e3"] * 5)
LARGEST = "r224|" + "|".join(["-".join(["k7e6"] * 4)] * 5)
#: Subnets HELP found with OFA's predictor and then evaluated on ImageNet (HayeonLee/HELP
#: data/ofa/architecture_config/*/latency_*_accuracy_<top-1>.json): measured top-1 → (ks, e, d, r).
HELP_EVALUATED = {
    76.0: ([5, 3, 7, 3, 3, 3, 3, 3, 7, 7, 5, 3, 5, 5, 3, 3, 3, 3, 3, 5],
           [3, 3, 4, 6, 6, 6, 4, 3, 4, 4, 3, 6, 6, 4, 4, 4, 6, 6, 4, 3], [2, 3, 3, 3, 3], 176),
    77.9: ([5, 3, 5, 7, 3, 3, 3, 3, 5, 3, 3, 3, 7, 5, 3, 5, 3, 3, 3, 7],
           [3, 3, 4, 4, 4, 4, 4, 6, 4, 4, 3, 6, 4, 4, 4, 4, 6, 6, 6, 3], [2, 3, 4, 4, 3], 208),
    78.1: ([3, 3, 3, 3, 5, 7, 5, 7, 5, 7, 3, 7, 3, 7, 5, 7, 3, 3, 5, 7],
           [3, 4, 6, 3, 6, 4, 3, 3, 6, 6, 4, 4, 6, 4, 4, 6, 6, 6, 6, 4], [2, 2, 3, 3, 3], 224),
}


@pytest.fixture(scope="module")
def ofa_dir(data_dir: Path) -> Path:
    if not (data_dir / ofa.LATENCY_CSV).is_file() or not (data_dir / ofa.PREDICTOR_NPZ).is_file():
        pytest.skip(f"benchmark data not found: {data_dir / 'ofa'}")
    return data_dir


@pytest.fixture(scope="module")
def predictor(ofa_dir: Path) -> ofa.OFAAccuracyPredictor:
    return ofa.OFAAccuracyPredictor.load(ofa_dir / ofa.PREDICTOR_NPZ)


@pytest.fixture(scope="module")
def help_rows(ofa_dir: Path) -> list[dict[str, str]]:
    with open(ofa_dir / ofa.LATENCY_CSV, newline="") as f:
        return list(csv.DictReader(f))


# --- the predictor's input: OFA's spec2feats --------------------------------------------------------
def test_features_follow_spec2feats() -> None:
    """Kernel 3/5/7 → 0/1/2 and expand 3/4/6 → 0/1/2 in 3-wide slots per layer; zeros beyond a stage's
    depth; resolution one-hot at 120 + (r − 112) // 16."""
    ks = [3, 5, 7, 7] + [5] * 16
    e = [4, 6, 3, 3] + [3] * 16
    arch = OFAMBv3Arch.from_ofa(ks, e, [2, 4, 4, 4, 3], 176)
    x = ofa.predictor_features(arch)
    assert x.shape == (128,) and set(np.unique(x)) == {0.0, 1.0}
    assert list(np.flatnonzero(x[:12])) == [0, 4]  # layer 0 k3, layer 1 k5, layers 2-3 inactive
    assert list(np.flatnonzero(x[60:72])) == [1, 5]  # layer 0 e4, layer 1 e6
    assert x[3 * 19: 60].sum() == 0 and x[60 + 3 * 19: 120].sum() == 0  # stage 4 has depth 3
    assert list(np.flatnonzero(x[120:])) == [4]  # (176 - 112) // 16
    assert x.sum() == 2 * sum(arch.d) + 1
    buckets = {}
    for r in (128, 140, 144, 160, 172, 176, 208, 220, 224):
        features = ofa.predictor_features(OFAMBv3Arch.from_ofa(ks, e, [2] * 5, r))
        buckets[r] = int(np.flatnonzero(features[120:])[0])
    assert buckets == {128: 1, 140: 1, 144: 2, 160: 3, 172: 3, 176: 4, 208: 6, 220: 6, 224: 7}


def test_only_resolutions_from_160_were_trained(predictor: ofa.OFAAccuracyPredictor) -> None:
    """First-layer weights of the resolution features for 112–159 never left PyTorch's uniform
    initialisation bound 1/√128; those for 160–224 did. Hence NaN below 160."""
    w = predictor.layers[0][0]
    bound = 1 / math.sqrt(128)
    assert all(np.abs(w[:, 120 + k]).max() < bound for k in (0, 1, 2))
    assert all(np.abs(w[:, 120 + k]).max() > bound for k in (3, 4, 5, 6, 7))
    small = OFAMBv3Arch.from_ofa([3] * 20, [3] * 20, [2] * 5, 156)
    assert math.isnan(predictor.predict([small])[0])


def test_predictions_are_plausible(predictor: ofa.OFAAccuracyPredictor,
                                   help_rows: list[dict[str, str]]) -> None:
    archs = [OFAMBv3Arch.from_help_row(r) for r in help_rows]
    pred = predictor.predict(archs)
    trained = np.array([a.r >= 160 for a in archs])
    assert np.isnan(pred[~trained]).all() and np.isfinite(pred[trained]).all()
    assert pred[trained].min() > 0.74 and pred[trained].max() < 0.85 and 0.78 < pred[trained].mean() < 0.82
    # bigger kernels, expand ratios, depths and inputs each raise the prediction
    def one(k: int, e: int, d: int, r: int) -> float:
        return float(predictor.predict([OFAMBv3Arch.from_ofa([k] * 20, [e] * 20, [d] * 5, r)])[0])
    assert one(3, 4, 3, 192) < one(5, 4, 3, 192) < one(7, 4, 3, 192)
    assert one(5, 3, 3, 192) < one(5, 4, 3, 192) < one(5, 6, 3, 192)
    assert one(5, 4, 2, 192) < one(5, 4, 3, 192) < one(5, 4, 4, 192)
    assert one(5, 4, 3, 160) < one(5, 4, 3, 176) < one(5, 4, 3, 192) < one(5, 4, 3, 208) < one(5, 4, 3, 224)
    assert 0.75 < one(3, 3, 2, 160) < one(7, 6, 4, 224) < 0.84
    # HELP's ImageNet-evaluated subnets: predicted 4-5 points above measured, the 76.0 one lowest
    scored = {acc: float(predictor.predict([OFAMBv3Arch.from_ofa(*cfg)])[0]) * 100
              for acc, cfg in HELP_EVALUATED.items()}
    assert all(3 < scored[acc] - acc < 5 for acc in scored)
    assert scored[76.0] < min(scored[77.9], scored[78.1])


def test_predictor_refuses_wrong_weights() -> None:
    with pytest.raises(ValueError, match="layer 0: expected weight \\(400, 128\\)"):
        ofa.OFAAccuracyPredictor({"0.weight": np.zeros((400, 127)), "0.bias": np.zeros(400)})


# --- the table ----------------------------------------------------------------------------------------
def test_registered_and_listed(ofa_dir: Path) -> None:
    assert TABLE_LOADERS["ofa_mbv3"][0] is ofa.load_ofa_mbv3
    objectives = available_objectives("ofa_mbv3", ofa_dir)
    assert [o.name for o in objectives] == [*LATENCIES, "acc_surrogate"]
    assert all(o.unit == "ms" and not o.higher_is_better for o in objectives[:12])
    surrogate = objectives[-1]
    assert surrogate.unit == "%" and surrogate.higher_is_better
    assert "SURROGATE" in surrogate.description and "not measured" in surrogate.description
    assert "batch 64" in objectives[2].description and "RTX 2080 Ti" in objectives[2].description


def test_table_keys_help_rows_by_canonical_id(ofa_dir: Path, help_rows: list[dict[str, str]]) -> None:
    table = load_table("ofa_mbv3", [*LATENCIES, "acc_surrogate"], ofa_dir)
    assert table.space == "ofa_mbv3" and len(table.ids) == 5000
    assert table.ids == [SPACE.arch_id(OFAMBv3Arch.from_help_row(r)) for r in help_rows]
    assert all(SPACE.arch_id(SPACE.parse(i)) == i for i in table.ids[:200])
    for name in LATENCIES:
        np.testing.assert_array_equal(table.column(name), [float(r[name]) for r in help_rows])
    acc = table.column("acc_surrogate")
    low = np.array([int(r["r"]) < 160 for r in help_rows])
    assert np.isnan(acc[low]).all() and np.isfinite(acc[~low]).all() and 74 < np.nanmean(acc) < 85
    # bigger subnets are both slower and predicted more accurate; a scrambled join loses that
    rho = spearmanr(acc[~low], table.column("v100_64")[~low]).statistic
    assert rho > 0.3
    shuffled = np.random.default_rng(0).permutation(acc[~low])
    assert abs(spearmanr(shuffled, table.column("v100_64")[~low]).statistic) < 0.1


def test_other_ids_get_the_surrogate_only(ofa_dir: Path, help_rows: list[dict[str, str]]) -> None:
    known = SPACE.arch_id(OFAMBv3Arch.from_help_row(help_rows[0]))  # r = 204
    new = LARGEST
    table = ofa.load_ofa_mbv3(["v100_1", "acc_surrogate"], ofa_dir, ids=[new, known])
    assert table.ids == [new, known]
    assert math.isnan(table.values[0, 0]) and table.values[1, 0] == float(help_rows[0]["v100_1"])
    assert 80 < table.values[0, 1] < 85 and 70 < table.values[1, 1] < 85
    only_acc = ofa.load_ofa_mbv3("acc_surrogate", ofa_dir, ids=[new])
    assert only_acc.values[0, 0] == table.values[0, 1]
    with pytest.raises(ValueError, match="stage 0 block 0: kernel 9"):
        ofa.load_ofa_mbv3(["acc_surrogate"], ofa_dir, ids=[new.replace("k7e6", "k9e6", 1)])


def test_names_are_checked(ofa_dir: Path) -> None:
    with pytest.raises(UnknownObjectiveError, match="did you mean 'v100_64'"):
        load_table("ofa_mbv3", ["v100_46"], ofa_dir)
    with pytest.raises(ValueError, match="listed twice"):
        load_table("ofa_mbv3", ["v100_1", "v100_1"], ofa_dir)
    measured = Objective("cpu-1t-b1", "ms", "measured", "test", False)
    with pytest.raises(ValueError, match="shadows"):
        load_table("ofa_mbv3", ["v100_1"], ofa_dir, extra={"v100_1": (measured, {})})
    table = load_table("ofa_mbv3", ["cpu-1t-b1", "v100_1"], ofa_dir, ids=[SMALLEST],
                       extra={"cpu-1t-b1": (measured, {SMALLEST: 4.5})})
    assert table.values[0, 0] == 4.5 and math.isnan(table.values[0, 1])


def test_without_a_data_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NASRLM_DATA", raising=False)
    assert available_objectives("ofa_mbv3") == []
    with pytest.raises(DataFileNotFoundError, match="ofa/latency_ms.csv"):
        load_table("ofa_mbv3", ["v100_1"])
    with pytest.raises(DataFileNotFoundError, match="ofa/acc_predictor_mbv3.npz"):
        load_table("ofa_mbv3", ["acc_surrogate"], ids=[SMALLEST])


def test_cli_writes_the_table(ofa_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "ofa.csv"
    assert main(["data", "ofa_mbv3", "--objectives", "titan_rtx_64,acc_surrogate", "--data-dir", str(ofa_dir),
                 "-o", str(out)]) == 0
    table = BenchmarkTable.read_csv(out)
    assert table.space == "ofa_mbv3" and len(table.ids) == 5000
    assert table.names == ["titan_rtx_64", "acc_surrogate"]
    assert "not measured" in table.objective("acc_surrogate").description
