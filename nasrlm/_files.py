"""Files kept in the cache folder: written whole or not at all, and never worth failing for."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["keep_file"]


def keep_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file beside it, then a rename), creating its folder.
    A file that cannot be written is skipped: it only costs the next process the work it would have saved."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=path.parent, suffix=".tmp", delete=False) as f:
            f.write(data)
        os.replace(f.name, path)
    except OSError:
        pass
