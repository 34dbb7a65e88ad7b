"""One persistent file of architectures' canonical texts and free labels, shared by every command.

Describing an architecture (its ONNX build, canonical text, parameters, MACs and graph labels) takes a
few milliseconds, and pre-training, training, evaluation, prediction and search describe thousands:
the same NB201 cells again and again, across commands, processes and sessions. A :class:`LabelCache`
keeps each description once, in SQLite (safe for several processes at once: WAL mode, a writer waits
for another's transaction), keyed by

- the space's name and a fingerprint of its definition (the source of the space's class and the text of
  one of its architectures), so that editing a plug-in space never serves its old texts;
- the architecture's canonical id;
- a version of the labels' and the text's definitions
  (:data:`~nasrlm.free_labels.FREE_LABELS_VERSION`), so that stale rows are never read.

Where it lives: ``$NASRLM_CACHE`` if set (``off`` turns it off), else ``$XDG_CACHE_HOME/nasrlm``, else
``~/.cache/nasrlm`` (:func:`default_cache`); the command line's ``--cache DIR`` and ``--no-cache`` set
``NASRLM_CACHE`` for the command and the processes it starts.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import random
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from nasrlm.errors import NasrlmError
from search_spaces import SearchSpace

#: The environment variable naming the cache's folder (or ``off``).
CACHE_ENV = "NASRLM_CACHE"
#: The environment variable saying how many processes describe architectures (default: every core).
JOBS_ENV = "NASRLM_JOBS"
_FILE = "labels.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS described (
    space TEXT NOT NULL,
    version INTEGER NOT NULL,
    arch_id TEXT NOT NULL,
    text BLOB NOT NULL,
    labels BLOB NOT NULL,
    PRIMARY KEY (space, version, arch_id)
)
"""
#: how long a process waits for another that holds the file (seconds)
_BUSY_SECONDS = 60.0
#: ids per query (SQLite limits the number of parameters of one statement)
_CHUNK = 500


class LabelCacheError(NasrlmError, RuntimeError):
    """A label cache file that cannot be opened or read."""


class LabelCache:
    """SQLite file of (canonical text, labels) by (space key, label version, architecture id).

    Texts are stored compressed, labels as float64 rows. Threads may share one (each call holds a lock);
    processes open their own. Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(path), timeout=_BUSY_SECONDS, isolation_level=None,
                                         check_same_thread=False)
            self._set_up()
            self._lock = threading.Lock()
        except (sqlite3.DatabaseError, OSError) as error:  # not a database, a folder, a path below a file
            raise LabelCacheError(f"{self.path}: cannot open it as a label cache ({error})") from None

    def _set_up(self) -> None:
        """Write-ahead logging and the table, tried again while another process holds the new file.

        Workers that start together on a new file (``nasrlm search --workers N``) race to switch it to
        write-ahead logging, and SQLite answers the losers "database is locked" at once, without waiting
        out the connection's busy timeout: they wait and try again instead.
        """
        deadline = time.monotonic() + _BUSY_SECONDS
        while True:
            try:
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.executescript(_SCHEMA)
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05 + random.random() / 10)

    def __getstate__(self) -> dict[str, Any]:
        """A pickle keeps the file's path; the connection and the lock are this process's, opened on load."""
        return {"path": str(self.path)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> LabelCache:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LabelCache({str(self.path)!r})"

    def get_many(self, space: str, version: int, arch_ids: Sequence[str]
                 ) -> dict[str, tuple[str, np.ndarray]]:
        """The stored (text, labels) of those of ``arch_ids`` that are stored, by id (``space``: a
        :func:`space_key`; ``version``: of the labels' definitions)."""
        out: dict[str, tuple[str, np.ndarray]] = {}
        for arch_id, text, labels in self._rows("arch_id, text, labels", space, version, arch_ids):
            out[arch_id] = (zlib.decompress(text).decode(), np.frombuffer(labels, dtype=np.float64))
        return out

    def count(self, space: str, version: int, arch_ids: Sequence[str]) -> int:
        """How many of ``arch_ids`` (each once) are stored, reading their ids alone."""
        return sum(1 for _ in self._rows("arch_id", space, version, arch_ids))

    def _rows(self, columns: str, space: str, version: int, arch_ids: Sequence[str]) -> Iterator[tuple]:
        """``columns`` of the stored rows of ``arch_ids`` (each once), a query per chunk of ids."""
        ids = list(dict.fromkeys(arch_ids))
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            with self._lock:
                rows = self._conn.execute(
                    f"SELECT {columns} FROM described WHERE space = ? AND version = ? "
                    f"AND arch_id IN ({', '.join('?' * len(chunk))})", (space, version, *chunk)).fetchall()
            yield from rows

    def put_many(self, space: str, version: int, described: dict[str, tuple[str, np.ndarray]]) -> None:
        """Store (text, labels) by id in one transaction, replacing what an id had."""
        rows = [(space, version, arch_id, zlib.compress(text.encode()),
                 np.asarray(labels, dtype=np.float64).tobytes())
                for arch_id, (text, labels) in described.items()]
        with self._lock, self._conn:  # one transaction (the connection autocommits otherwise)
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT OR REPLACE INTO described VALUES (?, ?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM described").fetchone()[0])


def default_cache_dir() -> Path | None:
    """The folder of the default cache: ``$NASRLM_CACHE`` (None where it says ``off``), else
    ``$XDG_CACHE_HOME/nasrlm``, else ``~/.cache/nasrlm``."""
    named = os.environ.get(CACHE_ENV, "").strip()
    if named.lower() in ("off", "none", "0"):
        return None
    if named:
        return Path(named).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "nasrlm"


_opened: dict[Path, LabelCache] = {}


def default_cache() -> LabelCache | None:
    """The cache in :func:`default_cache_dir` (opened once per process), or None where it is off."""
    folder = default_cache_dir()
    if folder is None:
        return None
    path = folder / _FILE
    if path not in _opened:
        _opened[path] = LabelCache(path)
    return _opened[path]


_fingerprints: dict[int, tuple[SearchSpace, str]] = {}  # by id; the space kept, so its id is not reused


#: Random architectures tried, in a fixed order, for the one whose text goes into a space's fingerprint.
_PROBES = 16


def space_key(space: SearchSpace) -> str:
    """``name:fingerprint`` of a space: its name and a hash of its class's source file and of the
    canonical text of one of its architectures (the first of :data:`_PROBES` random ones that builds),
    computed once per space object."""
    if id(space) not in _fingerprints:
        from exporters import to_text

        digest = hashlib.sha1()
        try:
            source = inspect.getsourcefile(type(space))
            if source is not None:
                digest.update(Path(source).read_bytes())
        except (OSError, TypeError):  # defined in a notebook or at the prompt: its text still counts
            pass
        for probe in space.sample_ids(_PROBES, seed=0):  # the first that builds: a space may fail on some
            try:
                text = to_text(space.build_onnx(space.parse(probe)))
            except Exception:  # noqa: BLE001 - the user's code: describing names the failures, not this
                continue
            digest.update(probe.encode())
            digest.update(text.encode())
            break
        _fingerprints[id(space)] = (space, f"{space.name}:{digest.hexdigest()[:16]}")
    return _fingerprints[id(space)][1]
