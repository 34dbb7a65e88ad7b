"""Labels that cost nothing, read off the ONNX graph: parameters, multiply–accumulates, structure.

They exist for every architecture of every space, so the regression model can be pre-trained on
thousands of them before it sees the few expensive labels (accuracy, measured latency). Two kinds:
:data:`FREE_OBJECTIVES` (parameter count and MACs), which the decoder is given before it writes any
expensive label, and :data:`GRAPH_OBJECTIVES`, structural counts of operator families along the
graph's input→output paths (:func:`exporters.graph_features`), which teach the encoder to read the
graph and feed the prior.
"""

from __future__ import annotations

import concurrent.futures
import gc
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import onnx
from tqdm.auto import tqdm

from exporters import FEATURE_NAMES, describe_graph, to_text
from nasrlm._processes import can_fork_workers, usable_cores
from nasrlm.data import Objective
from nasrlm.errors import NasrlmError
from nasrlm.label_cache import JOBS_ENV, LabelCache, default_cache, space_key
from search_spaces import SearchSpace

#: Bumped whenever a free label's or the canonical text's definition changes, so that caches of them
#: (:mod:`nasrlm.label_cache`) can tell theirs is stale (2: MACs count only the nodes the output depends
#: on; 3: the graph labels; 4: their block counts; 5: no path through a product with zero; 6: the order
#: of families along a block's paths; 7: each family's nodes, live or not).
FREE_LABELS_VERSION = 7
#: The oldest version whose labels all mean today what they meant then (later ones only added labels): what
#: was fitted on them (a base's transfer forest, :mod:`nasrlm.priors.transfer`) reads today's by name.
SAME_LABELS_SINCE = 6

FREE_OBJECTIVES: tuple[Objective, ...] = (
    Objective("params_m", "M", "trainable parameters, counted on the exported ONNX graph",
              "nasrlm (ONNX graph)", higher_is_better=False),
    Objective("macs_m", "M", "multiply-accumulates of the Conv/Gemm/MatMul nodes the output depends on",
              "nasrlm (ONNX graph)", higher_is_better=False),
)

#: The free labels by name (parameters, MACs): what a column name is checked against, and among a prior's
#: inputs those ``auto``'s simplest line follows (:meth:`~nasrlm.priors.feature_prior.FeaturePrior.fit`).
FREE_LABEL_NAMES = frozenset(o.name for o in FREE_OBJECTIVES)

_GRAPH_DESCRIPTIONS = {
    "log10_paths": "base-10 logarithm of the number of input-to-output paths",
    "compute_path": "convolutions and fully connected layers on an input-to-output path",
    "nodes": "live {family} nodes",
    "all": "{family} nodes, live or not (a device computes them all)",
    "path_mean": "{family} nodes on an input-to-output path, mean over all paths",
    "path_min": "{family} nodes on an input-to-output path, fewest",
    "path_max": "{family} nodes on an input-to-output path, most",
    "segments": "segments of the graph between nodes that every input-to-output path passes through",
    "segment_paths": "paths across each such segment, summed over the segments",
    "segment_paths_": "paths across each segment that meet a {family} node, summed over the segments",
    "blocks": "calls of local functions (blocks, cells) in the main graph",
    "block_paths": "paths across each block's body, summed over the blocks",
    "block_paths_": "paths across each block's body that meet a {family} node, summed over the blocks",
    "block_compute_min": "fewest convolutions and fully connected layers on a path across a block, summed",
    "block_compute_max": "most convolutions and fully connected layers on a path across a block, summed",
    "block_pair_": "how often {first} is followed by {second} on a path across a block, with no node of any "
                   "family between them; over the block's paths, summed over the blocks",
}
_FAMILY_NAMES = {"conv1": "1x1 convolution", "conv3": "3x3 convolution", "conv5": "5x5-or-wider convolution",
                 "dwconv": "grouped or depthwise convolution", "fc": "fully connected", "pool": "pooling",
                 "compute": "convolution or fully connected"}
