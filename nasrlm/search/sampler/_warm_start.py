"""What earlier studies and tables tell the RLMSampler before its first trial: its warm start.

Users of hardware-aware NAS search one space again and again (a new device, a new dataset, a new budget), so
a new study rarely starts from nothing. A *source* is an earlier ``optuna.Study`` that names its objectives
(``study.set_metric_names``; any sampler, any tool), a pandas ``DataFrame`` with an ``arch_id`` column (or
index), or the path of a CSV as ``nasrlm data`` writes it (a search's ``pareto.csv`` too). Each is read into
a :class:`WarmSource`: values by architecture and column name.

Against the new study's objectives, a column of the same name is *known*: the model trains on it as if the
new study had measured it (the accuracy of every network an earlier study trained). Every other column is
*evidence* (another device's latency, another dataset's accuracy): an input the prior reads for every
architecture, measured where a source measured it and estimated elsewhere (:class:`EvidenceInputs`). The
earlier front is where the start-up trials begin (:meth:`WarmStart.front_ids`). What the sampler reads
is free: only the new study's own evaluations count toward its budget and its front.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState

from nasrlm.data import BenchmarkTable, DataFileError, DataFileNotFoundError
from nasrlm.free_labels import ALL_FREE_OBJECTIVES
from nasrlm.metrics import pareto_mask
from nasrlm.priors.feature_prior import FeaturePrior
from nasrlm.priors.inputs import InputRoles
from nasrlm.search.sampler._arch_cache import SpaceMismatchError
from search_spaces import SearchSpace

#: What ``RLMSampler(warm_start=[...])`` takes: an ``optuna.Study``, a ``pandas.DataFrame``, a CSV's path, or
#: a :class:`WarmSource` read already (``Any``: nasrlm never imports pandas; a DataFrame is read by its
#: columns).
Source = Any
#: A table's column that orders its rows as they were evaluated (``pareto.csv`` has it): not a quantity.
EVALUATION_COLUMN = "evaluation"
#: Labels every architecture has anyway (parameters, MACs, graph labels): a source's column of that name
#: adds nothing.
_FREE = frozenset(o.name for o in ALL_FREE_OBJECTIVES)
#: Graph-label column of an evidence input: what the prior reads of an evidence column (see
#: :class:`EvidenceInputs`).
EVIDENCE_PREFIX = "evidence:"
#: Fewest architectures a source must have measured an evidence column on for the prior to read it.
MIN_EVIDENCE_ROWS = 5


class WarmStartError(ValueError):
    """A source the warm start cannot read: the message names it."""


@dataclass(frozen=True)
class WarmSource:
    """One source read: ``values`` (architectures, columns; NaN: not measured) and each column's direction
    (``True``: higher is better; ``None``: not said)."""

    label: str  # "study NAME" or the file's name
    arch_ids: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray
    maximize: tuple[bool | None, ...]
    #: the parameters of each architecture, where the source has them (a study's trials)
    params: tuple[dict[str, Any], ...] | None = None
    #: the rows or completed trials read (an architecture evaluated twice is one row of ``values``)
    read: int = 0

    def front(self) -> list[int]:
        """Rows of the source's Pareto front over the columns whose direction it says (a study's objectives),
        measured on every one of them; every row where it says none."""
        columns = [k for k, m in enumerate(self.maximize) if m is not None]
        rows = np.flatnonzero(np.isfinite(self.values[:, columns]).all(axis=1)) if columns else []
        if not columns or not len(rows):
            return list(range(len(self.arch_ids)))
        mask = pareto_mask(self.values[np.ix_(rows, columns)], [bool(self.maximize[k]) for k in columns])
        return [int(r) for r in rows[mask]]


def read_source(source: Source, space: SearchSpace, arch_id_of: Callable[[dict[str, Any]], str]
                ) -> WarmSource:
    """``source`` read against ``space`` (``arch_id_of`` names a trial's architecture from its parameters);
    one read already (a :class:`WarmSource`) as it is. A study without metric names, a missing or foreign
    file, a table of another space: :class:`WarmStartError` naming it."""
    if isinstance(source, WarmSource):
        return source
    if isinstance(source, optuna.Study):
        return _read_study(source, arch_id_of)
    if isinstance(source, (str, os.PathLike)):
        return _read_csv(Path(source), space)
    if type(source).__name__ == "DataFrame":
        return _read_frame(source, "a DataFrame", space)
    raise WarmStartError(f"warm_start: {type(source).__name__} is no source: give an optuna.Study, a pandas "
                         "DataFrame or a CSV's path")


def _read_study(study: optuna.Study, arch_id_of: Callable[[dict[str, Any]], str]) -> WarmSource:
    label = f"study {study.study_name}"
    if study.metric_names is None:
        raise WarmStartError(f"{label} does not name its objectives: name them with study.set_metric_names"
                             "([...]) (every study nasrlm search writes does)")
    trials = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values]
    by_arch: dict[str, int] = {}
    for k, t in enumerate(trials):
        try:
            by_arch.setdefault(arch_id_of(t.params), k)  # a repeated architecture: its first evaluation
        except SpaceMismatchError as error:
            raise WarmStartError(f"{label}: trial {t.number} is not of this space ({error})") from None
    kept = list(by_arch.values())
    values = np.array([trials[k].values for k in kept], dtype=np.float64).reshape(len(kept), -1)
    return WarmSource(label, tuple(by_arch), tuple(study.metric_names), values,
                      tuple(d == StudyDirection.MAXIMIZE for d in study.directions),
                      tuple(trials[k].params for k in kept), read=len(trials))


def _read_csv(path: Path, space: SearchSpace) -> WarmSource:
    """A CSV as ``nasrlm data`` writes it (``BenchmarkTable.read_csv``: ``name[unit]`` headers, a cost unit
    saying lower is better, its sidecar where there is one), read without pandas."""
    try:
        table = BenchmarkTable.read_csv(path)
    except (DataFileNotFoundError, DataFileError) as error:
        raise WarmStartError(str(error)) from None
    _check_ids(table.ids, path.name, space)
    keep = [k for k, o in enumerate(table.objectives) if o.name != EVALUATION_COLUMN]
    if not keep:
        raise WarmStartError(f"{path.name}: no column of values beside arch_id")
    return WarmSource(path.name, tuple(table.ids), tuple(table.objectives[k].name for k in keep),
                      np.asarray(table.values, dtype=np.float64)[:, keep],
                      tuple(table.objectives[k].higher_is_better for k in keep), read=len(table.ids))


def _check_ids(ids: Sequence[str], label: str, space: SearchSpace) -> None:
    bad = next((i for i in ids if not _parses(space, i)), None)
    if bad is not None:
        raise WarmStartError(f"{label}: {bad!r} is no architecture of space {space.name!r}: a table of "
                             "another space?")


def _read_frame(frame: Any, label: str, space: SearchSpace) -> WarmSource:
    """A table: ``arch_id`` (a column, else the index) and numeric columns named ``name`` or ``name[unit]``
    (as ``nasrlm data`` writes them; a cost unit, ms or MB, says lower is better)."""
    frame = frame.reset_index() if "arch_id" not in frame.columns and frame.index.name == "arch_id" else frame
    if "arch_id" not in frame.columns:
        raise WarmStartError(f"{label}: no arch_id column (a table as 'nasrlm data' writes it)")
    ids = [str(i) for i in frame["arch_id"]]
    _check_ids(ids, label, space)
    columns, maximize, values = [], [], []
    for header in frame.columns:
        name, unit = _header(str(header))
        if name in ("arch_id", EVALUATION_COLUMN):
            continue
        if frame[header].dtype.kind not in "fiub":
            raise WarmStartError(f"{label}: column {header!r} is not numeric")
        column = np.asarray(frame[header].to_numpy(), dtype=np.float64)
        columns.append(name)
        maximize.append(None if unit is None else unit not in ("ms", "s", "us", "MB", "M", "mJ", "J"))
        values.append(column)
    if not columns:
        raise WarmStartError(f"{label}: no column of values beside arch_id")
    rows: dict[str, int] = {}
    for k, arch_id in enumerate(ids):
        rows.setdefault(arch_id, k)
    table = np.column_stack(values)[list(rows.values())]
    return WarmSource(label, tuple(rows), tuple(columns), table, tuple(maximize), read=len(ids))


def _header(header: str) -> tuple[str, str | None]:
    """``acc[%]`` as ``("acc", "%")``; a plain ``acc`` as ``("acc", None)``."""
    match = re.fullmatch(r"(.+)\[(.*)\]", header)
    return (match[1], match[2]) if match else (header, None)


def _parses(space: SearchSpace, arch_id: str) -> bool:
    try:
        space.parse(arch_id)
    except Exception:  # noqa: BLE001 (a space raises what its parser raises)
        return False
    return True


@dataclass(frozen=True)
class WarmStart:
    """The sources as the new study reads them: rows by architecture over its ``known`` objectives (same
    names) and the ``evidence`` columns (the others), NaN where a source did not measure one."""

    sources: tuple[WarmSource, ...]
    known: tuple[str, ...]
    evidence: tuple[str, ...]
    arch_ids: tuple[str, ...]
    values: np.ndarray  # (arch_ids, known + evidence)

    @classmethod
    def of(cls, sources: Sequence[WarmSource], objectives: Sequence[str]) -> WarmStart:
        """The ``sources`` read for a study of ``objectives``: a column several sources have is one column;
        an architecture several sources measured keeps the first value of each."""
        names = list(dict.fromkeys(c for s in sources for c in s.columns))
        known = tuple(n for n in names if n in objectives)
        evidence = tuple(n for n in names if n not in objectives and n not in _FREE)
        columns = {n: j for j, n in enumerate((*known, *evidence))}
        rows: dict[str, np.ndarray] = {}
        for s in sources:
            for arch_id, row in zip(s.arch_ids, s.values, strict=True):
                out = rows.setdefault(arch_id, np.full(len(columns), np.nan))
                for name, value in zip(s.columns, row, strict=True):
                    j = columns.get(name)
                    if j is not None and np.isnan(out[j]):
                        out[j] = value
        values = np.array(list(rows.values()), dtype=np.float64).reshape(len(rows), len(columns))
        return cls(tuple(sources), known, evidence, tuple(rows), values)

    def describe(self) -> list[str]:
        """One line per source: what was read and how it is used."""
        lines = []
        for s in self.sources:
            known = [c for c in s.columns if c in self.known]
            evidence = [c for c in s.columns if c in self.evidence]
            use = (f"{', '.join(known)} known" if known else
                   "shares no objective with this study: evidence only")
            what = "trials" if s.params is not None else "rows"
            lines.append(f"warm start: {s.label}, {s.read} {what} of {len(s.arch_ids)} architectures; {use}"
                         + (f"; evidence {', '.join(evidence)}" if evidence else ""))
        return lines

    def known_values(self, arch_ids: Sequence[str], objectives: Sequence[str]) -> np.ndarray:
        """(len(arch_ids), len(objectives)): what the sources measured of each objective of each architecture
        (NaN where none did)."""
        rows = {arch_id: k for k, arch_id in enumerate(self.arch_ids)}
        out = np.full((len(arch_ids), len(objectives)), np.nan)
        found = [(i, rows[a]) for i, a in enumerate(arch_ids) if a in rows]
        if found:
            mine, theirs = (np.array(k) for k in zip(*found, strict=True))
            for j, name in enumerate(self.known):
                out[mine, list(objectives).index(name)] = self.values[theirs, j]
        return out

    def params(self, params_of: Callable[[str], dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Every architecture's parameters, by arch id: a study's trial's, else ``params_of``'s."""
        given = {a: p for s in self.sources if s.params is not None for a, p in zip(s.arch_ids, s.params,
                                                                                     strict=True)}
        return {a: given[a] if a in given else params_of(a) for a in self.arch_ids}

    def used(self, evaluated: Sequence[str], first: int = 10) -> str:
        """How a study's ``evaluated`` architectures (in evaluation order) met what the sources knew: of its
        ``first`` evaluations, how many were on a source's front, and of them all, how many a source had
        measured (the study evaluated them again; they count)."""
        fronts = {s.arch_ids[k] for s in self.sources for k in s.front()}
        measured = set(self.arch_ids)
        head = list(evaluated[:first])
        return (f"of the first {len(head)} evaluations, {sum(a in fronts for a in head)} were on an earlier "
                f"front; of all {len(evaluated)}, {sum(a in measured for a in evaluated)} were architectures "
                "a source had measured")

    def only(self, arch_ids: Sequence[str]) -> WarmStart:
        """The same, of ``arch_ids`` alone (those the space builds)."""
        keep = set(arch_ids)
        rows = [k for k, arch_id in enumerate(self.arch_ids) if arch_id in keep]
        return replace(self, arch_ids=tuple(self.arch_ids[k] for k in rows), values=self.values[rows])

    def rows(self, objectives: Sequence[str], extra: int) -> dict[str, list[float]]:
        """The rows that know an objective, as the surrogate learns them: by arch id, the values of
        ``objectives`` (NaN where not known), then ``extra`` columns no source knows (the constraints)."""
        out = np.full((len(self.arch_ids), len(objectives) + extra), np.nan)
        for j, name in enumerate(self.known):
            out[:, list(objectives).index(name)] = self.values[:, j]
        return {arch_id: list(row) for arch_id, row in zip(self.arch_ids, out, strict=True)
                if np.isfinite(row).any()}

    def front_ids(self, count: int | None = None) -> list[str]:
        """At most ``count`` (``None``: all) architectures of the sources' fronts (:meth:`WarmSource.front`),
        each once, among those this warm start holds: evenly spread along the fronts, each ordered by its
        first column, so that the first trials span the earlier front as Optuna users enqueue it."""
        held = set(self.arch_ids)
        ids: list[str] = []
        for s in self.sources:
            rows = sorted(s.front(), key=lambda k: s.values[k, 0] if np.isfinite(s.values[k, 0]) else np.inf)
            ids += [s.arch_ids[k] for k in rows if s.arch_ids[k] in held]
        ids = list(dict.fromkeys(ids))
        if count is not None and count < len(ids):
            ids = [ids[k] for k in np.unique(np.linspace(0, len(ids) - 1, max(count, 0)).round().astype(int))]
        return ids


class EvidenceInputs:
    """Each evidence column as an input the prior reads for every architecture: the value a source measured
    where there is one, else a forest's estimate from the graph labels fitted on those measured. A prior on
    graph labels alone sees nothing of another device's latency or another dataset's accuracy; with this
    input it reads them, as a new device's prior reads the seen devices (``nasrlm train --inputs``).
    ``label_names`` names the columns of ``labels_of``'s rows; the forest leaves out the counts a latency
    adds up (:data:`~nasrlm.free_labels.SUMMED_LABELS`), read by a cost's sum alone."""

    def __init__(self, warm: WarmStart, labels_of: Callable[[Sequence[str]], np.ndarray], seed: int,
                 label_names: Sequence[str] = ()) -> None:
        measured = np.isfinite(warm.values[:, len(warm.known):]).sum(axis=0)
        columns = [len(warm.known) + j for j, count in enumerate(measured) if count >= MIN_EVIDENCE_ROWS]
        self.names = tuple(EVIDENCE_PREFIX + warm.evidence[j - len(warm.known)] for j in columns)
        evidence = warm.values[:, columns]
        self._measured = {arch_id: row for arch_id, row in zip(warm.arch_ids, evidence, strict=True)}
        roles = InputRoles.of(label_names).keywords() if label_names else {}
        self._prior = FeaturePrior.fit(labels_of(list(warm.arch_ids)), evidence, kind="forest", seed=seed,
                                       **roles)[0] if self.names else None

    def of(self, arch_ids: Sequence[str], labels: np.ndarray) -> dict[str, np.ndarray]:
        """The inputs of ``arch_ids`` (whose free and graph labels are ``labels``), by :attr:`names`."""
        if self._prior is None:
            return {}
        out = self._prior.values(labels, np.zeros((len(arch_ids), len(self.names))))
        for k, arch_id in enumerate(arch_ids):
            measured = self._measured.get(arch_id)
            if measured is not None:
                out[k] = np.where(np.isnan(measured), out[k], measured)
        return {name: out[:, j] for j, name in enumerate(self.names)}


def read_warm_start(sources: Sequence[Source], space: SearchSpace, objectives: Sequence[str] = ()
                    ) -> WarmStart:
    """The ``sources`` read against a study of ``objectives`` in ``space`` (what ``RLMSampler(warm_start=)``
    reads at its first fit), for a report or for samplers that read no earlier study."""
    def arch_id_of(params: dict[str, Any]) -> str:
        try:
            return space.arch_id(space.suggest(optuna.trial.FixedTrial(params)))
        except ValueError as error:
            raise SpaceMismatchError(str(error)) from error

    return WarmStart.of([read_source(s, space, arch_id_of) for s in sources], objectives)


def earlier_front(sources: Sequence[Source], space: SearchSpace) -> list[dict[str, Any]]:
    """The parameters of every architecture on the sources' fronts (:meth:`WarmSource.front`), each once: what
    an Optuna user enqueues first (``study.enqueue_trial``) to warm-start a sampler that reads no earlier
    study, and what ``nasrlm search --warm-start`` gives its ``--compare`` samplers."""
    warm = read_warm_start(sources, space)
    params = warm.params(lambda arch_id: space.params_of(space.parse(arch_id)))
    return [params[arch_id] for arch_id in warm.front_ids()]
