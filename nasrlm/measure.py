"""Measure the latency of a search space's architectures on this machine, resumably.

Measuring thousands of architectures takes hours and gets interrupted; every result is therefore
committed to a SQLite file the moment it exists, and :func:`measure_archs` skips whatever that file
already holds. Only the standard library, tqdm and :mod:`exporters.latency` are used (no torch).
"""

from __future__ import annotations

import functools
import os
import platform
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import astuple, fields
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import onnx
from tqdm.auto import tqdm

from exporters.latency import DeviceProfile, LatencyResult, measure_latency
from nasrlm.data import Objective
from nasrlm.errors import NasrlmError

__all__ = ["LatencyStore", "LatencyStoreError", "check_store_path", "measure_archs", "measured_objective"]

_RESULT_FIELDS = [f.name for f in fields(LatencyResult)]
_SELECT_RESULT = f"SELECT {', '.join(_RESULT_FIELDS)} FROM latency"
_SCHEMA_VERSION = 1
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS latency (
    space TEXT NOT NULL,
    arch_id TEXT NOT NULL,
    profile TEXT NOT NULL,
    median_ms REAL NOT NULL,
    p10_ms REAL NOT NULL,
    p90_ms REAL NOT NULL,
    mean_ms REAL NOT NULL,
    std_ms REAL NOT NULL,
    runs INTEGER NOT NULL,
    warmup INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    threads INTEGER NOT NULL,
    provider TEXT NOT NULL,
    onnxruntime_version TEXT NOT NULL,
    unit TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    host TEXT NOT NULL,
    cpu TEXT NOT NULL,
    PRIMARY KEY (space, arch_id, profile)
);
PRAGMA user_version = {_SCHEMA_VERSION};
"""


class _Space(Protocol):
    """The part of ``search_spaces.SearchSpace`` this module needs (kept structural: no import)."""

    name: str

    def parse(self, arch_id: str) -> Any: ...

    def to_onnx(self, arch: Any) -> onnx.ModelProto: ...


@functools.cache
def _cpu_model() -> str:
    """The CPU model string, so a stored latency says what it was measured on (falls back to the arch)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class LatencyStoreError(NasrlmError, RuntimeError):
    """A path that cannot be a latency store: a directory, a file that is not SQLite, a newer schema."""