_PAIR_ENDS = {"start": "the block's input", "end": "the block's output"}
_LAYER = {"fc": " layer", "pool": " layer"}  # "a pooling layer", where "a 3x3 convolution" needs none


def _graph_objective(name: str) -> Objective:
    if name in _GRAPH_DESCRIPTIONS:
        text = _GRAPH_DESCRIPTIONS[name]
    elif name.startswith("block_pair_"):
        first, second = (_PAIR_ENDS.get(f) or f"a {_FAMILY_NAMES[f]}{_LAYER.get(f, '')}"
                         for f in name.removeprefix("block_pair_").split("_"))
        text = _GRAPH_DESCRIPTIONS["block_pair_"].format(first=first, second=second)
    elif name.startswith(("segment_paths_", "block_paths_")):
        prefix, family = name.rsplit("_", 1)
        text = _GRAPH_DESCRIPTIONS[prefix + "_"].format(family=_FAMILY_NAMES[family])
    elif name.startswith("compute_path_"):
        stat = {"min": "fewest", "max": "most", "mean": "mean over all paths"}[name.rsplit("_", 1)[1]]
        text = f"{_GRAPH_DESCRIPTIONS['compute_path']}, {stat}"
    else:
        family, stat = name.split("_", 1)
        text = _GRAPH_DESCRIPTIONS[stat].format(family=_FAMILY_NAMES[family])
    return Objective(name, "", text, "nasrlm (ONNX graph)", higher_is_better=False)


GRAPH_OBJECTIVES: tuple[Objective, ...] = tuple(_graph_objective(n) for n in FEATURE_NAMES)
#: Every free label, in column order of ``free_labels(..., graph=True)``.
ALL_FREE_OBJECTIVES: tuple[Objective, ...] = (*FREE_OBJECTIVES, *GRAPH_OBJECTIVES)
#: The labels a device's latency adds up (each family's nodes, live or not): only a cost's sum reads them,
#: as they are (:class:`~nasrlm.priors.models.SumForest`); no other model of a feature prior sees them.
SUMMED_LABELS = frozenset(o.name for o in GRAPH_OBJECTIVES if o.name.endswith("_all"))


class ArchitectureBuildError(NasrlmError, RuntimeError):
    """A space raised while building one of the architectures to describe (the message names it)."""


def failure_line(space: SearchSpace, arch_id: str, what: str, error: Exception) -> str:
    """One line: architecture ``arch_id`` of ``space`` failed to ``what`` (build, run), and the error."""
    return " ".join(f"{space.name} architecture {arch_id} failed to {what}: {type(error).__name__}: "
                    f"{error}".split())


#: What :func:`texts_and_free_labels` does with the label cache unless told: use the default one.
DEFAULT_CACHE = "default"
#: Architectures a worker process describes per task (and the cache is written per).
_CHUNK = 64
#: Below this many architectures to describe, one process does it: starting workers costs more.
_PARALLEL_FROM = 256


def free_labels(space: SearchSpace, arch_ids: Sequence[str], *, graph: bool = False,
                progress: bool = False, jobs: int | None = None,
                cache: LabelCache | str | None = DEFAULT_CACHE) -> np.ndarray:
    """Millions of parameters and of multiply–accumulates, one row per id: ``(len(arch_ids), 2)``;
    with ``graph``, followed by the :data:`GRAPH_OBJECTIVES` (columns of :data:`ALL_FREE_OBJECTIVES`).
    ``jobs`` and ``cache``: as for :func:`texts_and_free_labels`."""
    return texts_and_free_labels(space, arch_ids, graph=graph, progress=progress, texts=False, jobs=jobs,
                                 cache=cache)[1]


