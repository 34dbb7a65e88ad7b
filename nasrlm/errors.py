"""The one exception base of errors a user can fix: :class:`NasrlmError`.

The command line prints such an error as one line (``nasrlm: error: ...``) and exits with status 2;
any other exception is a bug and keeps its traceback. Each subclass also derives from the built-in
exception callers caught before it existed (``class DataFileNotFoundError(NasrlmError,
FileNotFoundError)``), so ``except FileNotFoundError`` keeps working.

Nothing here imports anything, so every module of ``nasrlm`` may raise these without a cost.
"""

from __future__ import annotations

__all__ = ["NasrlmError"]


class NasrlmError(Exception):
    """An input the user can fix: the message names the file or option."""
