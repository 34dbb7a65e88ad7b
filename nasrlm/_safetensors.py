"""Byte-identical safetensors files: the same tensors and metadata always give the same bytes.

safetensors writes a file's metadata (``__metadata__`` in its JSON header) from a Rust hash map, in an order
that changes from one save to the next, so two saves of one model differ though their tensors are identical
(a shipped base could not be checked against a rebuild by its digest). :func:`sort_metadata` rewrites the
header in place with the metadata in key order: the same keys and values, so the same length.
"""

from __future__ import annotations

import json
import os

__all__ = ["sort_metadata"]


def sort_metadata(path: str | os.PathLike[str]) -> None:
    """Put the metadata of the safetensors file at ``path`` in key order (nothing else changes)."""
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        if "__metadata__" not in header:
            return
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
        text = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
        if len(text) > size:  # only if the writer's JSON were longer than ours: then leave it as it is
            return
        f.seek(8)
        f.write(text.ljust(size))  # the writer pads with spaces too
