"""What a user names, checked and turned into objects, or a one-line :class:`CliError`: search spaces,
architecture ids, objectives, device profiles, ``nasrlm data`` tables and base models."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from typing import Any

import search_spaces
from exporters.latency import DeviceProfile
from nasrlm.cli._common import PLUGINS_ENV, CliError, _comma_list
from nasrlm.data._table import META_SUFFIX
from nasrlm.errors import NasrlmError


def _space(name: str) -> search_spaces.SearchSpace:
    try:
        return search_spaces.get_space(name)
    except search_spaces.UnknownSpaceError as error:
        raise CliError(f"{error}. A space of your own? Load it with 'nasrlm --plugin my_space.py ...' "
                       f"(or ${PLUGINS_ENV}), or install it under the entry-point group "
                       f"{search_spaces.ENTRY_POINT_GROUP}") from None


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


def _input_columns(table: Any, names: Sequence[str], ids: Sequence[str], path: str, option: str,
                   whose: str) -> dict[str, Any]:
    """The columns ``names`` of the table at ``path`` for the architectures ``ids``, each known for every one:
    what a prior reads beside the graph (``train --inputs``, and ``eval``/``predict`` of the model it wrote);
    ``whose``: who needs them, for the error."""
    import numpy as np

    absent = [n for n in names if n not in table.names]
    if absent:
        raise CliError(f"{option} {path}: {whose} reads {', '.join(absent)}, which are not among its columns "
                       f"({', '.join(table.names)})")
    row = {arch_id: k for k, arch_id in enumerate(table.ids)}
    missing = [i for i in ids if i not in row]
    if missing:
        raise CliError(f"{option} {path}: no row for {missing[0]!r} ({len(missing):,} architectures have "
                       f"none), whose {', '.join(names)} {whose} reads")
    rows = [row[i] for i in ids]
    columns = {n: table.column(n)[rows] for n in names}
    for name, column in columns.items():
        unknown = np.flatnonzero(~np.isfinite(column))
        if unknown.size:
            raise CliError(f"{option} {path}: column {name!r} of {ids[unknown[0]]} is empty; {whose} "
                           "reads it of every architecture")
    return columns


def _table_space(name: str | None, table: Any, path: str) -> search_spaces.SearchSpace:
    """``--space``, else the space recorded with the table at ``path``."""
    if name is None and table.space == "unknown":
        raise CliError(f"--data {path} records no search space (no {path}{META_SUFFIX}); give --space")
    return _space(name or table.space)


def _load_base(base: str, objectives: Sequence[Any], space: str) -> Any:
    """The base model ``--base`` names (``shipped``, or a directory) ready to fine-tune on ``objectives`` of
    ``space``, or a one-line error naming it: where the base is resolved, once."""
    from nasrlm.rlm.predictor import RLMPredictor

    try:
        return RLMPredictor.from_base(base, objectives, space=space)
    except (NasrlmError, ValueError) as error:  # a file of it missing or unreadable; tags that clash
        raise CliError(f"--base {base}: not a usable base model ({error})") from None
