"""Tests for nasrlm.measure: the SQLite latency store and resumable measurement of a space."""

from __future__ import annotations

import math
import re
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from exporters.latency import DeviceProfile, LatencyResult
from nasrlm.measure import LatencyStore, measure_archs

FAST = {"warmup": 1, "runs": 3, "progress": False}


class FakeSpace:
    """A space of ids 'c<channels>': Conv(3->c) + Relu + GlobalAveragePool + Flatten + Gemm(c->10)."""

    name = "fake"

    def __init__(self) -> None:
        self.to_onnx_calls: list[int] = []

    def parse(self, arch_id: str) -> int:
        m = re.fullmatch(r"c([1-9][0-9]*)", arch_id)
        if m is None:
            raise ValueError(f"bad fake arch id {arch_id!r}: must look like 'c8'")
        return int(m.group(1))

    def to_onnx(self, arch: int) -> onnx.ModelProto:
        self.to_onnx_calls.append(arch)
        rng = np.random.default_rng(arch)
        inits = [
            numpy_helper.from_array(rng.standard_normal((arch, 3, 3, 3)).astype(np.float32), "w_conv"),
            numpy_helper.from_array(rng.standard_normal(arch).astype(np.float32), "b_conv"),
            numpy_helper.from_array(rng.standard_normal((10, arch)).astype(np.float32), "w_fc"),
            numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "b_fc"),
        ]
        nodes = [
            helper.make_node("Conv", ["x", "w_conv", "b_conv"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("GlobalAveragePool", ["r"], ["g"]),
            helper.make_node("Flatten", ["g"], ["f"]),
            helper.make_node("Gemm", ["f", "w_fc", "b_fc"], ["y"], transB=1),
        ]
        graph = helper.make_graph(
            nodes, f"c{arch}",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
            inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        return model


class CrashingSpace(FakeSpace):
    """Dies on the n-th to_onnx call, like a measuring run killed part-way."""

    def __init__(self, crash_on: int) -> None:
        super().__init__()
        self.crash_on = crash_on

    def to_onnx(self, arch: int) -> onnx.ModelProto:
        if len(self.to_onnx_calls) + 1 == self.crash_on:
            raise KeyboardInterrupt("simulated crash")
        return super().to_onnx(arch)


def fake_result(profile: str = "cpu-1t-b1", median: float = 1.5) -> LatencyResult:
    p = DeviceProfile.parse(profile)
    return LatencyResult(
        profile=profile, median_ms=median, p10_ms=median - 0.5, p90_ms=median + 0.5, mean_ms=median,
        std_ms=0.25, runs=50, warmup=10, batch=p.batch, threads=p.threads, provider=p.provider,
        onnxruntime_version="1.0.0",
    )


# --- LatencyStore -----------------------------------------------------------------------------
def test_store_round_trip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "lat.sqlite"  # parent directory is created
    with LatencyStore(path) as store:
        assert store.get("fake", "c8", "cpu-1t-b1") is None
        r = fake_result()
        store.put("fake", "c8", r)
        assert store.get("fake", "c8", "cpu-1t-b1") == r
        assert store.get("fake", "c8", DeviceProfile("cpu", 1, 1)) == r
        assert store.get("fake", "c8", "cpu-2t-b1") is None
        assert store.get("other", "c8", "cpu-1t-b1") is None
    with LatencyStore(str(path)) as store:  # str paths too; committed data survives
        assert store.get("fake", "c8", "cpu-1t-b1") == r
        assert len(store) == 1


def test_store_put_replaces_and_records_provenance(tmp_path: Path) -> None:
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        store.put("fake", "c8", fake_result(median=1.0))
        store.put("fake", "c8", fake_result(median=2.0))
        assert len(store) == 1
        assert store.get("fake", "c8", "cpu-1t-b1").median_ms == 2.0
    with sqlite3.connect(tmp_path / "lat.sqlite") as db:  # where and when, stored beside each result
        rows = db.execute("SELECT measured_at, host, cpu FROM latency WHERE arch_id = 'c8'").fetchall()
    assert len(rows) == 1 and all(rows[0])
    assert datetime.fromisoformat(rows[0][0]).utcoffset().total_seconds() == 0


def test_store_schema_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "lat.sqlite"
    LatencyStore(path).close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert tables == ["latency"]
        pk = sorted((r[5], r[1]) for r in conn.execute("PRAGMA table_info(latency)") if r[5])
        assert [name for _, name in pk] == ["space", "arch_id", "profile"]
    finally:
        conn.close()


def test_store_visible_to_a_second_connection_without_close(tmp_path: Path) -> None:
    path = tmp_path / "lat.sqlite"
    writer = LatencyStore(path)
    try:
        writer.put("fake", "c8", fake_result())
        with LatencyStore(path) as reader:  # put() committed: another process would see it too
            assert reader.get("fake", "c8", "cpu-1t-b1") == fake_result()
    finally:
        writer.close()


def test_store_missing_values_profiles(tmp_path: Path) -> None:
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        store.put("fake", "c16", fake_result(median=3.0))
        store.put("fake", "c4", fake_result(median=1.0))
        store.put("fake", "c4", fake_result("cpu-2t-b8", median=9.0))
        store.put("other", "x", fake_result("cuda-b1"))
        assert store.missing("fake", ["c32", "c4", "c8", "c16", "c32"], "cpu-1t-b1") == ["c32", "c8"]
        assert store.missing("fake", iter(["c4"]), "cpu-2t-b8") == []
        assert store.missing("fake", [], "cpu-1t-b1") == []
        assert store.values("fake", "cpu-1t-b1") == {"c16": 3.0, "c4": 1.0}
        assert store.values("fake", DeviceProfile("cpu", 2, 8)) == {"c4": 9.0}
        assert store.values("fake", "cuda-b1") == {}
        assert store.profiles() == ["cpu-1t-b1", "cpu-2t-b8", "cuda-b1"]
        assert store.profiles("fake") == ["cpu-1t-b1", "cpu-2t-b8"]
        assert store.profiles("nope") == []
        assert set(store.get_many("fake", "cpu-1t-b1")) == {"c16", "c4"}


def test_store_rejects_bad_profile_names(tmp_path: Path) -> None:
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        with pytest.raises(ValueError, match="bad device profile"):
            store.values("fake", "cpu-1-b1")
        with pytest.raises(ValueError, match="bad device profile"):
            store.put("fake", "c8", replace(fake_result(), profile="CPU"))
        assert len(store) == 0


# --- measure_archs ----------------------------------------------------------------------------
def test_measure_archs_measures_and_stores(tmp_path: Path) -> None:
    space = FakeSpace()
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        results = measure_archs(space, ["c8", "c16"], "cpu-1t-b2", store, **FAST)
        assert list(results) == ["c8", "c16"]
        for arch_id, r in results.items():
            assert r.profile == "cpu-1t-b2" and r.batch == 2 and r.runs == 3 and r.warmup == 1
            assert math.isfinite(r.median_ms) and r.median_ms > 0
            assert store.get("fake", arch_id, "cpu-1t-b2") == r
        assert space.to_onnx_calls == [8, 16]


def test_measure_archs_resumes(tmp_path: Path) -> None:
    path = tmp_path / "lat.sqlite"
    profile = DeviceProfile("cpu", 1, 1)
    with LatencyStore(path) as store:
        first = measure_archs(FakeSpace(), ["c4", "c8", "c16"], profile, store, **FAST)
    counting = FakeSpace()
    with LatencyStore(path) as store:
        ids = ["c2", "c4", "c8", "c16", "c32"]
        second = measure_archs(counting, ids, profile, store, **FAST)
        assert sorted(counting.to_onnx_calls) == [2, 32]  # exactly two new measurements
        assert list(second) == ids
        for arch_id in first:
            assert second[arch_id] == first[arch_id]  # reused, not re-measured
        assert store.missing("fake", ids, profile) == []
        # a different profile is a different measurement
        third = FakeSpace()
        measure_archs(third, ["c4"], "cpu-1t-b3", store, **FAST)
        assert third.to_onnx_calls == [4]


def test_measure_archs_crash_keeps_finished_work(tmp_path: Path) -> None:
    path = tmp_path / "lat.sqlite"
    ids = ["c4", "c8", "c12", "c16"]
    store = LatencyStore(path)
    with pytest.raises(KeyboardInterrupt, match="simulated crash"):
        measure_archs(CrashingSpace(crash_on=3), ids, "cpu-1t-b1", store, **FAST)
    del store  # no close(): the process "died"
    with LatencyStore(path) as reopened:
        assert set(reopened.values("fake", "cpu-1t-b1")) == {"c4", "c8"}
        assert reopened.missing("fake", ids, "cpu-1t-b1") == ["c12", "c16"]
        resumed = FakeSpace()
        results = measure_archs(resumed, ids, "cpu-1t-b1", reopened, **FAST)
    assert resumed.to_onnx_calls == [12, 16]
    assert list(results) == ids


def test_measure_archs_survives_hard_kill(tmp_path: Path) -> None:
    """A process killed outright (no cleanup, no close) still leaves every finished row readable."""
    path = tmp_path / "lat.sqlite"
    script = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{str(Path(__file__).resolve().parents[2])!r}, {str(Path(__file__).parent)!r}]
        from test_measure import FakeSpace
        from nasrlm.measure import LatencyStore, measure_archs

        class Dying(FakeSpace):
            def to_onnx(self, arch):
                if len(self.to_onnx_calls) == 2:
                    os._exit(3)
                return super().to_onnx(arch)

        measure_archs(Dying(), ["c4", "c8", "c12"], "cpu-1t-b1", LatencyStore({str(path)!r}),
                      warmup=0, runs=1, progress=False)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    with LatencyStore(path) as store:
        assert store.missing("fake", ["c4", "c8", "c12"], "cpu-1t-b1") == ["c12"]


def test_missing_rejects_a_bare_str(tmp_path: Path) -> None:
    with LatencyStore(tmp_path / "lat.sqlite") as store, pytest.raises(TypeError):
        store.missing("fake", "c8", "cpu-1t-b1")


def test_measure_archs_rejects_malformed_ids_before_measuring(tmp_path: Path) -> None:
    space = FakeSpace()
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        with pytest.raises(ValueError, match="'x9'"):
            measure_archs(space, ["c4", "x9"], "cpu-1t-b1", store, **FAST)
        assert space.to_onnx_calls == []
        assert len(store) == 0
        with pytest.raises(ValueError, match="bad device profile"):
            measure_archs(space, ["c4"], "cpu-1t", store, **FAST)


def test_measure_archs_duplicates_and_empty(tmp_path: Path) -> None:
    space = FakeSpace()
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        assert measure_archs(space, [], "cpu-1t-b1", store, **FAST) == {}
        results = measure_archs(space, ["c4", "c4", "c2"], "cpu-1t-b1", store, **FAST)
    assert list(results) == ["c4", "c2"]
    assert space.to_onnx_calls == [4, 2]


def test_measure_archs_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with LatencyStore(tmp_path / "lat.sqlite") as store:
        measure_archs(FakeSpace(), ["c4"], "cpu-1t-b1", store, warmup=0, runs=1, progress=True)
    assert "latency fake cpu-1t-b1" in capsys.readouterr().err
