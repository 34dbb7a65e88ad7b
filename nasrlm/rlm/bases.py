"""Where a base model is: the one shipped in the package, named ``"shipped"`` wherever a base is named, or a
directory ``nasrlm pretrain`` wrote; and the errors of a model directory that is not one.

No base at all (a model learned from scratch) is ``None``, in the command line and in Python alike. Kept free
of torch, so that the command line can name a base without importing it.
"""

from __future__ import annotations

import os
from pathlib import Path

from nasrlm.errors import NasrlmError

#: The base model shipped in the package (``nasrlm pretrain --ship``; what it saw: docs/base-model.md).
SHIPPED_BASE = Path(__file__).parent.parent / "base"  # nasrlm/base, beside this package
#: The name of that base wherever a base is named: ``--base shipped``, ``RLMPredictor.from_base("shipped",
#: ...)``, ``RLMSampler(base="shipped")`` (a directory of that name: ``./shipped``).
SHIPPED = "shipped"


class ModelNotFoundError(NasrlmError, FileNotFoundError):
    """A model directory lacks a file it needs (config, weights, tokenizer); the message names it."""


class ModelFileError(NasrlmError, ValueError):
    """A model directory's file is there but does not make a model (truncated, of another kind)."""


def shipped_base() -> Path:
    """The directory of the base model shipped in the package, or :class:`ModelNotFoundError` where an
    install left it out (a wheel built without package data)."""
    if not (SHIPPED_BASE / "config.json").is_file():
        raise ModelNotFoundError(f"{SHIPPED_BASE}: this install of nasrlm lacks its base model (reinstall "
                                 "it, or give a base directory written by 'nasrlm pretrain')")
    return SHIPPED_BASE


def base_directory(base: str | os.PathLike[str]) -> Path:
    """The directory of the base model ``base`` names: :data:`SHIPPED`, the package's (:func:`shipped_base`),
    else the path given."""
    return shipped_base() if str(base) == SHIPPED else Path(base)
