"""Tests for exporters.latency: profile names, timing statistics, batch rewriting, provider errors."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from exporters.latency import DeviceProfile, LatencyResult, default_profile, measure_latency, with_batch


def tiny_model(channels: int = 8, batch_dim: int | str = 1, seed: int = 0) -> onnx.ModelProto:
    """Conv(3->c, 3x3) + Relu + GlobalAveragePool + Flatten + Gemm(c->10) on float[batch, 3, 16, 16]."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array(rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), "w_conv"),
        numpy_helper.from_array(np.zeros(channels, np.float32), "b_conv"),
        numpy_helper.from_array(rng.standard_normal((10, channels)).astype(np.float32), "w_fc"),
        numpy_helper.from_array(np.zeros(10, np.float32), "b_fc"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w_conv", "b_conv"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "w_fc", "b_fc"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch_dim, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch_dim, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# --- DeviceProfile ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("cpu-1t-b1", DeviceProfile("cpu", 1, 1)),
        ("cpu-2t-b32", DeviceProfile("cpu", 2, 32)),
        ("cpu-16t-b128", DeviceProfile("cpu", 16, 128)),
        ("cuda-b1", DeviceProfile("cuda", 1, 1)),
        ("cuda-b64", DeviceProfile("cuda", 1, 64)),
    ],
)
def test_profile_name_round_trip(name: str, profile: DeviceProfile) -> None:
    assert profile.name == name
    assert str(profile) == name
    assert DeviceProfile.parse(name) == profile
    assert DeviceProfile.parse(profile.name).name == name


def test_default_profile() -> None:
    assert default_profile() == DeviceProfile("cpu", 1, 1)
    assert default_profile().name == "cpu-1t-b1"


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("cpu-xt-b1", "thread count 'xt' must look like '1t'"),
        ("cpu-0t-b1", "thread count '0t'"),
        ("cpu-01t-b1", "thread count '01t'"),
        ("cpu-1-b1", "thread count '1'"),
        ("cpu-1t-1", "batch size '1'"),
        ("cpu-1t-b0", "batch size 'b0'"),
        ("cpu-1t-bx", "batch size 'bx'"),
        ("cpu-1t", "cpu profiles look like"),
        ("cpu-1t-b1-x", "cpu profiles look like"),
        ("cuda-1t-b1", "cuda profiles look like"),
        ("cuda-bb", "batch size 'bb'"),
        ("gpu-b1", "provider 'gpu'"),
        ("CPU-1t-b1", "provider 'CPU'"),
        ("", "provider ''"),
        (" cpu-1t-b1", "provider ' cpu'"),
        ("cpu-1t-b1 ", "batch size 'b1 '"),
    ],
)
def test_profile_parse_errors_name_the_bad_part(name: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="bad device profile") as info:
        DeviceProfile.parse(name)
    assert repr(name) in str(info.value)
    assert fragment in str(info.value)


