"""What every command shares: :class:`CliError`, the :class:`Command` base, checks of the files and
directories a command will write, argparse types, and the options several commands take."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Protocol

from nasrlm.errors import NasrlmError

#: Exit status for bad input, as argparse uses.
USAGE_ERROR = 2
#: Latency store used when ``--db`` is not given.
DEFAULT_DB = "latency.db"
#: Plug-ins (module names or .py files, comma-separated) imported before every command, like ``--plugin``.
PLUGINS_ENV = "NASRLM_PLUGINS"


class CliError(NasrlmError):
    """A problem with what the user asked for; printed as one line."""


def _comma_list(text: str) -> list[str]:
    """``"acc, pixel3,"`` -> ``["acc", "pixel3"]``: names of a comma-separated option, blanks dropped."""
    return [n.strip() for n in text.split(",") if n.strip()]


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (``.`` or ``/`` at the latest)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _unwritable(path: Path) -> str | None:
    """Why ``path`` (an existing directory or file) cannot be written, or ``None`` when it can.

    Tried, not inferred from permission bits: root passes every ``os.access`` check, yet cannot
    create a file under ``/proc`` or on a read-only mount. Nothing is left behind: an unnamed
    temporary file in a directory, or a file opened for appending and closed unchanged.
    """
    try:
        if path.is_dir():
            with tempfile.TemporaryFile(dir=path):
                pass
        else:
            with path.open("ab"):
                pass
    except OSError as error:
        return error.strerror or type(error).__name__
    return None


def _check_output_file(path: str | os.PathLike[str], option: str) -> None:
    """A file the command will write (created or overwritten), checked before any work starts.

    Refused: a directory, a path whose directory is missing or is a file, and a place that cannot be
    written; so an error never comes after minutes of work, nor leaves half of the output behind.
    """
    path = Path(path)
    if path.is_dir():
        raise CliError(f"{option} {path}: is a directory; give the name of a file to write")
    parent = path.parent
    existing = _nearest_existing(parent)
    if not existing.is_dir():
        raise CliError(f"{option} {path}: {existing} is a file, not a directory")
    if existing != parent:
        raise CliError(f"{option} {path}: directory {parent} does not exist")
    why = _unwritable(path if path.exists() else parent)
    if why:
        raise CliError(f"{option} {path}: cannot write it ({why})")


def _check_output_dir(path: str | os.PathLike[str], option: str) -> None:
    """A directory the command will create (with its parents) or write into, checked before any work.

    Refused: an existing file, a path below a file, and a place that cannot be written. Nothing is
    created here, so a later bad input leaves no empty directory behind.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CliError(f"{option} {path}: exists and is not a directory")
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise CliError(f"{option} {path}: {existing} is a file, not a directory")
    why = _unwritable(existing)
    if why:
        raise CliError(f"{option} {path}: cannot write in {existing} ({why})")


def _check_new_directory(path: Path, option: str) -> None:
    """An output directory must be new or empty, so that nothing of an earlier run is overwritten."""
    _check_output_dir(path, option)
    if path.is_dir() and any(path.iterdir()):
        raise CliError(f"{option} {path}: directory is not empty (pick a new one, or --resume a "
                       "pre-training)")


def _check_db(path: str | os.PathLike[str], option: str) -> None:
    """A latency store to open (and create where it is missing): a directory, a file that is not
    SQLite, or a place that cannot be written is refused before anything is measured or read."""
    from nasrlm.measure import LatencyStoreError, check_store_path

    try:
        check_store_path(path)
    except LatencyStoreError as error:
        raise CliError(f"{option} {error}") from None
    path = Path(path)
    why = _unwritable(path if path.exists() else _nearest_existing(path.parent))
    if why:
        raise CliError(f"{option} {path}: cannot write it ({why})")


def _device(name: str, option: str = "--device") -> str:
    """``--device``: ``cpu``, ``cuda`` (``cuda:N``), or ``auto`` (CUDA where torch sees a GPU)."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise CliError(f"{option} {name}: torch sees no CUDA GPU on this machine (use cpu)")
    if name != "cpu" and not name.startswith("cuda"):
        raise CliError(f"{option} {name!r}: expected cpu, cuda, cuda:N or auto")
    return name


def torch_threads(threads: int | None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


# --- options --------------------------------------------------------------------------------------
def _positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (``--workers``, ``--budget``, ``--random``)."""
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, got {value}")
    return value


