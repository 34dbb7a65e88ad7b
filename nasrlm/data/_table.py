"""Framework-free benchmark tables: one row per architecture, one float column per objective.

The CSV form is meant to be read by people and by any tool (``arch_id,acc[%],pixel3[ms]``); the JSON
sidecar keeps what a header cannot (descriptions, sources, optimisation direction, data directory), so a
table written by one run can be reloaded by another without guessing.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from nasrlm.data._datadir import DataFileError, DataFileNotFoundError

_FORBIDDEN = set(',[]"\n\r')
_HEADER_RE = re.compile(r"^(?P<name>[^\[\]]+)\[(?P<unit>[^\[\]]*)\]$")
#: units whose quantity is a cost; used only to guess ``higher_is_better`` for a CSV without sidecar.
_COST_UNITS = {"ms", "s", "us", "M", "MFLOPs", "GFLOPs", "MB", "J", "mJ", "W"}
META_SUFFIX = ".meta.json"


@dataclass(frozen=True)
class Objective:
    """What one column of a :class:`BenchmarkTable` measures, and where the numbers came from."""

    name: str  # e.g. "acc", "pixel3", "cpu-1t-b1"
    unit: str  # "%", "ms", "M", ...
    description: str  # one line: the measurement (dataset, epochs / device, batch size)
    source: str  # e.g. "nb201/cifar10_200ep.csv (data dir)" or "analog-nasbench baseline_accuracy"
    higher_is_better: bool

    def __post_init__(self) -> None:
        if not self.name or _FORBIDDEN & set(self.name) or self.name != self.name.strip():
            raise ValueError(f"objective name {self.name!r} must be non-empty, without surrounding spaces "
                             f"and without any of , [ ] \" or newlines (it becomes a CSV header)")
        if _FORBIDDEN & set(self.unit):
            raise ValueError(f"unit {self.unit!r} of objective {self.name!r} must not contain , [ ] \" "
                             f"or newlines")

    @property
    def header(self) -> str:
        """CSV column header, ``name[unit]`` (just ``name`` when the unit is empty)."""
        return f"{self.name}[{self.unit}]" if self.unit else self.name


@dataclass
class BenchmarkTable:
    """Objective values of a set of architectures of one search space; NaN marks a missing value."""

    space: str
    ids: list[str]  # canonical arch ids, one row each
    objectives: list[Objective]
    values: np.ndarray  # float64, shape (len(ids), len(objectives)), NaN = missing
    data_dir: str | None = field(default=None)  # where data-dir sources were read from, if any

    def __post_init__(self) -> None:
        self.ids = list(self.ids)
        self.objectives = list(self.objectives)
        self.values = np.asarray(self.values, dtype=np.float64)
        if self.values.size == 0:
            self.values = self.values.reshape(len(self.ids), len(self.objectives))
        if self.values.shape != (len(self.ids), len(self.objectives)):
            raise ValueError(f"values has shape {self.values.shape}, expected "
                             f"({len(self.ids)}, {len(self.objectives)}) = (ids, objectives)")
        if len(set(self.ids)) != len(self.ids):
            rows: dict[str, int] = {}
            for row, arch_id in enumerate(self.ids):
                if arch_id in rows:
                    raise ValueError(f"arch id {arch_id!r} is in rows {rows[arch_id] + 1} and {row + 1}")
                rows[arch_id] = row
        names = self.names
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate objective names in table: {names}")

    @property
    def names(self) -> list[str]:
        """Objective names, in column order."""
        return [o.name for o in self.objectives]

    def objective(self, name: str) -> Objective:
        """The :class:`Objective` called ``name``."""
        return self.objectives[self._index(name)]

    def column(self, name: str) -> np.ndarray:
        """Values of objective ``name`` for every row (a view; NaN where missing)."""
        return self.values[:, self._index(name)]

    def _index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no objective {name!r} in this table; it has {', '.join(self.names)}") from None

    # --- CSV --------------------------------------------------------------------------------------
    def to_csv(self, path: str | os.PathLike[str]) -> Path:
        """Write ``path`` (values repr-exact, missing as empty) and its ``<path>.meta.json`` sidecar."""
        path = Path(path)
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["arch_id", *(o.header for o in self.objectives)])
            for arch_id, row in zip(self.ids, self.values.tolist(), strict=True):
                w.writerow([arch_id, *("" if math.isnan(v) else repr(v) for v in row)])
        meta = {
            "space": self.space,
            "data_dir": self.data_dir,
            "objectives": [asdict(o) for o in self.objectives],
        }
        Path(str(path) + META_SUFFIX).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read_csv(cls, path: str | os.PathLike[str], space: str | None = None) -> BenchmarkTable:
        """Read a table written by :meth:`to_csv`.

        Without the sidecar, objectives come from the ``name[unit]`` headers with description and source
        "unknown", ``higher_is_better`` guessed from the unit (time/size/energy units: lower is better)
        and ``space`` taken from the argument (else "unknown").

        A file that is not there raises :class:`DataFileNotFoundError`; one that is not such a table
        (a directory, another CSV, a broken sidecar) :class:`DataFileError`; both name the file.
        """
        path = Path(path)
        if not path.exists():
            raise DataFileNotFoundError(f"{path}: no such file")
        if not path.is_file():
            raise DataFileError(f"{path}: not a file (expected a table written by 'nasrlm data')")
        try:
            with path.open(newline="", encoding="utf-8-sig") as f:  # a spreadsheet's byte-order mark
                rows = list(csv.reader(f))
        except (UnicodeDecodeError, csv.Error) as error:
            raise DataFileError(f"{path}: not a CSV table ({error})") from None
        if not rows or not rows[0] or rows[0][0] != "arch_id":
            raise DataFileError(f"{path}: not a benchmark table (the first header must be 'arch_id')")
        header, body = rows[0], rows[1:]
        try:
            parsed = [_parse_header(h) for h in header[1:]]
        except ValueError as error:
            raise DataFileError(f"{path}: {error}") from None
        meta_path = Path(str(path) + META_SUFFIX)
        data_dir: str | None = None
        if meta_path.is_file():
            objectives, meta_space, data_dir = _read_meta(meta_path)
            if [(o.name, o.unit) for o in objectives] != parsed:
                raise DataFileError(f"{meta_path} describes objectives {[o.header for o in objectives]} but "
                                    f"{path} has columns {header[1:]}")
            space = space or meta_space
        else:
            try:
                objectives = [Objective(name, unit, "unknown", "unknown", unit not in _COST_UNITS)
                              for name, unit in parsed]
            except ValueError as error:
                raise DataFileError(f"{path}: {error}") from None
        values = np.empty((len(body), len(objectives)), dtype=np.float64)
        lines: dict[str, int] = {}
        for i, row in enumerate(body):
            if len(row) != len(header):
                raise DataFileError(f"{path}: line {i + 2} has {len(row)} fields, expected {len(header)}")
            if row[0] in lines:
                raise DataFileError(f"{path}: arch id {row[0]!r} is on lines {lines[row[0]]} and {i + 2}")
            lines[row[0]] = i + 2
            try:
                values[i] = [float(v) if v != "" else math.nan for v in row[1:]]
            except ValueError as error:
                raise DataFileError(f"{path}: line {i + 2}: {error}") from None
        try:
            return cls(space or "unknown", [row[0] for row in body], objectives, values, data_dir)
        except ValueError as error:  # duplicate columns
            raise DataFileError(f"{path}: {error}") from None


def _read_meta(path: Path) -> tuple[list[Objective], str, str | None]:
    """Objectives, space and data directory of a ``.meta.json`` sidecar, or a DataFileError naming it."""
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:  # JSON or UTF-8
        raise DataFileError(f"{path}: not JSON ({error})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("objectives"), list):
        raise DataFileError(f"{path}: expected a JSON object with an 'objectives' list")
    try:
        objectives = [Objective(**o) for o in meta["objectives"]]
        return objectives, str(meta["space"]), meta.get("data_dir")
    except (KeyError, TypeError, ValueError) as error:
        raise DataFileError(f"{path}: not a table description ({type(error).__name__}: {error})") from None


def _parse_header(header: str) -> tuple[str, str]:
    """``"pixel3[ms]"`` -> ``("pixel3", "ms")``; ``"score"`` -> ``("score", "")``."""
    m = _HEADER_RE.match(header)
    if m:
        return m["name"], m["unit"]
    if "[" in header or "]" in header:
        raise ValueError(f"malformed column header {header!r}; expected 'name[unit]' or 'name'")
    return header, ""
