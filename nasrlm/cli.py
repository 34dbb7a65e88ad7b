"""The ``nasrlm`` command line: spaces, objectives, export, measure, data, train, predict, eval, search, demo.

Bad input (unknown space, malformed id, unknown objective, missing file) prints one line on
stderr and exits with status 2; anything else that goes wrong is a bug and keeps its traceback.

Each command is a :class:`Command`: its arguments (``add_arguments``) beside what it does (``run``);
:data:`COMMANDS` lists them in the order of ``nasrlm --help``.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

import search_spaces
from exporters.latency import DeviceProfile
from nasrlm import __version__
from nasrlm.data import available_objectives, load_table, resolve_data_dir
from nasrlm.data._table import META_SUFFIX
from nasrlm.errors import NasrlmError
from nasrlm.presets import DECODER_TUNE, FINE_TUNE, PRETRAIN_SIZE, SIZES, TRAIN, TRAIN_SIZE

#: ``--prior``: the ``prior_kind`` values of ``RLMPredictor.fit`` (kept here so the CLI starts without numpy's
#: heavier neighbours; a test checks it against ``nasrlm.feature_prior.PRIOR_KINDS``)
PRIOR_KINDS = ("line", "auto", "forest", "ridge", "trend-forest")
#: Exit status for bad input, as argparse uses.
USAGE_ERROR = 2
#: ``nasrlm search --sampler`` choices (kept in step with :data:`nasrlm.search.SAMPLERS` by a test).
SAMPLER_NAMES = ("rlm", "random", "nsga2", "nsga3", "tpe", "tpe-mv", "gp")
#: Latency store used when ``--db`` is not given.
DEFAULT_DB = "latency.db"
#: Plug-ins (module names or .py files, comma-separated) imported before every command, like ``--plugin``.
PLUGINS_ENV = "NASRLM_PLUGINS"


class CliError(NasrlmError):
    """A problem with what the user asked for; printed as one line."""


# --- helpers ---------------------------------------------------------------------------------------
def _space(name: str) -> search_spaces.SearchSpace:
    try:
        return search_spaces.get_space(name)
    except search_spaces.UnknownSpaceError as error:
        raise CliError(f"{error}. A space of your own? Load it with 'nasrlm --plugin my_space.py ...' "
                       f"(or ${PLUGINS_ENV}), or install it under the entry-point group "
                       f"{search_spaces.ENTRY_POINT_GROUP}") from None


def load_plugins(plugins: Sequence[str]) -> None:
    """Import each plug-in so that its ``register_space`` calls run: spaces without an installed package.

    A plug-in is a module name (found on ``sys.path``) or the path of a ``.py`` file. A file is imported
    under its stem, with its folder put first on ``sys.path`` as when Python runs a script, so it can
    import modules beside it. Each is imported once per process, however often it is named.
    """
    for plugin in dict.fromkeys(p.strip() for p in plugins if p.strip()):
        if plugin.endswith(".py") or os.sep in plugin or (os.altsep and os.altsep in plugin):
            _import_file(Path(plugin))
            continue
        try:
            importlib.import_module(plugin)
        except ModuleNotFoundError as error:
            if error.name != plugin.split(".")[0] and error.name != plugin:
                raise _plugin_failed(plugin, error, None) from None  # it failed to import something
            raise CliError(f"plug-in module {plugin!r} not found on the Python path; pass the file instead "
                           f"(--plugin path/to/{plugin.rsplit('.', 1)[-1]}.py)") from None
        except Exception as error:
            raise _plugin_failed(plugin, error, None) from None


def _import_file(path: Path) -> None:
    if not path.is_file():
        raise CliError(f"plug-in file {str(path)!r} not found")
    path = path.resolve()
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if getattr(loaded, "__file__", None) and Path(loaded.__file__).resolve() == path:
            return
        raise CliError(f"plug-in {str(path)!r}: a module named {name!r} is already imported "
                       f"(from {getattr(loaded, '__file__', 'built-in')}); rename the file")
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as error:
        del sys.modules[name]
        if isinstance(error, Exception):
            raise _plugin_failed(str(path), error, path) from None
        raise


def _plugin_failed(plugin: str, error: Exception, path: Path | None) -> CliError:
    """One line for a plug-in whose import raised ``error``: where (file and line) and what.

    The place is the syntax error's, else the innermost frame in the plug-in's folder (``path``'s, or
    anywhere outside Python's import machinery for a module), else the innermost frame.
    """
    if isinstance(error, SyntaxError):
        where = f"{error.filename}:{error.lineno}"
        what = f"SyntaxError: {error.msg}"
    else:
        import traceback

        def is_own(filename: str) -> bool:
            if path is not None:
                return Path(filename).resolve().is_relative_to(path.parent)
            return "importlib" not in filename and filename != __file__

        frames = traceback.extract_tb(error.__traceback__)
        frame = ([f for f in frames if is_own(f.filename)] or frames)[-1]
        where = f"{frame.filename}:{frame.lineno}"
        what = f"{type(error).__name__}: {error}"
    return CliError(f"plug-in {plugin!r} failed to import: {where}: {what}")


def _arch_ids(space: search_spaces.SearchSpace, args: argparse.Namespace) -> list[str]:
    """The ids named by ``--arch``, ``--random N --seed S`` or ``--all``, validated and canonical."""
    if args.arch:
        return [space.arch_id(_parse_arch(space, a, "--arch")) for a in args.arch]
    if getattr(args, "all", False):
        if space.size is None:
            raise CliError(f"search space {space.name!r} is not enumerable; use --random N")
        return [space.arch_id(a) for a in space.enumerate()]
    return space.sample_ids(args.random, seed=args.seed)


def _parse_arch(space: search_spaces.SearchSpace, arch_id: str, where: str) -> Any:
    """``space.parse(arch_id)``, or a CliError naming ``where`` the id came from (an option, a file).

    Every space's ``parse`` raises ``ValueError`` for a malformed id (its documented contract), so
    that is the one exception turned into a user error here.
    """
    try:
        return space.parse(arch_id)
    except ValueError as error:
        raise CliError(f"{where}: {arch_id!r} is not a {space.name} architecture id ({error})") from None


def _check_table_ids(space: search_spaces.SearchSpace, ids: Sequence[str], path: str) -> None:
    """Every row id of the table ``path`` must be an architecture of ``space``: a table of another space
    (or a hand-edited row) would otherwise fail deep inside training or evaluation."""
    for k, arch_id in enumerate(ids):
        _parse_arch(space, arch_id, f"--data {path}, row {k + 1}")


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


def _comma_list(text: str) -> list[str]:
    """``"acc, pixel3,"`` -> ``["acc", "pixel3"]``: names of a comma-separated option, blanks dropped."""
    return [n.strip() for n in text.split(",") if n.strip()]


def _objective_names(text: str, option: str = "--objectives") -> list[str]:
    """A comma-separated objective list: at least one name, none twice, device profiles well-formed."""
    from nasrlm.measure import is_profile

    names = _comma_list(text)
    if not names:
        raise CliError(f"{option} needs at least one name, e.g. {option} acc,pixel3")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CliError(f"{option}: {', '.join(twice)} named twice")
    for name in names:
        if is_profile(name):
            _profile(name, option)
    return names


#: How many times the input an inference may hold in activations, for the memory check of a batch.
ACTIVATION_HEADROOM = 50


def _profile(name: str, option: str, *, run: bool = False,
             space: search_spaces.SearchSpace | None = None) -> DeviceProfile:
    """A device profile named by ``option``; with ``run``, one this machine's onnxruntime can time.

    A profile to run here may not use more threads than the machine has cores (the latencies would
    measure the oversubscription), nor a batch of ``space``'s inputs that, with activations, could
    not fit in the memory available now.
    """
    try:
        profile = DeviceProfile.parse(name)
    except ValueError as error:
        raise CliError(f"{option}: {error}") from None
    cores = os.cpu_count() or 1
    if run and profile.provider == "cpu" and profile.threads > cores:
        raise CliError(f"{option} {name}: {profile.threads} threads on a machine with {cores} cores would "
                       f"time the oversubscription; use at most cpu-{cores}t-b{profile.batch}")
    if run and space is not None:
        need = profile.batch * math.prod(space.input_shape) * 4 * ACTIVATION_HEADROOM
        available = _available_memory()
        if available is not None and need > available:
            raise CliError(f"{option} {name}: a batch of {profile.batch:,} {space.name} inputs may need "
                           f"about {need / 2**30:.1f} GiB with activations; {available / 2**30:.1f} GiB "
                           "are free")
    if run:
        import onnxruntime as ort

        wanted, available = profile.ort_providers[0], ort.get_available_providers()
        if wanted not in available:
            raise CliError(f"{option} {name}: needs onnxruntime's {wanted}, but this onnxruntime only has "
                           f"{', '.join(available)} (install onnxruntime-gpu for cuda profiles)")
    return profile


def _available_memory() -> int | None:
    """Bytes of memory available now (Linux ``MemAvailable``), or ``None`` where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _read_table(path: str, option: str = "--data") -> Any:
    """A table written by ``nasrlm data``, or a CliError naming ``option`` and the file."""
    from nasrlm.data import BenchmarkTable, DataFileError, DataFileNotFoundError

    try:
        return BenchmarkTable.read_csv(path)
    except (DataFileError, DataFileNotFoundError) as error:
        raise CliError(f"{option} {error}") from None


def _table_columns(table: Any, text: str | None, path: str, option: str = "--objectives") -> list[str]:
    """``--objectives`` of a table command: columns of the table at ``path`` (default: all of them)."""
    if not text:
        return list(table.names)
    names = _objective_names(text, option)
    absent = [n for n in names if n not in table.names]
    if absent:
        raise CliError(f"{option}: {', '.join(absent)} not among the columns of {path} "
                       f"({', '.join(table.names)})")
    return names


def _table_space(name: str | None, table: Any, path: str) -> search_spaces.SearchSpace:
    """``--space``, else the space recorded with the table at ``path``."""
    if name is None and table.space == "unknown":
        raise CliError(f"--data {path} records no search space (no {path}{META_SUFFIX}); give --space")
    return _space(name or table.space)


def _texts(space: search_spaces.SearchSpace, ids: Sequence[str], *, progress: bool = False) -> list[str]:
    """Canonical texts of ``ids``, through the label cache."""
    from nasrlm.free_labels import texts_and_free_labels

    return texts_and_free_labels(space, ids, progress=progress)[0]


def _load_base(path: str | None, objectives: Sequence[Any], space: str) -> Any:
    """``--init``/``--base``: a base model directory (``None``: the shipped one), or a one-line error
    naming it."""
    from nasrlm.predictor import RLMPredictor

    try:
        return RLMPredictor.from_base(path, objectives, space=space)
    except (NasrlmError, ValueError) as error:  # a file of it missing or unreadable; tags that clash
        raise CliError(f"{path or 'the shipped base model'}: not a usable base model ({error})") from None


def _zero_shot(space: Any) -> Any:
    """The shipped base, predicting ``space`` zero-shot; a one-line error where it has nothing to say."""
    from nasrlm.predictor import RLMPredictor

    try:
        predictor = RLMPredictor.zero_shot(space.name)
    except NasrlmError as error:
        raise CliError(str(error)) from None
    if not predictor.predicts:
        raise CliError(f"the shipped base model predicts nothing of {space.name} zero-shot: give a model "
                       "directory ('nasrlm train')")
    seen = "" if space.name in predictor.spaces else ", a space it never saw"
    columns = predictor.space_columns()
    print(f"zero-shot with the shipped base model ({space.name}{seen}): {', '.join(predictor.predicts)}"
          + (f"; --objectives may also name {', '.join(columns)}" if columns else ""), file=sys.stderr)
    return predictor


def _predicted(predictor: Any, objectives: str | None, model: str) -> tuple[str, ...]:
    """``--objectives`` of predict: the model's default, or names it was trained on for this space (a base's
    tags of other spaces, ``nb101:acc``, are not), else one line."""
    from nasrlm.transfer import TAG_SEPARATOR  # loaded with the model already

    if not objectives:
        return predictor.predicts
    names = tuple(_comma_list(objectives))
    untrained = [n for n in names if n not in predictor.trained_objectives or TAG_SEPARATOR in n]
    if untrained:
        known = dict.fromkeys((*predictor.predicts, *predictor.space_columns()))
        raise CliError(f"--objectives: {model} was never trained on {', '.join(untrained)} of this space "
                       f"(it predicts {', '.join(known)})")
    return names


def _load_model_for(path: str, space: Any) -> Any:
    """The model at ``path``, refused (one line) if it records the spaces it was trained on and
    ``space`` is not among them."""
    from nasrlm.predictor import RLMPredictor

    predictor = RLMPredictor.load(path)
    if predictor.spaces and space.name not in predictor.spaces:
        raise CliError(f"{path} was trained on {', '.join(predictor.spaces)} architectures, not "
                       f"{space.name}'s: its predictions for them would be extrapolation")
    return predictor


def _check_samples(samples: int) -> None:
    """``--samples``: at least one decoded sample per architecture (0 fails deep inside torch)."""
    if samples < 1:
        raise CliError(f"--samples {samples}: expected 1 or more decoder samples")


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


def _add_device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="auto",
                   help="cpu, cuda, cuda:N, or auto (default: CUDA where torch sees a GPU, else CPU)")