def texts_and_free_labels(space: SearchSpace, arch_ids: Sequence[str], *, graph: bool = False,
                          progress: bool = False, texts: bool = True, jobs: int | None = None,
                          cache: LabelCache | str | None = DEFAULT_CACHE) -> tuple[list[str], np.ndarray]:
    """Canonical texts (as ``space.to_text`` prints them) and :func:`free_labels`, one ONNX build each.

    What the regression model needs of every architecture; ``texts=False`` skips the texts. Each is
    read from the label cache where it is there (``cache``: a :class:`~nasrlm.label_cache.LabelCache`,
    ``"default"`` for :func:`~nasrlm.label_cache.default_cache`, None for none) and described otherwise,
    in ``jobs`` processes (default: every core), then written to the cache. See :func:`describe`.
    """
    described: dict[str, tuple[str, np.ndarray]] = {}
    for chunk in describe(space, arch_ids, graph=graph, texts=texts, jobs=jobs, cache=cache,
                          progress=progress):
        described.update(chunk)
    columns = len(ALL_FREE_OBJECTIVES) if graph else len(FREE_OBJECTIVES)
    labels = np.array([described[i][1][:columns] for i in arch_ids], dtype=np.float64)
    return ([described[i][0] for i in arch_ids] if texts else []), labels.reshape(len(arch_ids), columns)


def describe(space: SearchSpace, arch_ids: Sequence[str], *, graph: bool = True, texts: bool = True,
             jobs: int | None = None, cache: LabelCache | str | None = DEFAULT_CACHE,
             progress: bool = False, on_error: Callable[[str, str], None] | None = None
             ) -> Iterator[dict[str, tuple[str, np.ndarray]]]:
    """Text and free labels of each of ``arch_ids`` (each once), as dicts id → (text, labels) in chunks;
    see :func:`describe_spaces`."""
    for _, chunk in describe_spaces([(space, arch_ids)], graph=graph, texts=texts, jobs=jobs, cache=cache,
                                    progress=progress, on_error=on_error):
        yield chunk


def describe_spaces(requests: Sequence[tuple[SearchSpace, Sequence[str]]], *, graph: bool = True,
                    texts: bool = True, jobs: int | None = None,
                    cache: LabelCache | str | None = DEFAULT_CACHE, progress: bool = False,
                    until: float | None = None, on_error: Callable[[str, str], None] | None = None
                    ) -> Iterator[tuple[int, dict[str, tuple[str, np.ndarray]]]]:
    """Text and free labels of the architectures of several spaces (``requests``: a space and ids of
    it, each), as pairs (index of the request, dict id → (text, labels)): first what the cache holds,
    then chunks of what it does not, interleaved across the requests. A caller that stops reading stops
    the work (the workers are stopped; what was described is in the cache) with every space about as
    far along.

    With a cache (``"default"``: :func:`~nasrlm.label_cache.default_cache`; a
    :class:`~nasrlm.label_cache.LabelCache`; None for none), every architecture gets its text and every
    label of :data:`ALL_FREE_OBJECTIVES`, so that one row serves every later use; without one only what
    is asked (``graph``; ``texts``: an empty text where not). ``jobs`` processes describe them (default:
    ``$NASRLM_JOBS``, else every core; one where there are few, or where processes cannot be forked);
    ``progress`` shows a bar with the rate and the time left. ``until`` (a :func:`time.monotonic` time):
    stop describing then, once every request has rows. An architecture the space fails to build raises
    :class:`ArchitectureBuildError`, or with ``on_error`` is passed to it (id, message) and left out.
    """
    store = resolve_cache(cache)
    keys = [space_key(space) if store is not None and ids else "" for space, ids in requests]
    pending: list[list[str]] = []
    waiting = set()  # requests with nothing described yet: each gets a chunk, whatever ``until`` says
    for r, (_, ids) in enumerate(requests):
        todo = list(dict.fromkeys(ids))
        cached = {}
        if store is not None and todo:
            columns = len(ALL_FREE_OBJECTIVES)
            cached = {i: row for i, row in store.get_many(keys[r], FREE_LABELS_VERSION, todo).items()
                      if len(row[1]) == columns}
            if cached:
                yield r, cached
            todo = [i for i in todo if i not in cached]
        if todo and not cached:
            waiting.add(r)
        pending.append(todo)
    if store is not None:
        graph = texts = True
    chunks = _interleaved([[(r, todo[k : k + _CHUNK]) for k in range(0, len(todo), _CHUNK)]
                           for r, todo in enumerate(pending)])
    total = sum(len(todo) for todo in pending)
    if not total:
        return
    named = [space.name for (space, _), todo in zip(requests, pending, strict=True) if todo]
    desc = f"describing {named[0]}" if len(named) == 1 else f"describing {len(named)} spaces"
    bar = tqdm(total=total, desc=desc, unit="arch", disable=not progress, smoothing=0.1)
    workers = _Workers([space for space, _ in requests], _jobs(jobs, total), graph=graph, texts=texts)
    with bar, workers:
        for (r, ids), rows in zip(chunks, workers.map(chunks), strict=True):
            chunk = {}
            for arch_id, row in zip(ids, rows, strict=True):
                if isinstance(row, ArchitectureBuildError):
                    if on_error is None:
                        raise row
                    on_error(arch_id, str(row))
                else:
                    chunk[arch_id] = row
            if store is not None:
                store.put_many(keys[r], FREE_LABELS_VERSION, chunk)
            bar.update(len(ids))
            yield r, chunk
            waiting.discard(r)
            if until is not None and not waiting and time.monotonic() >= until:
                return


