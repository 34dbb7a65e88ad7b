"""Locating the benchmark data directory.

Published benchmark tables are not shipped with nasrlm (licences, size): the user names a directory that
holds them, either explicitly (``--data-dir DIR``) or through the ``NASRLM_DATA`` environment variable.
Everything that reads such a file goes through :func:`data_file` so that a missing file always produces
the same actionable one-line error.
"""

from __future__ import annotations

import os
from pathlib import Path

from nasrlm.errors import NasrlmError

ENV_VAR = "NASRLM_DATA"
_HOW = f"pass --data-dir DIR or set {ENV_VAR}=DIR"


class DataFileNotFoundError(NasrlmError, FileNotFoundError):
    """A benchmark data file (or the data directory itself) is missing; the message says how to fix it."""


class DataFileError(NasrlmError, ValueError):
    """A data file is there but malformed: a benchmark table, or a table written by ``nasrlm data``.

    The message starts with the file's name. A ``ValueError`` as well, as these errors were before.
    """


def resolve_data_dir(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The data directory to use: the explicit argument, else ``$NASRLM_DATA``, else ``None``.

    A named directory that does not exist is an error rather than a silent fallback, because a typo would
    otherwise quietly switch to other (or no) data.
    """
    if data_dir is not None and str(data_dir) != "":
        path, origin = Path(data_dir), "the given data directory"
    else:
        env = os.environ.get(ENV_VAR, "")
        if not env:
            return None
        path, origin = Path(env), f"the data directory from {ENV_VAR}"
    path = path.expanduser()
    if not path.is_dir():
        raise DataFileNotFoundError(f"{origin} {str(path)!r} does not exist or is not a directory; {_HOW}")
    return path


def data_file(data_dir: str | os.PathLike[str] | None, relpath: str) -> Path:
    """Path of ``relpath`` (e.g. ``"nb201/latency_ms.csv"``) inside the data directory, checked to exist."""
    root = resolve_data_dir(data_dir)
    if root is None:
        raise DataFileNotFoundError(f"benchmark data file {relpath} is needed but no data directory was "
                                    f"given; {_HOW}")
    path = root / relpath
    if not path.is_file():
        raise DataFileNotFoundError(f"benchmark data file {relpath} not found in data directory "
                                    f"{str(root)!r}; {_HOW}")
    return path


def file_version(path: Path) -> tuple[str, int, int]:
    """(path, mtime, size): a cache key for parsed files, so an edited file is read again."""
    st = path.stat()
    return str(path), st.st_mtime_ns, st.st_size
