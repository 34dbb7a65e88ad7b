"""A file of architectures' texts and labels that every sampler naming it shares.

Describing an architecture (its ONNX build, canonical text, free and graph labels) takes tens of
milliseconds, and a search describes thousands: every candidate it scores. Workers on one machine would
each describe the same architectures again, and a resumed search would start over. A
:class:`LabelStore` keeps each description once, in SQLite (safe for several processes at once), keyed
by space name, architecture id, :data:`~nasrlm.free_labels.FREE_LABELS_VERSION` and whether graph
labels were computed; :class:`~nasrlm.search.ArchCache` reads it before describing anything and writes
what it describes.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import numpy as np

from nasrlm.errors import NasrlmError
from nasrlm.free_labels import FREE_LABELS_VERSION

_SCHEMA = """
CREATE TABLE IF NOT EXISTS described (
    space TEXT NOT NULL,
    version INTEGER NOT NULL,
    graph INTEGER NOT NULL,
    arch_id TEXT NOT NULL,
    text BLOB NOT NULL,
    labels BLOB NOT NULL,
    PRIMARY KEY (space, version, graph, arch_id)
)
"""
#: ids per query (SQLite limits the number of parameters of one statement)
_CHUNK = 500


class LabelStoreError(NasrlmError, RuntimeError):
    """A label store file that cannot be opened or read."""


class LabelStore:
    """SQLite file of (text, labels) by (space, arch id, label version, graph).

    Texts are stored compressed. Several processes may read and write one file at once (WAL mode; a
    writer waits for another's transaction). Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None,
                                         check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
        except (sqlite3.DatabaseError, OSError) as error:  # not a database, a folder, a path below a file
            raise LabelStoreError(f"{self.path}: cannot open it as a label store ({error})") from None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LabelStore({str(self.path)!r})"

    def get_many(self, space: str, graph: bool, arch_ids: Sequence[str]) -> dict[str, tuple[str, np.ndarray]]:
        """The stored (text, labels) of those of ``arch_ids`` that are stored, by id."""
        out: dict[str, tuple[str, np.ndarray]] = {}
        ids = list(dict.fromkeys(arch_ids))
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            rows = self._conn.execute(
                f"SELECT arch_id, text, labels FROM described WHERE space = ? AND version = ? AND graph = ? "
                f"AND arch_id IN ({', '.join('?' * len(chunk))})",
                (space, FREE_LABELS_VERSION, int(graph), *chunk))
            for arch_id, text, labels in rows:
                out[arch_id] = (zlib.decompress(text).decode(), np.frombuffer(labels, dtype=np.float64))
        return out

    def put_many(self, space: str, graph: bool, described: dict[str, tuple[str, np.ndarray]]) -> None:
        """Store (text, labels) by id in one transaction; an id stored already keeps its row."""
        rows = [(space, FREE_LABELS_VERSION, int(graph), arch_id, zlib.compress(text.encode()),
                 np.asarray(labels, dtype=np.float64).tobytes())
                for arch_id, (text, labels) in described.items()]
        with self._conn:  # one transaction (the connection autocommits otherwise)
            self._conn.execute("BEGIN")
            self._conn.executemany("INSERT OR IGNORE INTO described VALUES (?, ?, ?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM described").fetchone()[0])
