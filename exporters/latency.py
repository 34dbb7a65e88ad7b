"""Latency of ONNX models on the user's own hardware, through onnxruntime.

Latency is a property of (model, hardware, runtime settings), never of the model alone, so every
number carries the :class:`DeviceProfile` it was taken under, and the profile has a short canonical
name (``"cpu-1t-b1"``) that stores and tables can be keyed by.

Only onnx, onnxruntime, numpy and the standard library are used: the exporters package must not
depend on the rest of the project.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np
import onnx
import onnxruntime as ort

__all__ = ["DeviceProfile", "LatencyResult", "default_profile", "measure_latency", "with_batch"]

#: Profile provider -> onnxruntime execution providers, in priority order. CUDA keeps the CPU provider
#: as fallback for the few ops without a CUDA kernel, which is what onnxruntime users get by default.
_PROVIDERS: dict[str, list[str]] = {
    "cpu": ["CPUExecutionProvider"],
    "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
}

_THREADS_RE = re.compile(r"[1-9][0-9]*t")
_BATCH_RE = re.compile(r"b[1-9][0-9]*")


@dataclass(frozen=True)
class DeviceProfile:
    """Where and how a model is timed: execution provider, intra-op threads and batch size.

    Canonical names are ``"cpu-<T>t-b<B>"`` (e.g. ``"cpu-1t-b1"``, ``"cpu-2t-b32"``) and
    ``"cuda-b<B>"``. On CUDA the intra-op thread count only affects the rare CPU-fallback op, so the
    name omits it and CUDA profiles must have ``threads == 1``: that keeps name <-> profile one to one
    (two different profiles never share a name, so a store keyed by name cannot mix them).
    """

    provider: str
    threads: int
    batch: int

    def __post_init__(self) -> None:
        if self.provider not in _PROVIDERS:
            raise ValueError(f"unknown provider {self.provider!r}; expected one of {sorted(_PROVIDERS)}")
        for field, value in (("threads", self.threads), ("batch", self.batch)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive int, got {value!r}")
        if self.provider == "cuda" and self.threads != 1:
            raise ValueError(
                f"cuda profiles use threads=1 (the name 'cuda-b<B>' does not record threads), "
                f"got {self.threads}"
            )

    @property
    def name(self) -> str:
        """Canonical name, e.g. ``"cpu-1t-b1"`` or ``"cuda-b8"``; :meth:`parse` inverts it."""
        if self.provider == "cuda":
            return f"cuda-b{self.batch}"
        return f"{self.provider}-{self.threads}t-b{self.batch}"

    @property
    def ort_providers(self) -> list[str]:
        """The onnxruntime execution providers this profile asks for, in priority order."""
        return list(_PROVIDERS[self.provider])

    @classmethod
    def parse(cls, name: str) -> DeviceProfile:
        """Inverse of :attr:`name`. Strict: only canonical names are accepted (no leading zeros,
        upper case or spaces), so ``parse(n).name == n`` always holds."""
        if not isinstance(name, str):
            raise TypeError(f"device profile name must be a str, got {type(name).__name__}")
        bad = f"bad device profile {name!r}"
        parts = name.split("-")
        provider = parts[0]
        if provider == "cpu":
            if len(parts) != 3:
                raise ValueError(f"{bad}: cpu profiles look like 'cpu-<T>t-b<B>', e.g. 'cpu-1t-b1'")
            threads_part, batch_part = parts[1], parts[2]
            if not _THREADS_RE.fullmatch(threads_part):
                raise ValueError(f"{bad}: thread count {threads_part!r} must look like '1t'")
            threads = int(threads_part[:-1])
        elif provider == "cuda":
            if len(parts) != 2:
                raise ValueError(f"{bad}: cuda profiles look like 'cuda-b<B>', e.g. 'cuda-b1'")
            threads, batch_part = 1, parts[1]
        else:
            raise ValueError(f"{bad}: provider {provider!r} must be one of {sorted(_PROVIDERS)}")
        if not _BATCH_RE.fullmatch(batch_part):
            raise ValueError(f"{bad}: batch size {batch_part!r} must look like 'b1'")
        return cls(provider, threads, int(batch_part[1:]))

    def __str__(self) -> str:
        return self.name


def default_profile() -> DeviceProfile:
    """CPU, one thread, batch 1: the most reproducible setting, and the one edge deployment cares about."""
    return DeviceProfile("cpu", 1, 1)


@dataclass(frozen=True)
class LatencyResult:
    """Timing statistics of ONE batch of ``batch`` inputs (not per sample), in milliseconds.

    ``std_ms`` is the sample standard deviation (``ddof=1``; 0 for a single run); percentiles use
    numpy's linear interpolation. The settings and onnxruntime version are kept with the numbers
    because a latency without them cannot be compared to another.
    """

    profile: str
    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    std_ms: float
    runs: int
    warmup: int
    batch: int
    threads: int
    provider: str
    onnxruntime_version: str
    unit: str = "ms"


def with_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs and outputs declare leading dimension ``batch``.

    Inputs backed by an initializer (old-IR models list weights as inputs) are left alone, as are
    rank-0 values. ``value_info`` is cleared so stale intermediate shapes cannot contradict the new
    batch; onnxruntime re-infers them. The model must be batch-agnostic inside (Flatten,
    GlobalAveragePool, ``Reshape`` with a 0 or -1 leading dim), else onnxruntime fails when run.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    initializers = {t.name for t in graph.initializer} | {t.name for t in graph.sparse_initializer}
    del graph.value_info[:]
    for value in [*graph.input, *graph.output]:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        if not tensor_type.HasField("shape") or len(tensor_type.shape.dim) == 0:
            continue
        dim = tensor_type.shape.dim[0]
        dim.Clear()  # drops a symbolic dim_param such as "N" as well as an old dim_value
        dim.dim_value = batch
    return out


def _session_options(threads: int) -> ort.SessionOptions:
    """Sequential, fully optimised, quiet: the settings that make repeated timings comparable."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3  # errors only
    return so


