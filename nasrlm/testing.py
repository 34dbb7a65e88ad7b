"""Helpers for tests and benchmarks of nasrlm on real infrastructure.

:func:`temporary_postgres` starts a throw-away PostgreSQL server on the loopback address, so that the
many-worker search is tested and measured against the database teams run it on, not only SQLite.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["PostgresServer", "PostgresUnavailable", "postgres_unavailable", "temporary_postgres"]


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be started here (the reason is the message)."""


def _binaries() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: on the PATH, else Debian's versioned folder."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda f: int(Path(f).parent.name))
    return Path(folders[-1]) if folders else None


def postgres_unavailable() -> str | None:
    """Why :func:`temporary_postgres` cannot start a server here, or ``None`` when it can."""
    if _binaries() is None:
        return "PostgreSQL is not installed (initdb and pg_ctl not found; Debian: apt install postgresql)"
    try:
        import psycopg  # noqa: F401  (the driver nasrlm[postgres] installs)
    except ImportError:
        return 'the PostgreSQL driver is not installed (pip install "nasrlm[postgres]")'
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root, and runuser (to run the server as the 'postgres' user) is not found"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """A PostgreSQL server kept in folder ``root``, on 127.0.0.1:``port`` (see :func:`temporary_postgres`)."""

    def __init__(self, root: Path, port: int) -> None:
        bin_dir = _binaries()
        assert bin_dir is not None
        self.root, self.port = root, port
        self._pg_ctl = str(bin_dir / "pg_ctl")
        self._as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as_user:
            shutil.chown(root, "postgres")
        _run([*self._as_user, str(bin_dir / "initdb"), "-D", str(self.data), "-U", "nasrlm", "--auth=trust",
              "-E", "UTF8"])

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def url(self) -> str:
        """SQLAlchemy URL of the server's ``postgres`` database, user ``nasrlm``."""
        return f"postgresql+psycopg://nasrlm@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        _run([*self._as_user, self._pg_ctl, "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
              "-o", f"-h 127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200", "start"])

    def stop(self) -> None:
        """Stop the server at once, dropping its connections (as a crash or a network cut would)."""
        subprocess.run([*self._as_user, self._pg_ctl, "-D", str(self.data), "-m", "immediate", "stop"],
                       capture_output=True, check=False)


@contextmanager
def temporary_postgres() -> Iterator[PostgresServer]:
    """Start a PostgreSQL server in a temporary folder, yield it (its ``url``), then stop and delete it.

    The server listens on 127.0.0.1 at a free port and trusts local connections (user ``nasrlm``,
    database ``postgres``). PostgreSQL refuses to run as root, so as root the server runs as the
    ``postgres`` user. Raises :class:`PostgresUnavailable` when no server can be started.
    """
    reason = postgres_unavailable()
    if reason is not None:
        raise PostgresUnavailable(reason)
    root = Path(tempfile.mkdtemp(prefix="nasrlm-postgres-"))
    server = None
    try:
        server = PostgresServer(root, _free_port())
        server.start()
        yield server
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        program = next(Path(c).name for c in command if c.endswith(("initdb", "pg_ctl")))
        raise PostgresUnavailable(f"{program} failed ({done.returncode}): "
                                  f"{(done.stderr or done.stdout).strip()[-500:]}")