def _add_threads(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", type=_positive_int, help="torch CPU threads (default: torch's choice)")


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


class _Commands(argparse._SubParsersAction):
    """The subparsers of :data:`COMMANDS`: each gets its name and help at once (``nasrlm --help`` lists
    them) and its arguments when it is chosen (see :meth:`define`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.undefined: dict[str, Command] = {}

    def add_command(self, command: Command, parents: Sequence[argparse.ArgumentParser]) -> None:
        p = self.add_parser(command.name, help=command.help, parents=list(parents))
        p.set_defaults(func=command.run)
        self.undefined[command.name] = command

    def define(self, name: str) -> argparse.ArgumentParser:
        """The subparser of command ``name``, with its arguments added (once)."""
        command = self.undefined.pop(name, None)
        if command is not None:
            command.add_arguments(self.choices[name])
        return self.choices[name]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        self.define(values[0])  # argparse has checked the name against the choices
        super().__call__(parser, namespace, values, option_string)


# --- commands -------------------------------------------------------------------------------------
class Spaces(Command):
    name = "spaces"
    help = "list the search spaces"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args: argparse.Namespace) -> int:
        rows = [_space(name).describe() for name in search_spaces.available_spaces()]
        if args.json:
            print(json.dumps(rows, indent=2))
            return 0
        for row in rows:
            size = f"{row['size']:,}" if row["size"] is not None else "unbounded"
            shape = "x".join(map(str, row["input_shape"]))
            print(f"{row['name']:<12} {size:>12} archs  input {shape:<12} {row['doc']}")
        return 0


class Export(Command):
    name = "export"
    help = "architecture -> canonical ONNX text or ONNX model"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        _add_selection(p)
        p.add_argument("--format", choices=["text", "jsonl", "onnx"], default="text",
                       help="text (default; '# id' headers between several), jsonl, or onnx files")
        p.add_argument("-o", "--output", help="file (or directory for several onnx models); default stdout")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        space = _space(args.space)
        ids = _arch_ids(space, args)
        bar = tqdm(ids, desc=f"export {space.name}", unit="arch", disable=len(ids) < 50 or args.quiet)
        if args.format == "onnx" and args.output is None:
            raise CliError("--format onnx writes binary files: give -o FILE (one arch) or -o DIR (several)")
        if args.format == "onnx" and len(ids) > 1:
            _check_output_dir(args.output, "-o")
        elif args.output:
            _check_output_file(args.output, "-o")
        if args.format == "onnx":
            import onnx

            if len(ids) == 1:
                onnx.save_model(_built(space, ids[0], space.to_onnx, alone=True), args.output)
                print(f"wrote {args.output}", file=sys.stderr)
                return 0
            out = Path(args.output)
            out.mkdir(parents=True, exist_ok=True)
            failed = 0
            with open(out / "index.csv", "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["file", "arch_id"])
                for k, arch_id in enumerate(bar):
                    model = _built(space, arch_id, space.to_onnx)
                    if model is None:
                        failed += 1
                        continue
                    name = f"{space.name}_{k:05d}.onnx"
                    onnx.save_model(model, out / name)
                    writer.writerow([name, arch_id])
            print(f"wrote {len(ids) - failed} models and index.csv to {out}", file=sys.stderr)
            return _failures(failed, len(ids))
        stream = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115 - stdout is not ours to close
        failed = 0
        try:
            for arch_id in bar:
                text = _built(space, arch_id, space.to_text, alone=len(ids) == 1)
                if text is None:
                    failed += 1
                    continue
                if args.format == "jsonl":
                    stream.write(json.dumps({"space": space.name, "arch_id": arch_id, "text": text}) + "\n")
                elif len(ids) == 1:
                    stream.write(text)
                else:
                    stream.write(f"# {arch_id}\n{text}\n")
        finally:
            if stream is not sys.stdout:
                stream.close()
        return _failures(failed, len(ids))


def _built(space: search_spaces.SearchSpace, arch_id: str, build: Callable[[Any], Any], *,
           alone: bool = False) -> Any:
    """``build(space.parse(arch_id))``; where the space raises (a bug in it, not in the command), one
    warning line naming the architecture and None, or for the only architecture asked a one-line error."""
    from nasrlm.free_labels import failure_line

    try:
        return build(space.parse(arch_id))
    except Exception as error:
        message = failure_line(space, arch_id, "build", error)
        if alone:
            raise CliError(message) from None
        print(f"nasrlm: warning: {message}", file=sys.stderr)
        return None


def _failures(failed: int, total: int) -> int:
    """Exit status 1, with a line saying so, where some architectures failed; else 0."""
    if failed:
        print(f"nasrlm: {failed} of {total} architectures failed (see the warnings above)", file=sys.stderr)
    return 1 if failed else 0


class Measure(Command):
    name = "measure"
    help = "time architectures with onnxruntime on this machine (resumable)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--device", default="cpu-1t-b1",
                       help="profile 'cpu-<threads>t-b<batch>' or 'cuda-b<batch>' (default cpu-1t-b1)")
        _add_selection(p, allow_all=True)
        p.add_argument("--db", default=_db_default(),
                       help=f"SQLite latency store (default $NASRLM_DB or {DEFAULT_DB})")
        p.add_argument("--warmup", type=_count, default=10,
                       help="untimed runs per architecture (default 10)")
        p.add_argument("--runs", type=_positive_int, default=50,
                       help="timed runs per architecture (default 50)")
        p.add_argument("--json", action="store_true", help="print one JSON line per architecture")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.free_labels import failure_line
        from nasrlm.measure import LatencyStore, measure_archs

        space = _space(args.space)
        profile = _profile(args.device, "--device", run=True, space=space)
        ids = _arch_ids(space, args)
        _check_db(args.db, "--db")
        failed: list[str] = []

        def warn(arch_id: str, error: Exception) -> None:
            failed.append(arch_id)
            print(f"nasrlm: warning: {failure_line(space, arch_id, 'build or run', error)}", file=sys.stderr)

        with LatencyStore(args.db) as store:
            before = len(store.missing(space.name, ids, profile))
            results = measure_archs(space, ids, profile, store, warmup=args.warmup, runs=args.runs,
                                    progress=not args.quiet, on_error=warn)
        if not results:
            return _failures(len(failed), len(ids))
        if args.json:
            for arch_id, r in results.items():
                print(json.dumps({"arch_id": arch_id, "profile": r.profile, "median_ms": r.median_ms,
                                  "p10_ms": r.p10_ms, "p90_ms": r.p90_ms, "batch": r.batch,
                                  "threads": r.threads, "provider": r.provider}))
        elif len(results) <= 20:
            for arch_id, r in results.items():
                print(f"{r.median_ms:9.3f} ms  [{r.p10_ms:.3f}, {r.p90_ms:.3f}]  {arch_id}")
        medians = sorted(r.median_ms for r in results.values())
        print(f"{profile.name}: {before - len(failed)} measured now, {len(ids) - before} already in "
              f"{args.db}; "
              f"median latency {medians[len(medians) // 2]:.3f} ms (batch {profile.batch}, "
              f"range {medians[0]:.3f}-{medians[-1]:.3f} ms)", file=sys.stderr)
        return _failures(len(failed), len(ids))


class Data(Command):
    name = "data"
    help = "a table of objectives (published or measured), one row per architecture"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--objectives", required=True, help="comma-separated names, e.g. acc,pixel3,cpu-1t-b1")
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
        p.add_argument("--db", default=_db_default(), help="latency store for measured profiles")
        p.add_argument("-o", "--output", required=True, help="CSV file to write ('-' for stdout)")

    def run(self, args: argparse.Namespace) -> int:
        space = _space(args.space)
        names = _objective_names(args.objectives)
        if args.output != "-":
            _check_output_file(args.output, "-o")
            _check_output_file(args.output + META_SUFFIX, "-o")
        data_dir = resolve_data_dir(args.data_dir)
        extra = {}
        from nasrlm.measure import is_profile

        measured = [n for n in names if is_profile(n)]
        if measured:
            from nasrlm.measure import LatencyStore, measured_objective

            if not Path(args.db).exists():
                raise CliError(f"objective {measured[0]!r} is a measured profile but latency store "
                               f"{args.db} does not exist; run 'nasrlm measure {space.name} --device "
                               f"{measured[0]} ...'")
            _check_db(args.db, "--db")
            with LatencyStore(args.db) as store:
                for name in measured:
                    extra[name] = measured_objective(store, space.name, name)
        from nasrlm.free_labels import computed_objectives, computed_values

        computed = computed_objectives(space, names, data_dir)
        if computed:  # for the rows the other objectives have
            others = [n for n in names if n not in {o.name for o in computed}]
            if not others:
                raise CliError(f"--objectives: {', '.join(o.name for o in computed)} are computed for the "
                               f"architectures of the other objectives; name a published or measured one too")
            rows = load_table(space.name, others, data_dir, extra=extra).ids
            extra.update(computed_values(space, computed, rows))
        table = load_table(space.name, names, data_dir, extra=extra)
        if args.output == "-":
            with tempfile.TemporaryDirectory() as tmp:
                path = table.to_csv(Path(tmp) / "table.csv")
                sys.stdout.write(path.read_text())
        else:
            table.to_csv(args.output)
            print(f"wrote {len(table.ids):,} rows x {len(names)} objectives to {args.output} "
                  f"(+ {args.output}.meta.json)", file=sys.stderr)
        for objective in table.objectives:
            present = int((~np.isnan(table.column(objective.name))).sum())
            print(f"  {objective.header:<24} {present:>6,} values  source: {objective.source}",
                  file=sys.stderr)
        return 0


class Train(Command):
    name = "train"
    help = "train a regression language model on a 'nasrlm data' table"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.training import TrainConfig

        p.add_argument("--data", required=True, help="CSV written by 'nasrlm data'")
        p.add_argument("-o", "--output", required=True, help="model directory to write")
        p.add_argument("--objectives",
                       help="columns to learn, in decode order (default: all, as in the table)")
        p.add_argument("--space", help="search space (default: the one recorded with the table)")
        start = p.add_mutually_exclusive_group()
        start.add_argument("--init", metavar="BASE",
                           help="fine-tune the base model in directory BASE ('nasrlm pretrain') instead of "
                                "the one shipped in the package; columns it knows keep their tags, new ones "
                                "get new tags")
        start.add_argument("--scratch", action="store_true",
                           help="train a fresh model instead of fine-tuning the shipped base")
        start.add_argument("--size", choices=list(SIZES),
                           help=f"train a fresh model of this size (implies --scratch; its default is "
                                f"{TRAIN_SIZE})")
        p.add_argument("--pretrain", type=_count, default=0, metavar="N",
                       help="first pre-train a fresh model on free labels (params, MACs) of N random "
                            "architectures (implies --scratch)")
        p.add_argument("--prior", choices=("none", *PRIOR_KINDS), default="forest",
                       help="learn each objective as what a prior leaves unexplained: 'line' (a straight "
                            "line through the best free label: params, MACs), or on the free and graph "
                            "labels 'forest', 'ridge', 'trend-forest' (a line plus a forest on what it "
                            "leaves) or 'auto' (per objective, forest or ridge, whichever ranks the training "
                            "rows best out of sample); predict/eval compute the labels it reads (default: "
                            "%(default)s)")
        p.add_argument("--equivalents", type=_count, default=0, metavar="K",
                       help="also train on up to K architectures equivalent to each labelled one (e.g. NB201 "
                            "cells differing only in dead edges), labelled with the --carry objectives only")
        p.add_argument("--carry", help="objectives equivalent architectures share (default: those in %%)")
        p.add_argument("--epochs", type=_positive_int,
                       help=f"maximum epochs, early stopping picks the best (default: enough for "
                            f"{FINE_TUNE.steps} steps when fine-tuning a base, {DECODER_TUNE.steps} with "
                            f"--prior none ({DECODER_TUNE.unvalidated_steps} below "
                            f"{DECODER_TUNE.min_validation_rows} rows), {TRAIN.max_epochs} from scratch)")
        p.add_argument("--batch-size", type=_positive_int, default=TrainConfig.batch_size)
        p.add_argument("--lr", type=_positive_float,
                       help=f"peak learning rate (AdamW; default {FINE_TUNE.learning_rate:g} when "
                            f"fine-tuning a base, {TRAIN.learning_rate:g} from scratch)")
        p.add_argument("--max-minutes", type=_positive_float, help="time budget per training phase")
        _add_device(p)
        p.add_argument("--seed", type=_count, default=0)
        _add_threads(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.free_labels import FREE_OBJECTIVES, texts_and_free_labels
        from nasrlm.predictor import RLMPredictor
        from nasrlm.training import TrainConfig

        _check_output_dir(args.output, "-o")  # before training, not after
        table = _read_table(args.data)
        space = _table_space(args.space, table, args.data)
        names = _table_columns(table, args.objectives, args.data)
        objectives = [table.objective(n) for n in names]
        values = np.stack([table.column(n) for n in names], axis=1)
        keep = ~np.isnan(values).all(axis=1)
        ids = [i for i, k in zip(table.ids, keep, strict=True) if k]
        values = values[keep]
        _check_table_ids(space, ids, args.data)
        if len(ids) < 2:
            raise CliError(f"{args.data} has fewer than two rows with a value for {', '.join(names)}")
        for name, column in zip(names, values.T, strict=True):
            if np.count_nonzero(~np.isnan(column)) < 2:
                raise CliError(f"{args.data}: column {name!r} has fewer than two values (leave it out with "
                               f"--objectives)")
            infinite = np.flatnonzero(np.isinf(column))
            if infinite.size:  # a model would learn it as the column's best or worst value
                raise CliError(f"{args.data}: column {name!r} of {ids[infinite[0]]} is "
                               f"{column[infinite[0]]:g}, which is not a measurement (leave a missing value "
                               "empty)")
        scratch = args.scratch or args.size is not None or args.pretrain > 0
        if args.init and args.pretrain:
            raise CliError("--init and --pretrain: a base model is already pre-trained; give one of them")
        torch_threads(args.threads)
        device = _device(args.device)
        if not scratch:
            predictor = _load_base(args.init, objectives, space.name)
            new = [n for n in names if n not in predictor.normalizers]
            print(f"fine-tuning {args.init or 'the shipped base model'} on {len(ids):,} architectures of "
                  f"{space.name}: {', '.join(names)}" + (f" (new: {', '.join(new)})" if new else ""),
                  file=sys.stderr)
        else:
            print(f"training on {len(ids):,} architectures of {space.name}: {', '.join(names)}",
                  file=sys.stderr)
            predictor = RLMPredictor.from_scratch(objectives, size=args.size or TRAIN_SIZE, seed=args.seed)
        predictor.to(device)
        # the language model alone reads the text as the base learned to, and learns to decode from it
        decoder_only = not scratch and args.prior == "none"
        schedule = TRAIN if scratch else DECODER_TUNE if decoder_only else FINE_TUNE
        settings = schedule.settings(len(ids), args.batch_size)
        settings.update({k: v for k, v in (("max_epochs", args.epochs), ("learning_rate", args.lr)) if v})
        config = TrainConfig(batch_size=args.batch_size, seed=args.seed, max_minutes=args.max_minutes,
                             freeze_encoder=decoder_only, progress=not args.quiet, **settings)
        if args.pretrain:
            pre_ids = space.sample_ids(args.pretrain, seed=args.seed + 1)
            pre_texts, labels = texts_and_free_labels(space, pre_ids, progress=not args.quiet)
            print(f"pre-training on free labels of {len(pre_ids):,} architectures", file=sys.stderr)
            predictor.fit(pre_texts, labels, [o.name for o in FREE_OBJECTIVES], config)
        derived_from = None
        if args.equivalents:
            ids, values, derived_from = _with_equivalents(space, ids, values, objectives, args)
        prior = None if args.prior == "none" else args.prior
        if prior:
            print(f"{prior} prior on the free labels{'' if prior == 'line' else ' and graph labels'}: the "
                  "model learns what it leaves unexplained", file=sys.stderr)
        # a base keeps the normalisers of what it knows (the free labels decoded first among them); prior
        # residuals and new columns get their own
        refit = list(names) if prior else (True if scratch else new)
        report = predictor.fine_tune(space, ids, values, names, config, prior=prior, refit_normalizers=refit,
                                     derived_from=derived_from, progress=not args.quiet)
        if prior not in (None, "line") and predictor.transfer is not None:
            print(f"the prior also reads what {predictor.transfer.sources[0].space}'s published accuracy "
                  "says of each architecture (the base's transfer forest of the space most like this one)",
                  file=sys.stderr)
        predictor.to("cpu").save(args.output)
        print(f"saved {args.output}: best epoch {report.best_epoch + 1} of {len(report.train_loss)} "
              f"({report.stopped_by}), {report.seconds:.0f} s", file=sys.stderr)
        if predictor.residual_weights:
            from nasrlm.predictor import MIN_VALIDATION_ROWS

            rows = len(report.validation_rows)
            source = (f"weighed on {rows} validation rows" if rows >= MIN_VALIDATION_ROWS else
                      f"not trusted: {rows} validation rows, {MIN_VALIDATION_ROWS} are needed to weigh it")
            print(f"share of the model's residual kept over the prior ({source}): "
                  + ", ".join(f"{k} {v:.2f}" for k, v in predictor.residual_weights.items()), file=sys.stderr)
        return 0


def _with_equivalents(space: search_spaces.SearchSpace, ids: list[str], values: np.ndarray,
                      objectives: Sequence[Any], args: argparse.Namespace
                      ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``ids`` and ``values`` followed by ``--equivalents`` rows, and their ``derived_from``."""
    from nasrlm.augment import equivalent_rows

    names = [o.name for o in objectives]
    if args.carry is not None:
        carried = _comma_list(args.carry)
    else:
        carried = [o.name for o in objectives if o.unit == "%"]
    absent = sorted(set(carried) - set(names))
    if absent:
        raise CliError(f"--carry: {', '.join(absent)} not among the objectives trained ({', '.join(names)})")
    if not carried:
        raise CliError(f"--equivalents: no objective is in % ({', '.join(names)}); name those equivalent "
                       "architectures share with --carry, e.g. --carry acc")
    extra = equivalent_rows(space, ids, values, names, carried, copies=args.equivalents, seed=args.seed)
    print(f"{len(extra.arch_ids):,} equivalent architectures of {len(set(extra.derived_from)):,} labelled "
          f"ones carry {', '.join(carried)}", file=sys.stderr)
    return extra.joined(ids, values)


class Fit(Command):
    name = "fit"
    help = "train the network of one architecture on image data (weights, trained ONNX)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.networks import FitRecipe, default_recipe

        recipe, digits = FitRecipe(), default_recipe("digits")
        p.add_argument("space")
        p.add_argument("--arch", required=True, metavar="ID", help="the architecture's id")
        p.add_argument("--dataset", default="digits",
                       help="digits (default: scikit-learn's 8x8 digits, no download), cifar10 or cifar100 "
                            "(extracted Python archives in --data-dir), or a directory with train/ and test/ "
                            "folders of one folder per class")
        p.add_argument("--data-dir", help="the directory holding cifar-10-batches-py/ or cifar-100-python/")
        p.add_argument("-o", "--output", required=True, help="directory to write (new or empty)")
        p.add_argument("--epochs", type=_positive_int, default=recipe.epochs, help="default %(default)s")
        p.add_argument("--batch-size", type=_positive_int,
                       help=f"default {recipe.batch_size} (NAS-Bench-201's), {digits.batch_size} on digits "
                            "(1,347 training images)")
        p.add_argument("--lr", type=_positive_float,
                       help=f"peak learning rate of SGD with Nesterov momentum {recipe.momentum:g}, weight "
                            f"decay {_number(recipe.weight_decay)}, annealed to 0 by a cosine "
                            f"(NAS-Bench-201's schedule; default {_number(recipe.learning_rate)}, "
                            f"{_number(digits.learning_rate)} on digits)")
        p.add_argument("--no-augment", action="store_true",
                       help="no random crops and flips (default: crops, and flips where the data allows)")
        _add_device(p)
        p.add_argument("--seed", type=_count, default=0, help="initial weights, batch order, augmentation")
        _add_threads(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    def run(self, args: argparse.Namespace) -> int:
        """Train one architecture's network on image data; save its weights, trained ONNX and a report."""
        from dataclasses import asdict, replace

        import onnx
        from safetensors.torch import save_model

        from nasrlm.images import BUILT_IN, load_images
        from nasrlm.networks import default_recipe, fit_network, trained_onnx

        output = Path(args.output)
        _check_new_directory(output, "-o")
        if args.data_dir is not None and args.dataset not in BUILT_IN[1:]:
            raise CliError(f"--data-dir is where cifar10 / cifar100 are extracted; --dataset {args.dataset} "
                           "does not read it")
        space = _space(args.space)
        arch = _parse_arch(space, args.arch, "--arch")
        torch_threads(args.threads)
        device = _device(args.device)
        input_shape = tuple(space.input_shape_of(arch))
        data = load_images(args.dataset, input_shape[1:], args.data_dir)
        recipe = default_recipe(args.dataset, args.epochs, args.seed)
        recipe = replace(recipe, batch_size=args.batch_size or recipe.batch_size,
                         learning_rate=args.lr or recipe.learning_rate, augment=not args.no_augment)
        arch_id = space.arch_id(arch)
        print(f"training {space.name} {arch_id} on {data!r} ({recipe.epochs} epochs, batch "
              f"{recipe.batch_size}, peak rate {recipe.learning_rate:g}, {device})", file=sys.stderr)
        module = space.to_torch(arch, seed=args.seed)
        result = fit_network(module, data, recipe, device=device, progress=not args.quiet)
        output.mkdir(parents=True, exist_ok=True)
        trained = trained_onnx(module, space.to_onnx(arch, seed=args.seed), (1, *data.image_shape))
        save_model(module, str(output / "weights.safetensors"))
        onnx.save(trained, output / "model.onnx")
        report = {"space": space.name, "arch": arch_id, "dataset": repr(data), "device": device,
                  "recipe": asdict(recipe), **result.to_json()}
        (output / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"test accuracy {result.test_accuracy[-1]:.2f} % after {len(result.test_accuracy)} epochs (the "
              f"weights saved; {result.seconds:.0f} s); wrote {output}/weights.safetensors, model.onnx, "
              "report.json")
        return 0


#: ``nasrlm pretrain``: the most of ``--minutes`` that describing architectures may take, and the least
#: that training gets however long the rows took.
LABEL_SHARE = 0.5
MIN_TRAINING_SHARE = 0.1


class Pretrain(Command):
    name = "pretrain"
    help = "pre-train one base model on every published table (then: train --init)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.pretraining import PretrainConfig

        config = PretrainConfig()
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
        p.add_argument("-o", "--output", required=True, help="base model directory to write (new or empty)")
        p.add_argument("--exclude", metavar="GLOBS",
                       help="columns to leave out, comma-separated globs over space:objective, "
                            "e.g. 'nb201:*acc*,*:pixel3' (a bare space name leaves out all its columns)")
        p.add_argument("--spaces", help="comma-separated spaces (default: every registered one)")
        p.add_argument("--minutes", type=_positive_float, default=config.minutes,
                       help=f"time budget of the whole run (default {config.minutes:g}): describing the "
                            f"architectures the label cache lacks takes at most {LABEL_SHARE:g} of it "
                            f"(rows not described by then are left out of this run, and those described "
                            f"are cached for the next), training the rest (at least {MIN_TRAINING_SHARE:g} "
                            f"of it); the learning rate decays over the training")
        p.add_argument("--max-steps", type=_positive_int, help="stop after this many steps")
        p.add_argument("--max-rows", type=_positive_int, help="labelled rows per space (default: all)")
        p.add_argument("--free-rows", type=_count, default=500,
                       help="random architectures per space with free labels only (default 500)")
        p.add_argument("--size", choices=list(SIZES), default=PRETRAIN_SIZE,
                       help=f"model size (default {PRETRAIN_SIZE})")
        p.add_argument("--batch-size", type=_positive_int, default=config.batch_size)
        p.add_argument("--lr", type=_positive_float, default=config.learning_rate,
                       help=f"peak learning rate (default {_number(config.learning_rate)})")
        p.add_argument("--resume", action="store_true",
                       help="continue the run saved in -o for --minutes more")
        p.add_argument("--ship", metavar="DIR",
                       help="when the run ends, also write the model into DIR with weights in float16 and "
                            "its pretraining.json (no optimiser state or rows): how the base shipped in the "
                            "package is made")
        _add_device(p)
        p.add_argument("--seed", type=_count, default=0)
        _add_threads(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.predictor import RLMPredictor
        from nasrlm.pretraining import (
            PRETRAINING_FILE,
            ROWS_FILE,
            PretrainConfig,
            PretrainState,
            collect_tasks,
            fit_normalizers,
            fit_transfer,
            load_tasks,
            parse_exclude,
            pretrain,
            save_tasks,
        )

        started = time.monotonic()
        output = Path(args.output)
        if args.ship:
            _check_output_dir(args.ship, "--ship")
        device = _device(args.device)
        torch_threads(args.threads)
        exclude = parse_exclude(args.exclude or "")
        config = PretrainConfig(minutes=args.minutes, max_steps=args.max_steps, batch_size=args.batch_size,
                                learning_rate=args.lr, seed=args.seed, progress=not args.quiet)
        log = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
        if args.resume:
            _check_output_dir(output, "-o")
            state = _resumable(output)
            if state.exclude != exclude:
                before, now = ",".join(state.exclude) or "(none)", ",".join(exclude) or "(none)"
                raise CliError(f"--resume: {output} was pre-trained with --exclude {before}, not {now}")
            predictor, tasks = RLMPredictor.load(output), load_tasks(output / ROWS_FILE)
            state.finished = False
            config.minutes += state.seconds / 60  # the budget counts what the earlier runs spent
            log(f"resuming {output} at step {state.step:,} ({state.seconds / 60:.1f} min spent)")
        else:
            _check_new_directory(output, "-o")
            spaces = _comma_list(args.spaces) if args.spaces else None
            for name in spaces or []:
                _space(name)
            data_dir = resolve_data_dir(args.data_dir)  # --data-dir, else $NASRLM_DATA
            if data_dir is None:
                log("no data directory (--data-dir or $NASRLM_DATA): pre-training on free labels only")
            budget = 60 * args.minutes
            tasks, objectives = collect_tasks(data_dir, exclude=exclude, spaces=spaces,
                                              free_rows=args.free_rows, max_rows=args.max_rows,
                                              seed=args.seed, progress=not args.quiet,
                                              until=started + LABEL_SHARE * budget, log=log)
            predictor = RLMPredictor.from_scratch(objectives, size=args.size, seed=args.seed)
            fit_normalizers(predictor, tasks)
            output.mkdir(parents=True, exist_ok=True)
            save_tasks(tasks, output / ROWS_FILE)
            transfer = fit_transfer(tasks, objectives, seed=args.seed)
            if transfer is not None:  # saved with the model at every checkpoint from now on
                predictor.transfer = transfer
                log("transfer forests: " + ", ".join(f"{s.space} ({s.rows:,} rows of {', '.join(s.tags)})"
                                                     for s in transfer.sources))
            left = budget - (time.monotonic() - started)  # the rows took their share: training the rest
            config.minutes = max(left, MIN_TRAINING_SHARE * budget) / 60
            state = PretrainState.start(tasks, config, exclude)
        tags = {o for t in tasks for o in t.objectives}
        rows = sum(len(t.texts) for t in tasks)
        log(f"pre-training on {rows:,} rows of {len(tasks)} spaces, {len(tags)} tags, "
            f"for {config.minutes:.1f} min on {device}")
        try:
            state = pretrain(predictor, tasks, config, output=output, state=state, device=device)
        except KeyboardInterrupt as interrupt:  # pretrain saved where it stood and says so
            raise KeyboardInterrupt(f"{interrupt.args[0]}; the same command with --resume continues "
                                    "it") from None
        print(f"saved base model {output}: {state.step:,} steps in {state.seconds / 60:.1f} min, "
              f"final loss {state.loss[-1]:.3f}", file=sys.stderr)
        if args.ship:  # the model, and what it saw (the rows and optimiser state stay behind)
            shipped = predictor.to("cpu").save(args.ship, half=True)
            shutil.copyfile(output / PRETRAINING_FILE, shipped / PRETRAINING_FILE)
            size = sum(f.stat().st_size for f in shipped.iterdir()) / 2**20
            print(f"shipped {shipped}: {size:.1f} MiB", file=sys.stderr)
        return 0


def _resumable(output: Path) -> Any:
    from nasrlm.pretraining import PRETRAINING_FILE, ROWS_FILE, PretrainState

    if not (output / PRETRAINING_FILE).is_file() or not (output / ROWS_FILE).is_file():
        raise CliError(f"--resume: {output} holds no pre-training run ({PRETRAINING_FILE}, {ROWS_FILE})")
    try:
        return PretrainState.load(output)
    except (ValueError, TypeError) as error:
        raise CliError(f"--resume: {output / PRETRAINING_FILE} is not readable: {error}") from None


class Predict(Command):
    name = "predict"
    help = "predicted distribution of every objective, as JSON"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("model", nargs="?",
                       help="model directory written by 'nasrlm train' (default: the base model shipped in "
                            "the package, zero-shot)")
        p.add_argument("--space", required=True)
        p.add_argument("--objectives",
                       help="comma-separated objectives to predict, in decode order (default: those the "
                            "model was trained on last; zero-shot, accuracy_rank)")
        _add_selection(p)
        p.add_argument("--samples", type=int, default=64, help="decoder samples per architecture")
        _add_device(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (on stderr)")

    def run(self, args: argparse.Namespace) -> int:

        _check_samples(args.samples)
        device = _device(args.device)
        space = _space(args.space)
        ids = _arch_ids(space, args)
        if args.model:
            predictor = _load_model_for(args.model, space).to(device)
        else:
            predictor = _zero_shot(space).to(device)
        objectives = _predicted(predictor, args.objectives, args.model or "the shipped base model")
        predictions = predictor.predict(_texts(space, ids, progress=not args.quiet), objectives,
                                        num_samples=args.samples,
                                        seed=args.seed,
                                        progress=not args.quiet, **predictor.known_labels(space, ids))
        out = {i: {k: v.to_dict() for k, v in p.items()} for i, p in zip(ids, predictions, strict=True)}
        print(json.dumps(out, indent=2))
        return 0


class Eval(Command):
    name = "eval"
    help = ("rank correlation of predictions with a 'nasrlm data' table, and the share of its values inside "
            "the central 80%% of the samples, as JSON")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("model")
        p.add_argument("--data", required=True)
        p.add_argument("--space", help="search space (default: the one recorded with the table)")
        p.add_argument("--objectives", help="columns to evaluate (default: every one the model predicts)")
        p.add_argument("--samples", type=int, default=64, help="decoder samples per architecture")
        p.add_argument("--seed", type=_count, default=0)
        _add_device(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true")

    def run(self, args: argparse.Namespace) -> int:
        from scipy import stats

        from nasrlm.calibration import central_coverage

        _check_samples(args.samples)
        device = _device(args.device)
        table = _read_table(args.data)
        space = _table_space(args.space, table, args.data)
        _check_table_ids(space, table.ids, args.data)
        predictor = _load_model_for(args.model, space).to(device)
        if args.objectives:
            names = _table_columns(table, args.objectives, args.data)
            untrained = [n for n in names if n not in predictor.trained_objectives]
            if untrained:
                raise CliError(f"--objectives: {args.model} was never trained on {', '.join(untrained)} "
                               f"(it predicts {', '.join(predictor.trained_objectives)})")
        else:
            names = [n for n in table.names if n in predictor.trained_objectives]
        if not names:
            raise CliError(f"none of {args.data}'s columns ({', '.join(table.names)}) is predicted by "
                           f"{args.model}")
        truth = np.stack([table.column(n) for n in names], axis=1)
        samples = predictor.sample(_texts(space, table.ids, progress=not args.quiet), names,
                                   num_samples=args.samples, seed=args.seed,
                                   progress=not args.quiet, **predictor.known_labels(space, table.ids))
        median = np.median(samples, axis=1)
        coverage = central_coverage(samples, truth)
        result = {}
        for k, name in enumerate(names):
            known = ~np.isnan(truth[:, k])
            predicted, actual = median[known, k], truth[known, k]
            result[name] = {"kendall": _json_number(stats.kendalltau(predicted, actual).statistic),
                            "spearman": _json_number(stats.spearmanr(predicted, actual).statistic),
                            "coverage80": _json_number(coverage[k]),
                            "n": int(known.sum())}
        print(json.dumps(result, indent=2, allow_nan=False))
        return 0


def _json_number(value: float) -> float | None:
    """``value``, or ``None`` (JSON ``null``) where it is undefined: a rank correlation of constant
    predictions, or of fewer than two rows, is NaN, which JSON has no word for."""
    return float(value) if np.isfinite(value) else None


class Objectives(Command):
    name = "objectives"
    help = "list the objectives a space can have ('nasrlm data', 'nasrlm search')"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")

    def run(self, args: argparse.Namespace) -> int:
        space = _space(args.space)  # an unknown name is an error, not an empty list
        from nasrlm.free_labels import FREE_OBJECTIVES, computed_objectives
        from nasrlm.search import TRAINED

        data_dir = resolve_data_dir(args.data_dir)
        for objective in available_objectives(space.name, data_dir):
            print(f"{objective.header:<28} {objective.description}")
        for objective in computed_objectives(space, [o.name for o in FREE_OBJECTIVES], data_dir):
            print(f"{objective.header:<28} {objective.description} (computed for any architecture)")
        print("cpu-<T>t-b<B>, cuda-b<B>      latency measured by 'nasrlm measure' (read from --db), or live "
              "by 'nasrlm search'")
        print(f"{TRAINED:<28} validation accuracy of the network trained by 'nasrlm search --train DATASET'")
        return 0


class Search(Command):
    name = "search"
    help = "multi-objective architecture search; writes plots and a report"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("space")
        p.add_argument("--objectives", required=True,
                       help="comma-separated, e.g. acc,pixel3 (tables), acc,cpu-1t-b1 (measured live) or "
                            "val_acc,cpu-1t-b1 (val_acc: each network trained here, see --train)")
        p.add_argument("--budget", type=_positive_int, required=True,
                       help="objective evaluations (completed trials)")
        p.add_argument("--sampler", choices=list(SAMPLER_NAMES), default="rlm",
                       help="default rlm; tpe-mv: multivariate TPE; gp: Optuna's Gaussian-process sampler")
        p.add_argument("--compare", metavar="NAMES", help="also run these samplers, e.g. random,nsga2,tpe")
        p.add_argument("--rlm-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an RLMSampler setting, e.g. num_candidates=4000 or temperature=2 (repeatable; "
                            "docs/sampler.md lists them)")
        p.add_argument("--base", metavar="BASE",
                       help="start every refit of the rlm sampler from this base model ('nasrlm pretrain')")
        p.add_argument("--device", default="cpu",
                       help="where the rlm sampler's model and the networks of --train run: cpu (default), "
                            "cuda, cuda:N or auto")
        p.add_argument("--train", metavar="DATASET",
                       help="for the objective val_acc, train each architecture's network on DATASET: digits "
                            "(the default: scikit-learn's digits, no download), cifar10, cifar100 (extracted "
                            "in --images-dir) or a folder of train/ and test/ class folders; networks below "
                            "the median of the finished ones after an epoch stop early")
        p.add_argument("--epochs", type=_positive_int, default=5,
                       help="epochs per network with val_acc (default %(default)s; as 'nasrlm fit' trains)")
        p.add_argument("--images-dir", help="the directory holding cifar-10-batches-py/ or cifar-100-python/")
        p.add_argument("--seed", type=_count, default=0)
        p.add_argument("--storage", help="Optuna storage URL, e.g. sqlite:///study.db or "
                                         "postgresql://user@host/db (resumes; workers on other machines join "
                                         "it); default memory")
        p.add_argument("--study-name", help="default <space>-<sampler>-seed<seed>")
        p.add_argument("--workers", type=_positive_int, default=1,
                       help="processes sharing the study and its budget (default 1; with more and no "
                            "--storage, the study is <out>/study.db)")
        p.add_argument("--out", help="output directory (default runs/<space>-<sampler>-seed<seed>)")
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
        p.add_argument("--db", help="latency store for measured objectives (default <out>/latency.db)")
        _add_threads(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.measure import is_profile
        from nasrlm.search import search_job, summary

        space = _space(args.space)
        names = _objective_names(args.objectives)
        for name in names:
            if is_profile(name):  # measured live, here
                _profile(name, "--objectives", run=True, space=space)
        compare = _comma_list(args.compare or "")
        unknown = [n for n in compare if n not in SAMPLER_NAMES]
        if unknown:
            raise CliError(f"--compare: unknown sampler {unknown[0]!r}; choose from "
                           f"{', '.join(SAMPLER_NAMES)}")
        if space.size is not None and args.budget > space.size:
            raise CliError(f"--budget {args.budget}: search space {space.name} has only {space.size:,} "
                           "architectures")
        rlm_only = [o for o, given in (("--rlm-option", args.rlm_option), ("--base", args.base),
                                       ("--device", args.device != "cpu" and "val_acc" not in names))
                    if given]
        if rlm_only and args.sampler != "rlm":
            raise CliError(f"{rlm_only[0]} applies to --sampler rlm, not {args.sampler}")
        options = _rlm_options(args.rlm_option)
        _check_rlm_options(options, space)
        if args.base:
            _load_base(args.base, [], space.name)  # a bad base is a one-line error now, not at the first fit
            options["base"] = args.base
        if args.device != "cpu" and args.sampler == "rlm":
            options["device"] = _device(args.device)
        _check_sampler(args.sampler, space, args.seed, options)
        training = _training(args, names)
        out = Path(args.out or f"runs/{space.name}-{args.sampler}-seed{args.seed}")
        _check_output_dir(out, "--out")
        if args.db:
            _check_db(args.db, "--db")
        data_dir = resolve_data_dir(args.data_dir)
        storage = args.storage
        if storage is not None:
            storage = _check_storage(storage, args.workers)
        study_name = args.study_name or f"{space.name}-{args.sampler}-seed{args.seed}"
        kept = storage or (f"sqlite:///{out.resolve() / 'study.db'}" if args.workers > 1 else None)
        _check_study(kept, study_name, names)
        torch_threads(args.threads)
        try:
            job = search_job(space, names, budget=args.budget, out_dir=out, sampler=args.sampler,
                             seed=args.seed, storage=storage, study_name=args.study_name, data_dir=data_dir,
                             db=args.db, compare=compare, sampler_options=options, workers=args.workers,
                             threads=args.threads, progress=not args.quiet,
                             command=_shown_command(sys.argv[1:]), training=training)
        except KeyboardInterrupt:
            raise Interrupted(_what_was_kept(kept, study_name)) from None
        for line in summary(job):
            print(line)
        return 0


class Interrupted(KeyboardInterrupt):
    """ctrl-C, with the one line that says what was kept."""


def _what_was_kept(storage: str | None, study_name: str) -> str:
    if storage is None:
        return ("interrupted: nothing kept (the study lived in memory); give --storage sqlite:///study.db to "
                "make a search resumable")
    import optuna
    from optuna.trial import TrialState

    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
        done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    except Exception:  # the study was never created: nothing to resume
        return f"interrupted before study {study_name!r} held any trial in {storage}"
    return (f"interrupted: {done} evaluations kept in {storage} (study {study_name!r}); run the same command "
            f"to resume")


def _training(args: argparse.Namespace, names: Sequence[str]) -> Any:
    """``--train``, ``--epochs``, ``--images-dir``: how ``val_acc`` is measured (``None`` without it)."""
    from nasrlm.networks import default_recipe
    from nasrlm.search import TRAINED, Training

    if TRAINED not in names:
        given = next((f"{o} {v}" for o, v in (("--train", args.train), ("--images-dir", args.images_dir))
                      if v is not None), None)
        if given is not None:
            raise CliError(f"{given}: trains networks for the objective {TRAINED}, which --objectives "
                           "does not name")
        return None
    dataset = args.train or Training.dataset
    return Training(dataset, args.images_dir, default_recipe(dataset, args.epochs, args.seed),
                    device=_device(args.device))


def _rlm_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values are JSON where they parse (2.5, true, {"d_model": 32}), else strings."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--rlm-option takes KEY=VALUE, got {pair!r}")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def _check_rlm_options(options: dict[str, Any], space: search_spaces.SearchSpace) -> None:
    """``--rlm-option`` values checked against :class:`RLMSampler`'s signature before any work: a name
    it lacks, a value of the wrong type (``num_candidates=abc``), a model setting ``RLMConfig`` lacks
    (which would otherwise fail at the first model fit), a bad base or device."""
    import typing

    from nasrlm.search import RLMSampler
    from nasrlm.search._job import RLM_OPTIONS

    hints = typing.get_type_hints(RLMSampler.__init__)
    for key, value in options.items():
        if key not in RLM_OPTIONS:
            raise CliError(f"--rlm-option: unknown rlm option {key!r}; choose from {', '.join(RLM_OPTIONS)}")
        if not _fits(value, hints[key]):
            raise CliError(f"--rlm-option {key}={json.dumps(value)}: expected {_kind(hints[key])}")
    if options.get("model") is not None:
        _check_model_settings(options["model"])
    if options.get("base") is not None:
        _load_base(options["base"], [], space.name)
    if "device" in options:
        options["device"] = _device(options["device"], "--rlm-option device")


def _check_model_settings(model: dict[str, Any]) -> None:
    """``--rlm-option model={...}``: only :class:`~nasrlm.model.RLMConfig` settings a user may change, each
    of its type and positive, and consistent together (``d_model`` a multiple of ``num_heads``)."""
    import dataclasses
    import typing

    from nasrlm.model import RLMConfig

    fixed = {"text_vocab_size", "text_pad_id", "objectives"}  # set from the tokenizer and the objectives
    hints = typing.get_type_hints(RLMConfig)
    known = [f.name for f in dataclasses.fields(RLMConfig) if f.name not in fixed]
    unknown = sorted(set(model) - set(known))
    if unknown:
        raise CliError(f"--rlm-option model: unknown setting(s) {', '.join(unknown)}; "
                       f"choose from {', '.join(known)}")
    for key, value in model.items():
        if not _fits(value, hints[key]):
            raise CliError(f"--rlm-option model: {key} {json.dumps(value)}: expected {_kind(hints[key])}")
        if key == "dropout" and not 0 <= value < 1:
            raise CliError(f"--rlm-option model: dropout {value}: expected a number in [0, 1)")
        if hints[key] is int and value < 1:
            raise CliError(f"--rlm-option model: {key} {value}: expected 1 or more")
    try:
        RLMConfig(text_vocab_size=1, text_pad_id=0, objectives=("x",), **model)
    except ValueError as error:
        raise CliError(f"--rlm-option model: {error}") from None


def _fits(value: Any, hint: Any) -> bool:
    """Whether a JSON value suits a type hint: ``int`` (not bool), ``float`` (or int), ``str``, ``bool``,
    ``dict``, ``None``, or a union of them; other hints (``Any``) take anything."""
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    hint = origin or hint
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (str, bool, dict, list):
        return isinstance(value, hint)
    return True


def _kind(hint: Any) -> str:
    """A type hint in words, for :func:`_fits`'s refusals: ``int | None`` -> "a whole number or null"."""
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_kind(arg) for arg in typing.get_args(hint))
    words = {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
             dict: 'a JSON object such as {"d_model": 64}', list: "a JSON list", type(None): "null"}
    return words.get(typing.get_origin(hint) or hint, str(hint))


def _check_sampler(name: str, space: search_spaces.SearchSpace, seed: int, options: dict[str, Any]) -> None:
    """Build the sampler once, as the search will: what its constructor refuses (``temperature=0``,
    ``model`` with ``base``) is refused before any file is written."""
    from nasrlm.search import make_sampler

    try:
        make_sampler(name, space, seed, options=options)
    except ValueError as error:  # RLMSampler checks its settings with ValueError
        raise CliError(f"--rlm-option: {error}") from None


def _shown_command(argv: Sequence[str]) -> str:
    """The command line as a report shows it: a ``--storage`` URL's password hidden."""
    shown = ["nasrlm", *argv]
    for k, arg in enumerate(shown):
        if arg.startswith("--storage="):
            shown[k] = "--storage=" + _without_password(arg.partition("=")[2])
        elif k and shown[k - 1] == "--storage":
            shown[k] = _without_password(arg)
    return " ".join(shown)


def _without_password(url: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _check_storage(url: str, workers: int) -> str:
    """``--storage``: a database URL that SQLAlchemy parses, of a database it knows, whose driver is
    installed; an SQLite file must be an SQLite database in a directory that exists. Refused before
    the run directory is made, with the URL (password hidden) in the message.

    Returns the URL to connect with: a PostgreSQL URL that names no driver gets psycopg 3, the one
    ``pip install "nasrlm[postgres]"`` installs (SQLAlchemy 2.0 would otherwise look for psycopg2).
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise CliError(f"--storage {url!r}: not a database URL; expected e.g. sqlite:///study.db or "
                       "postgresql://user@host/db") from None
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
        url = parsed.render_as_string(hide_password=False)
    shown = parsed.render_as_string(hide_password=True)
    try:
        dialect = parsed.get_dialect()
    except NoSuchModuleError:
        raise CliError(f"--storage {shown}: SQLAlchemy knows no database {parsed.drivername!r} "
                       "(e.g. sqlite, postgresql, mysql)") from None
    try:
        dialect.import_dbapi()
    except ImportError as error:
        hint = ' (pip install "nasrlm[postgres]")' if parsed.drivername == "postgresql+psycopg" else ""
        raise CliError(f"--storage {shown}: the {parsed.drivername} driver is not installed "
                       f"({error}){hint}") from None
    if parsed.get_backend_name() != "sqlite":
        return url
    if parsed.database in (None, "", ":memory:"):
        if workers > 1:
            raise CliError(f"--storage {shown}: several workers need a storage they share (a file, a server)")
        return url
    if parsed.database.startswith("file:"):
        return url
    if not Path(parsed.database).parent.is_dir():
        raise CliError(f"--storage {shown}: directory {Path(parsed.database).parent} does not exist")
    _check_db(parsed.database, "--storage")
    return url


def _check_study(storage: str | None, study_name: str, names: Sequence[str]) -> None:
    """A study to resume in an SQLite file must optimise the same objectives, in the same order.

    Only SQLite files that exist are opened here (cheap, local); a server's study is checked when the
    search connects.
    """
    if storage is None:
        return
    from sqlalchemy.engine import make_url

    parsed = make_url(storage)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or not Path(parsed.database).is_file():
        return
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:  # no such study yet: the search creates it
        return
    finally:
        optuna.logging.set_verbosity(verbosity)
    if study.metric_names is not None and list(study.metric_names) != list(names):
        raise CliError(f"--study-name {study_name}: the study in {parsed.database} optimises "
                       f"{', '.join(study.metric_names)}, not {', '.join(names)}; pick another --study-name")


class Demo(Command):
    name = "demo"
    help = "the main job: NB201 accuracy vs latency search, plots in runs/demo"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--budget", type=_positive_int, default=100, help="evaluations (default 100)")
        p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
        p.add_argument("--data-dir", help="use published tables (acc, pixel3) instead of live measurement")
        p.add_argument("--seed", type=_count, default=0)
        _add_threads(p)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        import time

        from nasrlm.search import search_job, summary

        start = time.perf_counter()
        _check_output_dir(args.out, "--out")
        data_dir = resolve_data_dir(args.data_dir)
        space = _space("nb201")
        names = ["acc", "pixel3"] if data_dir is not None else ["acc", "cpu-1t-b1"]
        where = (f"published tables in {data_dir}" if data_dir is not None else
                 "accuracy from analog-nasbench, latency measured live on this CPU")
        print(f"nasrlm demo: NAS-Bench-201, maximise {names[0]} and minimise {names[1]} ({where}); "
              f"{args.budget} evaluations with the RLM sampler, random search for comparison",
              file=sys.stderr)
        torch_threads(args.threads)
        job = search_job(space, names, budget=args.budget, out_dir=args.out, sampler="rlm", seed=args.seed,
                         data_dir=data_dir, compare=["random"], progress=not args.quiet,
                         command=_shown_command(sys.argv[1:]))
        for line in summary(job):
            print(line)
        seconds = time.perf_counter() - start
        print(f"done in {seconds:.0f} s; open {job.files['pareto']} and {job.files['report']}")
        return 0


# --- parser ---------------------------------------------------------------------------------------
#: The commands, in the order ``nasrlm --help`` lists them.
COMMANDS: tuple[Command, ...] = (Spaces(), Export(), Measure(), Data(), Train(), Fit(), Pretrain(), Predict(),
                                 Eval(), Objectives(), Search(), Demo())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nasrlm", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"nasrlm {__version__}")
    plugin_help = ("import this module or .py file first, so the search spaces it registers exist "
                   f"(repeatable; also ${PLUGINS_ENV}, comma-separated)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE|FILE.py", help=plugin_help)
    # the same option after the command (`nasrlm search --plugin my.py ...`), collected separately
    # because a subparser's default would overwrite what was given before the command
    plugins = argparse.ArgumentParser(add_help=False)
    plugins.add_argument("--plugin", action="append", default=[], dest="command_plugins",
                         metavar="MODULE|FILE.py", help=plugin_help)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", action=_Commands)
    for command in COMMANDS:
        sub.add_command(command, parents=[plugins])
    return parser


#: Exit status after ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; bad input is one line on stderr and exit status 2, as argparse does for usage.

    Only :class:`~nasrlm.errors.NasrlmError` is bad input: every command checks what the user gave
    (options, files, URLs) and raises one naming it. Any other exception is a bug and keeps its
    traceback, so that it is reported instead of hidden behind a line that blames the user.
    """
    args = build_parser().parse_args(argv)
    try:
        load_plugins([*os.environ.get(PLUGINS_ENV, "").split(","), *args.plugin, *args.command_plugins])
        _apply_label_options(args)
        return args.func(args)
    except NasrlmError as error:
        message = " ".join(str(error).split())  # one line, whatever the message held
        print(f"nasrlm: error: {message}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:  # e.g. `nasrlm export ... | head`
        return 0
    except KeyboardInterrupt as interrupt:  # ctrl-C: one line, no traceback, the shell's status for SIGINT
        print(f"nasrlm: {interrupt.args[0] if interrupt.args else 'interrupted'}", file=sys.stderr)
        return INTERRUPTED