def _make_session(model: onnx.ModelProto, profile: DeviceProfile) -> ort.InferenceSession:
    """A session on exactly the provider the profile names; never a silent fallback to CPU."""
    available = ort.get_available_providers()
    wanted = profile.ort_providers[0]
    if wanted not in available:
        raise RuntimeError(
            f"device profile {profile.name!r} needs onnxruntime's {wanted}, but this onnxruntime "
            f"({ort.__version__}) only has {available}; install onnxruntime-gpu for cuda profiles"
        )
    try:
        sess = ort.InferenceSession(
            model.SerializeToString(), sess_options=_session_options(profile.threads),
            providers=profile.ort_providers,
        )
    except Exception as e:  # onnxruntime's pybind exceptions; say which profile/batch was tried
        raise RuntimeError(
            f"onnxruntime could not load the model under profile {profile.name!r} "
            f"(batch {profile.batch}): {e}"
        ) from e
    # onnxruntime quietly drops a provider whose libraries fail to load (e.g. CUDA without cuDNN);
    # timing CPU under a cuda name would poison the store, so refuse instead.
    if wanted not in sess.get_providers():
        raise RuntimeError(
            f"device profile {profile.name!r}: onnxruntime could not start {wanted} "
            f"(session got {sess.get_providers()}); check the CUDA/cuDNN installation"
        )
    return sess


def _random_feeds(model: onnx.ModelProto, names: list[str], seed: int) -> dict[str, np.ndarray]:
    """Seeded inputs of the declared dtype and shape: floats ~ N(0, 1), everything else zeros
    (zeros are a valid index/id/mask for int and bool inputs, random ints might not be)."""
    rng = np.random.default_rng(seed)
    by_name = {v.name: v for v in model.graph.input}
    feeds: dict[str, np.ndarray] = {}
    for name in names:
        tensor_type = by_name[name].type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        shape = []
        for i, dim in enumerate(tensor_type.shape.dim):
            if not dim.HasField("dim_value"):
                label = dim.dim_param or "?"
                raise ValueError(f"input {name!r} has unknown dimension {i} ({label!r}); cannot make a feed")
            shape.append(dim.dim_value)
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[name] = np.zeros(shape, dtype=dtype)
    return feeds


def measure_latency(
    model: onnx.ModelProto, profile: DeviceProfile, *, warmup: int = 10, runs: int = 50, seed: int = 0
) -> LatencyResult:
    """Time ``model`` at ``profile.batch`` on ``profile``'s provider: ``warmup`` untimed runs (first-run
    allocation and kernel selection), then ``runs`` timed ``session.run`` calls.

    Each timed call is end-to-end as a Python user sees it: on CUDA it includes copying numpy inputs to
    the device and outputs back. ``model`` is not modified.
    """
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise ValueError(f"runs must be an int >= 1, got {runs!r}")
    batched = with_batch(model, profile.batch)
    sess = _make_session(batched, profile)
    feeds = _random_feeds(batched, [i.name for i in sess.get_inputs()], seed)

    times_ns = np.empty(runs, dtype=np.int64)
    try:  # a batch-unfriendly model (e.g. Reshape to a fixed [1, -1]) fails on its first run
        for _ in range(warmup):
            sess.run(None, feeds)
        for i in range(runs):
            start = time.perf_counter_ns()
            sess.run(None, feeds)
            times_ns[i] = time.perf_counter_ns() - start
    except Exception as e:  # onnxruntime raises its own pybind exception types
        raise RuntimeError(
            f"model failed to run under profile {profile.name!r} (batch {profile.batch}): {e}"
        ) from e

    ms = times_ns.astype(np.float64) / 1e6
    p10, median, p90 = np.percentile(ms, [10, 50, 90])
    std = float(ms.std(ddof=1)) if runs > 1 else 0.0
    return LatencyResult(
        profile=profile.name, median_ms=float(median), p10_ms=float(p10), p90_ms=float(p90),
        mean_ms=float(ms.mean()), std_ms=std, runs=runs, warmup=warmup, batch=profile.batch,
        threads=profile.threads, provider=profile.provider, onnxruntime_version=ort.__version__,
    )
