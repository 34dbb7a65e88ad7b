"""What a search already knows, read as :class:`~nasrlm.search.SearchResult` values: earlier studies (any
Optuna storage, any sampler, any tool that names its objectives) and tables (a CSV ``nasrlm data`` writes, or
a search's ``pareto.csv``). ``nasrlm plot`` draws them side by side.

A source is named as on the command line: a path to a CSV, or a storage URL (``sqlite:///study.db``,
``postgresql://...``), of which every study is read unless ``studies`` names some.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState

from nasrlm.data import BenchmarkTable, Objective
from nasrlm.errors import NasrlmError
from nasrlm.search._run import CONSTRAINTS_ATTR, SearchResult
from nasrlm.search.sampler._warm_start import EVALUATION_COLUMN  # with it, a table has a hypervolume curve


class SourceError(NasrlmError, ValueError):
    """A source that cannot be read as a study or a table: the message names it."""


def is_storage(source: str) -> bool:
    """Whether ``source`` names an Optuna storage (a URL) rather than a file."""
    return "://" in source


def read_sources(sources: Sequence[str], studies: Sequence[str] = ()) -> list[SearchResult]:
    """Every source's studies or table, in the order given; ``studies`` chooses among each storage's studies
    (a name no storage holds is an error). The result's ``sampler`` is the study's name or the file's, and
    ``extra["ordered"]`` says whether its rows come in evaluation order (a study's do; a table's only with an
    :data:`EVALUATION_COLUMN`)."""
    results: list[SearchResult] = []
    found: set[str] = set()
    for source in sources:
        if is_storage(source):
            read = read_studies(source, studies)
            found |= {r.study_name for r in read}
            results += read
        else:
            results.append(read_table(source))
    missing = [name for name in studies if name not in found]
    if missing:
        raise SourceError(f"--study {missing[0]}: no storage given holds it")
    return results


def warm_start_sources(sources: Sequence[str], studies: Sequence[str] = ()) -> list[optuna.Study | str]:
    """What ``nasrlm search --warm-start`` names, as ``RLMSampler(warm_start=)`` takes it: every study of each
    storage URL (those of ``studies`` it holds, when given; a name no storage holds is an error), and each
    CSV's path (a missing one is an error here, before any search)."""
    out: list[optuna.Study | str] = []
    found: set[str] = set()
    for source in sources:
        if not is_storage(source):
            if not Path(source).is_file():
                raise SourceError(f"--warm-start {source}: no such file")
            out.append(source)
            continue
        loaded = _load_studies(source, studies)
        found |= {study.study_name for study in loaded}
        out += loaded
    missing = [name for name in studies if name not in found]
    if missing:
        raise SourceError(f"--warm-start-study {missing[0]}: no storage given holds it")
    return out


def _load_studies(url: str, names: Sequence[str] = ()) -> list[optuna.Study]:
    """The studies of the storage ``url`` (those of ``names`` it holds, or all), loaded quietly; a storage
    that cannot be opened, or holds no study, is an error."""
    try:
        held = optuna.get_all_study_names(storage=url)
    except Exception as error:  # a URL SQLAlchemy cannot open, a file that is no database, ...
        raise SourceError(f"{url}: cannot be read as an Optuna storage ({type(error).__name__}: {error})"
                          ) from None
    if not held:
        raise SourceError(f"{url} holds no study")
    chosen = [n for n in held if n in names] if names else held
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return [optuna.load_study(study_name=name, storage=url) for name in chosen]
    finally:
        optuna.logging.set_verbosity(verbosity)


def read_studies(url: str, names: Sequence[str] = ()) -> list[SearchResult]:
    """The studies of the storage ``url`` (those of ``names`` it holds, or all); each must name its
    objectives."""
    return [_result(study, url) for study in _load_studies(url, names)]


def _result(study: optuna.Study, url: str) -> SearchResult:
    if study.metric_names is None:
        raise SourceError(f"study {study.study_name!r} in {url} does not name its objectives: name them with "
                          "study.set_metric_names([...]) (every study nasrlm search writes does)")
    source = f"study {study.study_name}"
    objectives = [Objective(name, "", "trial value", source, d == StudyDirection.MAXIMIZE)
                  for name, d in zip(study.metric_names, study.directions, strict=True)]
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    constraints = list(study.user_attrs.get(CONSTRAINTS_ATTR, []))
    constraints += [n for t in trials for n in t.constraints if n not in constraints]
    result = SearchResult.from_study(study, objectives, study.study_name, list(dict.fromkeys(constraints)))
    result.extra["ordered"] = True
    return result


def read_table(path: str) -> SearchResult:
    """The CSV at ``path`` as the evaluations of one search: its rows, ordered by the
    :data:`EVALUATION_COLUMN` where it has one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = BenchmarkTable.read_csv(path)  # a missing or foreign file: its one-line error
    names = [o.name for o in table.objectives]
    order, ordered = np.arange(len(table.ids)), EVALUATION_COLUMN in names
    if ordered:
        order = np.argsort(table.column(EVALUATION_COLUMN), kind="stable")
    keep = [k for k, n in enumerate(names) if n != EVALUATION_COLUMN]
    if not keep:
        raise SourceError(f"{path}: no objective column beside {EVALUATION_COLUMN!r}")
    values = table.values[order][:, keep]
    known = np.isfinite(values).all(axis=1)
    result = SearchResult(Path(path).name, [table.objectives[k] for k in keep],
                          [table.ids[k] for k in order[known]], values[known], study_name=str(path))
    result.extra["ordered"] = ordered
    result.extra["space"] = table.space
    if ordered:  # pareto.csv holds the front only: each row at the evaluation it came at
        result.extra["evaluations"] = table.column(EVALUATION_COLUMN)[order][known].astype(int).tolist()
    return result