def resolve_cache(cache: LabelCache | str | None) -> LabelCache | None:
    """The cache ``cache`` names: ``"default"`` for :func:`~nasrlm.label_cache.default_cache` (None
    where it is off), a :class:`~nasrlm.label_cache.LabelCache` as it is, None for none."""
    if cache == DEFAULT_CACHE:
        return default_cache()
    if isinstance(cache, str):
        raise ValueError(f"cache={cache!r}: a LabelCache, {DEFAULT_CACHE!r} or None")
    return cache


def cached_count(space: SearchSpace, arch_ids: Sequence[str], cache: LabelCache | str | None = DEFAULT_CACHE
                 ) -> int:
    """How many of ``arch_ids`` the label cache holds (0 without one)."""
    store = resolve_cache(cache)
    if store is None or not arch_ids:
        return 0
    return store.count(space_key(space), FREE_LABELS_VERSION, arch_ids)


def _interleaved(queues: list[list[tuple[int, list[str]]]]) -> list[tuple[int, list[str]]]:
    """The items of several lists, round robin: a share of each, in turn, however long each is."""
    out = []
    for k in range(max((len(q) for q in queues), default=0)):
        out.extend(q[k] for q in queues if k < len(q))
    return out


def _jobs(jobs: int | None, count: int) -> int:
    """Processes to describe ``count`` architectures in: ``jobs``, else ``$NASRLM_JOBS``, else every core.

    One (this process) for a few architectures, where fork is missing, and inside a daemonic process
    (a ``multiprocessing.Pool`` worker, a daemon worker of one's own), which may not have children.
    """
    if jobs is None and os.environ.get(JOBS_ENV, "").strip():
        try:
            jobs = int(os.environ[JOBS_ENV])
        except ValueError:
            raise ValueError(f"{JOBS_ENV}={os.environ[JOBS_ENV]!r}: not a number of processes") from None
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs={jobs}: at least 1")
    if count < _PARALLEL_FROM or not can_fork_workers():
        return 1
    if jobs is None:
        jobs = usable_cores()
    return min(jobs, -(-count // _CHUNK))


#: What a forked worker describes: the spaces and whether graph labels and texts are wanted (handed to
#: the worker as it forks, so that plug-in spaces need not be picklable).
_worker_job: tuple[list[SearchSpace], bool, bool] | None = None


class _Workers:
    """``jobs`` forked processes describing chunks of ids (in this process where ``jobs`` is 1).

    A ``ProcessPoolExecutor``, not a ``multiprocessing.Pool``: terminating a pool early (an architecture
    that fails to build, ctrl-C, the caller stopping) first takes its task queue's lock, which a worker
    that died holding it never gives back, and the parent then waited forever (seen in CI). Stopping the
    executor cancels the chunks not yet started and waits for the few running ones.
    """

    def __init__(self, spaces: list[SearchSpace], jobs: int, *, graph: bool, texts: bool) -> None:
        self.job = (spaces, graph, texts)
        self.jobs = jobs
        self._executor: concurrent.futures.ProcessPoolExecutor | None = None

    def __enter__(self) -> _Workers:
        if self.jobs > 1:
            self._executor = concurrent.futures.ProcessPoolExecutor(
                self.jobs, mp_context=multiprocessing.get_context("fork"), initializer=_worker_start,
                initargs=(self.job,))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def map(self, chunks: list[tuple[int, list[str]]]
            ) -> Iterator[list[tuple[str, np.ndarray] | ArchitectureBuildError]]:
        """Each chunk (request index, ids) described, in order."""
        if self._executor is None:
            return (_describe_chunk(chunk, self.job) for chunk in chunks)
        return self._executor.map(_describe_in_worker, chunks)


def _worker_start(job: tuple[list[SearchSpace], bool, bool]) -> None:
    """In a forked worker: what to describe, ctrl-C ignored, and torch (a torch space traces its networks)
    on one thread.

    ctrl-C reaches every process of the terminal's group: the parent alone stops, and stops its workers.
    Torch's thread pool was forked without its threads, and the first parallel op would wait for them
    forever."""
    global _worker_job
    _worker_job = job
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


def _describe_in_worker(chunk: tuple[int, list[str]]
                        ) -> list[tuple[str, np.ndarray] | ArchitectureBuildError]:
    if _worker_job is None:
        raise RuntimeError("a label worker started without its spaces")
    return _describe_chunk(chunk, _worker_job)


def _describe_chunk(chunk: tuple[int, list[str]], job: tuple[list[SearchSpace], bool, bool]
                    ) -> list[tuple[str, np.ndarray] | ArchitectureBuildError]:
    (r, ids), (spaces, graph, texts) = chunk, job
    space = spaces[r]
    out = []
    collecting = gc.isenabled()
    gc.disable()  # describing makes many short-lived objects and no cycles: a collection per chunk is enough
    try:
        for arch_id in ids:
            try:
                model = space.build_onnx(space.parse(arch_id))
            except Exception as error:  # a bug in the space: say which architecture, and go on
                out.append(ArchitectureBuildError(failure_line(space, arch_id, "build", error)))
                continue
            out.append((to_text(model) if texts else "", np.array(_free_labels_of(model, graph))))
    finally:
        if collecting:
            gc.enable()
    return out


def _free_labels_of(model: onnx.ModelProto, graph: bool) -> list[float]:
    described = describe_graph(model, features=graph)
    labels = [described.parameters / 1e6, described.macs / 1e6]
    if described.features is not None:
        labels.extend(described.features[name] for name in FEATURE_NAMES)
    return labels


def computed_objectives(space: SearchSpace, names: Sequence[str],
                        data_dir: str | os.PathLike[str] | None = None) -> list[Objective]:
    """Those of ``names`` that are :data:`FREE_OBJECTIVES` computed from each architecture's graph: every
    space has them, and a space whose tables publish a column of that name keeps the published one."""
    from nasrlm.data import available_objectives

    published = {o.name for o in available_objectives(space.name, data_dir)}
    free = {o.name: o for o in FREE_OBJECTIVES}
    return [free[n] for n in names if n in free and n not in published]


def computed_values(space: SearchSpace, objectives: Sequence[Objective], arch_ids: Sequence[str]
                    ) -> dict[str, tuple[Objective, dict[str, float]]]:
    """The values of :func:`computed_objectives` for ``arch_ids`` (through the label cache), as the
    ``extra`` columns of :func:`nasrlm.data.load_table`."""
    labels = free_labels(space, arch_ids)
    columns = [o.name for o in FREE_OBJECTIVES]
    return {o.name: (o, dict(zip(arch_ids, labels[:, columns.index(o.name)].tolist(), strict=True)))
            for o in objectives}
