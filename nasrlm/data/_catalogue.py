"""The one way a search space's published tables become a :class:`BenchmarkTable`.

Each space with published tables declares a :class:`Catalogue`: its columns by name (an
:class:`Objective` and where the numbers are: a field of a source, or a computation), how to read a source
(a data-dir file, or a package every install has), and how its rows are found (the ids asked for, checked,
or the space's default rows). :meth:`Catalogue.load` does the rest the same way for every space: it checks
the names (a did-you-mean listing the valid ones), reads each source it needs once, looks every row id up
once per source, adds the caller's ``extra`` (measured) columns, and builds the table. This is archai's
``add_objective(name, evaluator, ...)`` idea, declared per space instead of registered at run time.

The order of the checks is part of the contract (it decides which error a user sees first): names, then
the data directory, then the space's row hook (which may read sources before checking ids), then the
columns in the order asked, each reading its source the first time one needs it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from nasrlm.data._datadir import resolve_data_dir
from nasrlm.data._loader_utils import Extra, check_names, checked_extra, require_names
from nasrlm.data._table import BenchmarkTable, Objective


class Keyed(Protocol):
    """A source whose fields are looked up by row id: ``row_of[id]`` is a row of every ``columns`` array."""

    @property
    def row_of(self) -> Mapping[str, int]: ...

    @property
    def columns(self) -> Mapping[str, np.ndarray]: ...


@dataclass(frozen=True)
class Rows:
    """One source as read: its row keys in file order, and float columns (read-only) by field name."""

    keys: tuple[str, ...]
    row_of: Mapping[str, int]
    columns: Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Column:
    """One objective a space offers: field ``field`` of source ``source``, or what ``compute`` makes."""

    objective: Objective
    source: str  # a data-dir file (relative path), or one of the catalogue's ``installed`` sources
    field: str | None  # the source's field, looked up by row id; None where ``compute`` makes the values
    convert: Callable[[np.ndarray], np.ndarray] | None = None  # source value -> objective value
    compute: Callable[[Query], np.ndarray] | None = None  # values for ``query.row_ids``; reads its sources

    def read(self, query: Query) -> np.ndarray:
        """This column's values for the query's rows (NaN where the source has no value)."""
        if self.compute is not None:
            return self.compute(query)
        assert self.field is not None
        values = query.gather(self.source, self.field)
        return values if self.convert is None else self.convert(values)


@dataclass
class Query:
    """One :meth:`Catalogue.load` call, as the space's row hook and computed columns see it."""

    catalogue: Catalogue
    root: Path | None  # the resolved data directory
    ids: list[str] | None  # the ids asked for (not yet checked), None for the space's default rows
    names: list[str]  # the built-in objectives asked for, in order (``extra`` ones left out)
    extra: dict[str, tuple[Objective, Mapping[str, float]]]
    row_ids: list[str] = field(default_factory=list)  # the rows, once the row hook has found them
    #: row of each of ``row_ids`` in a source, -1 where absent; a row hook may fill it where the source is
    #: not keyed by our ids (NB101's module hashes), else it is looked up the first time a column needs it.
    located: dict[str, np.ndarray] = field(default_factory=dict)
    #: what a row hook works out for the space's own computed columns (OFA: the parsed architectures).
    state: dict[str, Any] = field(default_factory=dict)
    _sources: dict[str, Any] = field(default_factory=dict)

    def source(self, name: str) -> Any:
        """Source ``name`` as the catalogue's reader returns it, read once per call."""
        if name not in self._sources:
            self._sources[name] = self.catalogue.read(self.root, name)
        return self._sources[name]

    def needed_sources(self) -> list[str]:
        """Sources of the built-in objectives asked for, in catalogue order."""
        asked = set(self.names)
        return list(dict.fromkeys(c.source for n, c in self.catalogue.columns.items() if n in asked))

    def gather(self, source: str, name: str) -> np.ndarray:
        """Field ``name`` of a :class:`Keyed` source for every row (NaN where the source lacks the row)."""
        src: Keyed = self.source(source)
        rows = self.located.get(source)
        if rows is None:
            found = (src.row_of.get(i, -1) for i in self.row_ids)
            rows = self.located[source] = np.fromiter(found, np.intp, count=len(self.row_ids))
        column = src.columns[name]
        if not len(column):
            return np.full(len(rows), math.nan)
        return np.where(rows >= 0, column[np.maximum(rows, 0)], math.nan)


@dataclass(frozen=True)
class Catalogue:
    """What a space's published tables offer, and how its rows and sources are found."""

    space: str
    label: str  # the space in messages: "unknown NB201 objective 'x'"
    columns: Mapping[str, Column]  # by objective name, in listing order
    read: Callable[[Path | None, str], Any]  # (data dir, source) -> what columns read; the space caches it
    rows: Callable[[Query], list[str]]  # the rows: ``query.ids`` checked, or the space's default rows
    installed: frozenset[str] = frozenset()  # sources every install has (no data directory needed)
    fallback: Mapping[str, Column] = field(default_factory=dict)  # used instead where no data dir is given
    needs_a_name: bool = False  # refuse a call that names no objective

    @property
    def objectives(self) -> Mapping[str, Objective]:
        """Every built-in objective, keyed by name (data-dir versions where ``fallback`` has another)."""
        return MappingProxyType({name: column.objective for name, column in self.columns.items()})

    def fields(self, source: str) -> tuple[str, ...]:
        """Fields of ``source`` that columns look up, in catalogue order (what a reader must parse)."""
        return tuple(c.field for c in self.columns.values() if c.source == source and c.field is not None)

    def column(self, name: str, root: Path | None) -> Column:
        """Column ``name`` given the data directory (its fallback where there is none)."""
        if root is None and name in self.fallback:
            return self.fallback[name]
        return self.columns[name]

    def available(self, data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
        """Objectives this data directory (``None``: ``$NASRLM_DATA``) or the installed sources can serve."""
        root = resolve_data_dir(data_dir)
        out = []
        for name in self.columns:
            column = self.column(name, root)
            if column.source in self.installed or (root is not None and (root / column.source).is_file()):
                out.append(column.objective)
        return out

    def load(self, objectives: Sequence[str], data_dir: str | os.PathLike[str] | None = None,
             ids: Sequence[str] | None = None, *, extra: Extra | None = None) -> BenchmarkTable:
        """Table of ``objectives`` (built-in or ``extra``) for ``ids`` or the space's default rows."""
        names = [objectives] if isinstance(objectives, str) else list(objectives)
        checked = checked_extra(extra, self.columns, self.label)
        if self.needs_a_name:
            require_names(names, self.columns, self.label)
        check_names(names, self.columns, checked, self.label)
        root = resolve_data_dir(data_dir)
        query = Query(self, root, None if ids is None else [ids] if isinstance(ids, str) else list(ids),
                      [n for n in names if n not in checked], checked)
        query.row_ids = self.rows(query)
        values = np.empty((len(query.row_ids), len(names)), dtype=np.float64)
        used: list[Objective] = []
        for j, name in enumerate(names):
            if name in checked:
                obj, mapping = checked[name]
                values[:, j] = [float(mapping[i]) if i in mapping else math.nan for i in query.row_ids]
            else:
                column = self.column(name, root)
                values[:, j] = column.read(query)
                obj = column.objective
            used.append(obj)
        return BenchmarkTable(self.space, query.row_ids, used, values,
                              str(root) if root is not None else None)