#: The first bytes of every SQLite 3 database file.
_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store_path(path: str | os.PathLike[str]) -> None:
    """Refuse a latency store path before anything is created: a directory, a file that is not an
    SQLite database, or a path below a file. An empty file is fine (SQLite makes it a database)."""
    path = Path(path)
    if path.is_dir():
        raise LatencyStoreError(f"{path}: is a directory, not an SQLite database file")
    if path.exists():
        with path.open("rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
        if head and head != _SQLITE_MAGIC:
            raise LatencyStoreError(f"{path}: not an SQLite database")
        return
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise LatencyStoreError(f"{path}: {parent} is a file, not a directory")


class LatencyStore:
    """SQLite store of measurements keyed by (space, arch_id, profile).

    One table, one row per measurement, committed on :meth:`put`: a crash loses at most the
    measurement in progress. WAL mode lets a reader (a notebook, a training run) read the file while a
    measuring process writes it. Re-putting a key replaces the row. Use as a context manager or call
    :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            check_store_path(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: autocommit, every statement is its own durable transaction.
        self._conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None)
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as error:  # a damaged file, a folder that cannot be written
            self._conn.close()
            raise LatencyStoreError(f"{self.path}: cannot open it as a latency store ({error})") from None
        if version not in (0, _SCHEMA_VERSION):
            self._conn.close()
            raise LatencyStoreError(
                f"{self.path}: latency store schema version {version}, expected {_SCHEMA_VERSION}"
            )
        self._conn.executescript(_SCHEMA)

    # --- lifecycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> LatencyStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LatencyStore({str(self.path)!r})"

    # --- reading ---------------------------------------------------------------------------
    def get(self, space: str, arch_id: str, profile: str | DeviceProfile) -> LatencyResult | None:
        """The stored measurement, or ``None`` if this (space, arch_id, profile) was never measured."""
        row = self._conn.execute(
            f"{_SELECT_RESULT} WHERE space = ? AND arch_id = ? AND profile = ?",
            (space, arch_id, _profile_name(profile)),
        ).fetchone()
        return None if row is None else LatencyResult(*row)

    def get_many(self, space: str, profile: str | DeviceProfile) -> dict[str, LatencyResult]:
        """Every stored measurement of ``space`` under ``profile``, keyed by arch id (one query)."""
        rows = self._conn.execute(
            f"SELECT arch_id, {', '.join(_RESULT_FIELDS)} FROM latency WHERE space = ? AND profile = ?",
            (space, _profile_name(profile)),
        )
        return {row[0]: LatencyResult(*row[1:]) for row in rows}

    def missing(self, space: str, arch_ids: Iterable[str], profile: str | DeviceProfile) -> list[str]:
        """The ids of ``arch_ids`` not yet measured under ``profile``, in input order, without duplicates."""
        if isinstance(arch_ids, str):
            raise TypeError("arch_ids must be a collection of ids, not one str")
        done = {
            row[0]
            for row in self._conn.execute(
                "SELECT arch_id FROM latency WHERE space = ? AND profile = ?", (space, _profile_name(profile))
            )
        }
        return [a for a in dict.fromkeys(arch_ids) if a not in done]

    def values(self, space: str, profile: str | DeviceProfile) -> dict[str, float]:
        """``arch_id -> median_ms`` for ``space`` under ``profile``: the regression targets."""
        rows = self._conn.execute(
            "SELECT arch_id, median_ms FROM latency WHERE space = ? AND profile = ? ORDER BY arch_id",
            (space, _profile_name(profile)),
        )
        return dict(rows.fetchall())

    def profiles(self, space: str | None = None) -> list[str]:
        """The profile names with at least one measurement (of ``space``, or of any space), sorted."""
        if space is None:
            rows = self._conn.execute("SELECT DISTINCT profile FROM latency ORDER BY profile")
        else:
            rows = self._conn.execute(
                "SELECT DISTINCT profile FROM latency WHERE space = ? ORDER BY profile", (space,)
            )
        return [r[0] for r in rows]

    def __len__(self) -> int:
        return self._conn.execute("SELECT COUNT(*) FROM latency").fetchone()[0]

    # --- writing ---------------------------------------------------------------------------
    def put(self, space: str, arch_id: str, result: LatencyResult) -> None:
        """Store ``result`` under (space, arch_id, result.profile) and commit at once, with the UTC time
        and the host / CPU it was measured on."""
        _profile_name(result.profile)  # keep the store's keys canonical
        measured_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        columns = ["space", "arch_id", *_RESULT_FIELDS, "measured_at", "host", "cpu"]
        values = (space, arch_id, *astuple(result), measured_at, platform.node(), _cpu_model())
        self._conn.execute(
            f"INSERT OR REPLACE INTO latency ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            values,
        )


def is_profile(name: str) -> bool:
    """Whether ``name`` names a device profile such as ``cpu-1t-b1`` (measured, not looked up).

    Decided by prefix, so that a malformed profile (``cpu-2x``) fails with the profile parser's message
    instead of being looked up as an unknown table column.
    """
    return name.startswith(("cpu-", "cuda-"))


def _profile_name(profile: str | DeviceProfile) -> str:
    """Accept a profile or its name; names are validated so a typo cannot silently match nothing."""
    if isinstance(profile, DeviceProfile):
        return profile.name
    return DeviceProfile.parse(profile).name


def measure_archs(
    space: _Space,
    arch_ids: Sequence[str],
    profile: DeviceProfile | str,
    store: LatencyStore,
    *,
    warmup: int = 10,
    runs: int = 50,
    progress: bool = True,
    on_error: Callable[[str, Exception], None] | None = None,
) -> dict[str, LatencyResult]:
    """Latency of every id in ``arch_ids`` under ``profile``, measuring only what ``store`` lacks.

    All ids are parsed before anything is measured, so a malformed id fails in seconds, not hours in.
    Each new result is stored as soon as it exists; rerunning after a crash resumes where it stopped.
    Stored results are reused whatever ``warmup``/``runs`` they were taken with (the row records both).
    Returns ``{arch_id: result}`` in the order of ``arch_ids`` (duplicates collapse). With ``on_error``,
    an architecture whose model cannot be built or run is passed to it with the error and left out,
    and the others are measured; without, the error propagates.
    """
    if isinstance(profile, str):
        profile = DeviceProfile.parse(profile)
    todo = store.missing(space.name, arch_ids, profile)
    archs = {arch_id: space.parse(arch_id) for arch_id in todo}
    with tqdm(total=len(todo), desc=f"latency {space.name} {profile.name}", unit="arch",
              disable=not progress) as bar:
        for arch_id, arch in archs.items():
            try:
                result = measure_latency(space.to_onnx(arch), profile, warmup=warmup, runs=runs)
            except Exception as error:
                if on_error is None:
                    raise
                on_error(arch_id, error)
                bar.update()
                continue
            store.put(space.name, arch_id, result)
            bar.set_postfix_str(f"{arch_id[:40]} {result.median_ms:.3g} ms", refresh=False)
            bar.update()
    stored = store.get_many(space.name, profile)
    return {arch_id: stored[arch_id] for arch_id in dict.fromkeys(arch_ids) if arch_id in stored}


def measured_objective(
    store: LatencyStore, space: str, profile: DeviceProfile | str
) -> tuple[Objective, dict[str, float]]:
    """A measured profile as a table column: its :class:`~nasrlm.data.Objective` and id -> median ms.

    This is what makes ``cpu-1t-b1`` usable as an objective exactly like a published device column.
    """
    profile = DeviceProfile.parse(profile) if isinstance(profile, str) else profile
    if profile.provider == "cuda":
        where = f"onnxruntime CUDA, batch {profile.batch}"
    else:
        where = f"onnxruntime CPU, {profile.threads} thread(s), batch {profile.batch}"
    objective = Objective(
        name=profile.name,
        unit="ms",
        description=f"median latency of one batch measured by nasrlm measure ({where})",
        source=f"{store.path} (nasrlm measure)",
        higher_is_better=False,
    )
    return objective, store.values(space, profile)