def _count(text: str) -> int:
    """An argparse type: a whole number of at least 0 (``--pretrain``, ``--equivalents``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    """An argparse type: a finite number above 0 (``--lr``, ``--minutes``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def _add_selection(p: argparse.ArgumentParser, allow_all: bool = False) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--arch", action="append", metavar="ID",
                       help="architecture id (repeat for several); quote it, ids contain '|'")
    group.add_argument("--random", type=_positive_int, metavar="N", help="N distinct random architectures")
    if allow_all:
        group.add_argument("--all", action="store_true", help="every architecture of a finite space")
    p.add_argument("--seed", type=_count, default=0, help="seed for --random (default 0)")


class _Alias(argparse.Action):
    """An option kept under an old name: it sets the new option's value and says on stderr that it is an
    alias (``--init`` of ``--base``)."""

    def __init__(self, option_strings: list[str], dest: str, *, of: str, **kwargs) -> None:
        super().__init__(option_strings, dest, help=f"the old name of {of}", **kwargs)
        self.of = of

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        _say_alias(str(option_string), self.of)
        setattr(namespace, self.dest, values)


def _say_alias(old: str, new: str) -> None:
    """Say on stderr that option ``old`` is kept as an alias of ``new``."""
    print(f"nasrlm: {old} is an alias of {new}", file=sys.stderr)


class _Options(Protocol):
    """What options are added to: a parser, or a group of one."""

    def add_argument(self, *names: str, **options: Any) -> argparse.Action: ...


def _add_base(p: _Options, help: str) -> None:
    """``--base BASE`` (``shipped``: the package's base; a directory ``nasrlm pretrain`` wrote), and its old
    name ``--init``: one name for "start from this base model" in every command."""
    p.add_argument("--base", metavar="BASE", help=help)
    p.add_argument("--init", dest="base", metavar="BASE", action=_Alias, of="--base")


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N, or auto (default: CUDA where torch sees a GPU, else CPU)")


def _add_threads(p: argparse.ArgumentParser, note: str = "") -> None:
    p.add_argument("--threads", type=_positive_int, help=f"torch CPU threads (default: torch's choice){note}")


def _add_label_options(p: argparse.ArgumentParser) -> None:
    """``--jobs``, ``--cache`` and ``--no-cache``: how architectures' texts and labels are described
    (:mod:`nasrlm.label_cache`); they set ``NASRLM_JOBS`` / ``NASRLM_CACHE`` for the command and every
    process it starts."""
    p.add_argument("--jobs", type=_positive_int, metavar="N",
                   help="processes describing architectures (texts, labels) not in the label cache "
                        "(default: $NASRLM_JOBS, else every core)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache", metavar="DIR",
                       help="the label cache's folder (default: $NASRLM_CACHE, else $XDG_CACHE_HOME/nasrlm, "
                            "else ~/.cache/nasrlm)")
    cache.add_argument("--no-cache", action="store_true",
                       help="neither read nor write the label cache: describe every architecture afresh")


def _apply_label_options(args: argparse.Namespace) -> None:
    from nasrlm.label_cache import CACHE_ENV, JOBS_ENV

    if getattr(args, "jobs", None) is not None:
        os.environ[JOBS_ENV] = str(args.jobs)
    if getattr(args, "no_cache", False):
        os.environ[CACHE_ENV] = "off"
    elif getattr(args, "cache", None):
        folder = Path(args.cache).expanduser()
        if folder.exists() and not folder.is_dir():
            raise CliError(f"--cache {args.cache}: not a folder")
        os.environ[CACHE_ENV] = str(folder.resolve())


def _db_default() -> str:
    return os.environ.get("NASRLM_DB", DEFAULT_DB)


def _number(value: float) -> str:
    """A default for a help text, as a person writes it: 0.1, 0.02, 5e-4 (where ``:g`` gives 0.0005)."""
    if value == 0 or abs(value) >= 1e-3:
        return f"{value:g}"
    mantissa, exponent = f"{value:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


# --- commands: the base -----------------------------------------------------------------------------
class Command:
    """One ``nasrlm`` command: its options (:meth:`add_arguments`) beside what it does (:meth:`run`).

    ``add_arguments`` may import what the command needs anyway (torch, to read a default from a config
    object): it runs only when the command is chosen, so ``nasrlm spaces`` never pays for ``train``.
    """

    name: str
    help: str

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        """Add the command's arguments to its subparser ``p`` (which already has ``--plugin``)."""

    def run(self, args: argparse.Namespace) -> int:
        """Do the work; returns the exit status. Bad input raises :class:`CliError`."""
        raise NotImplementedError