def test_profile_parse_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        DeviceProfile.parse(1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("tpu", 1, 1), "unknown provider"),
        (("cpu", 0, 1), "threads"),
        (("cpu", 1, 0), "batch"),
        (("cpu", True, 1), "threads"),
        (("cpu", 1.0, 1), "threads"),
        (("cuda", 4, 1), "threads=1"),
    ],
)
def test_profile_constructor_validates(args: tuple, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        DeviceProfile(*args)


def test_profile_is_hashable_and_frozen() -> None:
    p = DeviceProfile("cpu", 1, 1)
    assert {p: 1}[DeviceProfile.parse("cpu-1t-b1")] == 1
    with pytest.raises(AttributeError):
        p.batch = 2  # type: ignore[misc]


# --- measure_latency --------------------------------------------------------------------------
def _check_stats(r: LatencyResult) -> None:
    for value in (r.median_ms, r.p10_ms, r.p90_ms, r.mean_ms):
        assert math.isfinite(value) and value > 0
    assert math.isfinite(r.std_ms) and r.std_ms >= 0
    assert r.p10_ms <= r.median_ms <= r.p90_ms
    assert r.unit == "ms"
    assert r.onnxruntime_version == ort.__version__


def test_measure_latency_tiny_model() -> None:
    r = measure_latency(tiny_model(), DeviceProfile("cpu", 1, 1), warmup=2, runs=7)
    assert isinstance(r, LatencyResult)
    _check_stats(r)
    assert (r.runs, r.warmup, r.batch, r.threads, r.provider, r.profile) == (7, 2, 1, 1, "cpu", "cpu-1t-b1")


def test_measure_latency_batch_4_records_batch() -> None:
    r = measure_latency(tiny_model(), DeviceProfile.parse("cpu-2t-b4"), warmup=1, runs=5)
    _check_stats(r)
    assert (r.batch, r.threads, r.profile) == (4, 2, "cpu-2t-b4")


def test_single_run_has_zero_std() -> None:
    r = measure_latency(tiny_model(), default_profile(), warmup=0, runs=1)
    assert r.runs == 1 and r.warmup == 0 and r.std_ms == 0.0
    assert r.p10_ms == r.median_ms == r.p90_ms == r.mean_ms


@pytest.mark.parametrize(("warmup", "runs"), [(-1, 5), (1, 0), (1, 2.5), (True, 5)])
def test_measure_latency_rejects_bad_counts(warmup: int, runs: int) -> None:
    with pytest.raises(ValueError):
        measure_latency(tiny_model(), default_profile(), warmup=warmup, runs=runs)


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("batch_dim", [1, "N"])
def test_with_batch_rewrites_inputs_and_outputs(batch_dim: int | str) -> None:
    model = tiny_model(batch_dim=batch_dim)
    model.graph.value_info.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 8, 16, 16]))
    before = model.SerializeToString()
    batched = with_batch(model, 4)
    assert model.SerializeToString() == before  # the caller's model is untouched
    assert len(batched.graph.value_info) == 0
    for value in [*batched.graph.input, *batched.graph.output]:
        dim0 = value.type.tensor_type.shape.dim[0]
        assert dim0.dim_value == 4 and not dim0.dim_param
    onnx.checker.check_model(batched)
    y = _run(batched, np.random.default_rng(0).standard_normal((4, 3, 16, 16)).astype(np.float32))
    assert y.shape == (4, 10)


def test_with_batch_skips_initializers_listed_as_inputs() -> None:
    model = tiny_model()
    weight = next(t for t in model.graph.initializer if t.name == "w_fc")
    model.graph.input.append(helper.make_tensor_value_info("w_fc", TensorProto.FLOAT, list(weight.dims)))
    batched = with_batch(model, 3)
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in batched.graph.input}
    assert dims == {"x": [3, 3, 16, 16], "w_fc": [10, 8]}
    r = measure_latency(model, DeviceProfile("cpu", 1, 3), warmup=0, runs=2)  # only "x" is fed
    assert r.batch == 3


def test_integer_inputs_are_fed_zeros() -> None:
    # y = Gather(table, idx): random indices could be out of range; zeros never are.
    table = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "idx"], ["y"], axis=0)], "gather",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4])],
        [table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    r = measure_latency(model, DeviceProfile("cpu", 1, 2), warmup=1, runs=3)
    assert r.runs == 3 and r.batch == 2


def test_unknown_non_batch_dimension_is_a_clear_error() -> None:
    model = tiny_model()
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "H"
    with pytest.raises(ValueError, match="unknown dimension 2"):
        measure_latency(model, default_profile(), warmup=0, runs=1)


def test_batch_unfriendly_model_fails_clearly() -> None:
    # Reshape to a fixed [1, 768] is only valid at batch 1.
    shape = numpy_helper.from_array(np.array([1, 768], dtype=np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 768])],
        [shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert measure_latency(model, default_profile(), warmup=0, runs=1).batch == 1
    with pytest.raises(RuntimeError, match="profile 'cpu-1t-b2' \\(batch 2\\)"):
        measure_latency(model, DeviceProfile("cpu", 1, 2), warmup=0, runs=1)


@pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="CUDA is available here"
)
def test_cuda_profile_without_cuda_raises_clear_error() -> None:
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider") as info:
        measure_latency(tiny_model(), DeviceProfile.parse("cuda-b1"), warmup=0, runs=1)
    message = str(info.value)
    assert "cuda-b1" in message
    assert "CPUExecutionProvider" in message  # says what *is* available
