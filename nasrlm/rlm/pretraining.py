"""One base model for every published table: the pre-training behind ``nasrlm pretrain``.

A model trained from scratch on a few labels knows little beyond the parameter count. The base model
instead reads every table of every space at once (NAS-Bench-101/201/301, FBNet, Once-for-All: their
accuracies and device latencies) plus the free labels of every registered space, so that fine-tuning
on a new device, dataset or space starts from an encoder that already reads the graph.

Every published column becomes a decoder tag ``space:objective`` (``nb201:acc``, ``fbnet:pixel3``), so a
new column is simply a new tag; free labels are the same quantity in every space and keep their plain
names. ``exclude`` (globs over ``space:objective``) leaves columns out, which is how a benchmark trains a
base that never saw its own targets.

Each step trains on a batch of one space, its rows of similar token length (little padding): the free
labels (parameters, MACs) first, as at inference, then a random handful of that space's other tags in
random order (a table has up to 75 of them with the graph labels, and decoding all of them for every
row would spend the step on the decoder), so the model learns to write any objective after any other;
last, for a space with a published accuracy, the cross-space :data:`ACCURACY_RANK`.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from nasrlm.data import TABLE_LOADERS, DataFileNotFoundError, Objective, available_objectives, load_table
from nasrlm.errors import NasrlmError
from nasrlm.free_labels import ALL_FREE_OBJECTIVES, FREE_OBJECTIVES, cached_count, describe_spaces
from nasrlm.priors.transfer import ACCURACY_RANK, TAG_SEPARATOR, AccuracyTransfer, is_accuracy
from nasrlm.rlm.normalize import Normalizer
from nasrlm.rlm.predictor import RLMPredictor
from nasrlm.rlm.recipes import PretrainConfig
from nasrlm.rlm.training import Stepper, pad_batch
from search_spaces import available_spaces, get_space

#: The file, inside a base model's directory, that says how it was pre-trained.
PRETRAINING_FILE = "pretraining.json"
#: Optimiser state for ``--resume``, inside a base model's directory.
OPTIMIZER_FILE = "optimizer.safetensors"
#: The rows a pre-training run reads (texts, labels), kept so that a resumed run does not rebuild them.
ROWS_FILE = "rows.npz"


def tag(space: str, name: str) -> str:
    """The decoder tag of objective ``name`` of ``space`` in a base model, e.g. ``nb201:acc``."""
    return f"{space}{TAG_SEPARATOR}{name}"


def is_excluded(name: str, patterns: Sequence[str]) -> bool:
    """Whether tag ``name`` matches any of the glob ``patterns`` (``nb201:acc*``, ``*:pixel3``)."""
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class PretrainInputError(NasrlmError, ValueError):
    """What ``--spaces`` and ``--exclude`` select leaves nothing to pre-train on, or matches nothing."""


def parse_exclude(text: str) -> list[str]:
    """``--exclude`` as patterns: comma-separated globs, each ``space:objective`` (a bare ``space``
    means every column of it)."""
    patterns = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        patterns.append(item if TAG_SEPARATOR in item else f"{item}{TAG_SEPARATOR}*")
    return patterns


@dataclass
class Task:
    """Rows of one space that train together: texts and labels, free labels first in ``objectives``."""

    space: str
    texts: list[str]
    objectives: tuple[str, ...]  # tags, in column order of ``values``
    values: np.ndarray  # (rows, objectives), NaN where unknown


@dataclass
class PretrainState:
    """Where a run stands; saved beside the checkpoint as :data:`PRETRAINING_FILE`."""

    exclude: list[str]
    spaces: list[str]
    rows: dict[str, int]
    config: dict
    step: int = 0
    seconds: float = 0.0
    finished: bool = False
    loss: list[float] = field(default_factory=list)  # mean training loss per checkpoint interval
    #: a run started from another base (``nasrlm pretrain --base``): where it was and that base's own
    #: record without its losses (and so its own parent's), so that the record says all the weights saw
    init: dict | None = None
    #: one record per call of :func:`pretrain` on this run (the first, then each ``--resume``): the step it
    #: started at, the device it ran on and its config, since a resumed run may change batch size or rate
    segments: list[dict] = field(default_factory=list)

    @classmethod
    def start(cls, tasks: Sequence[Task], config: PretrainConfig, exclude: Sequence[str] = ()
              ) -> PretrainState:
        """The state of a new run on ``tasks`` (``exclude``: the patterns they were collected with)."""
        return cls(exclude=list(exclude), spaces=[t.space for t in tasks],
                   rows={t.space: len(t.texts) for t in tasks}, config=asdict(config))

    def started_from(self, path: Path, parent: PretrainState) -> None:
        """Record that this run's weights start as ``parent``'s, the run saved in ``path``."""
        self.init = {"path": str(path), **{k: v for k, v in asdict(parent).items() if k != "loss"}}

    def save(self, path: Path) -> None:
        (path / PRETRAINING_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> PretrainState:
        return cls(**json.loads((path / PRETRAINING_FILE).read_text()))


# --- the rows ---------------------------------------------------------------------------------------
def collect_tasks(data_dir: str | os.PathLike[str] | None, *, exclude: Sequence[str] = (),
                  spaces: Sequence[str] | None = None, free_rows: int = 500, max_rows: int | None = None,
                  seed: int = 0, progress: bool = True, until: float | None = None,
                  log: Callable[[str], None] = lambda line: None) -> tuple[list[Task], list[Objective]]:
    """Every table of every space under ``data_dir`` (a resolved directory, or None for no tables; columns
    matching ``exclude`` left out), and
    ``free_rows`` random architectures of every space (only their free labels), as tasks; with the
    objectives of all their tags.

    ``max_rows`` caps the labelled rows per space (a random subset). Spaces whose tables are absent
    from ``data_dir`` contribute their free labels only. Texts and labels come from the label cache
    where it holds them; the others are described in turn across the spaces, until ``until`` (a
    :func:`time.monotonic` time) if given: rows not described by then are left out of the tasks (and
    said so through ``log``), every space keeping some.
    """
    rng = np.random.default_rng(seed)
    spaces = list(spaces or available_spaces())
    _check_exclude(exclude, spaces, data_dir)
    free_names = tuple(o.name for o in ALL_FREE_OBJECTIVES)
    objectives = {o.name: o for o in ALL_FREE_OBJECTIVES}
    plans = []
    for space_name in spaces:
        space = get_space(space_name)
        table_objectives = _table_objectives(space_name, data_dir, exclude)
        ids: list[str] = []
        columns = np.empty((0, 0))
        if table_objectives:
            table = load_table(space_name, [o.name for o in table_objectives], data_dir)
            keep = np.flatnonzero(~np.isnan(table.values).all(axis=1))
            if max_rows is not None and len(keep) > max_rows:
                keep = np.sort(rng.choice(keep, max_rows, replace=False))
            ids, columns = [table.ids[k] for k in keep], table.values[keep]
            present = ~np.isnan(columns).all(axis=0)  # a column may have no value in the rows kept
            table_objectives = [o for o, p in zip(table_objectives, present, strict=True) if p]
            columns = columns[:, present]
            for o in table_objectives:
                name = tag(space_name, o.name)
                objectives[name] = Objective(name, o.unit, o.description, o.source, o.higher_is_better)
        labelled_ids = set(ids)
        extra = [i for i in (space.sample_ids(free_rows, seed=seed) if free_rows else [])
                 if i not in labelled_ids]
        if ids or extra:
            plans.append((space, ids, columns, table_objectives, extra))
            log(f"{space.name}: {len(ids):,} labelled rows ({len(table_objectives)} columns), "
                f"{len(extra):,} with free labels only; {cached_count(space, [*ids, *extra]):,} of them "
                f"in the label cache")
    if not plans:
        raise PretrainInputError("nothing to pre-train on: no space has rows (check --spaces and --exclude)")
    requests = []
    for space, ids, _, _, extra in plans:  # in random order: where time runs out, a fair cut
        all_ids = [*ids, *extra]
        requests.append((space, [all_ids[k] for k in rng.permutation(len(all_ids))]))
    described: list[dict[str, tuple[str, np.ndarray]]] = [{} for _ in plans]
    for r, chunk in describe_spaces(requests, progress=progress, until=until):
        described[r].update(chunk)

    tasks = []
    for (space, ids, columns, table_objectives, extra), got in zip(plans, described, strict=True):
        rows = [k for k, arch_id in enumerate([*ids, *extra]) if arch_id in got]
        if len(rows) < len(ids) + len(extra):
            log(f"{space.name}: {len(ids) + len(extra) - len(rows):,} rows left out (not described in time; "
                f"those described are in the label cache for the next run)")
        if not rows:
            continue
        all_ids = [*ids, *extra]
        texts = [got[all_ids[k]][0] for k in rows]
        free = np.array([got[all_ids[k]][1] for k in rows])
        labelled = np.full((len(rows), len(table_objectives)), np.nan)
        from_table = [j for j, k in enumerate(rows) if k < len(ids)]
        labelled[from_table] = columns[[rows[j] for j in from_table]]
        names = (*free_names, *(tag(space.name, o.name) for o in table_objectives))
        headline = [k for k, o in enumerate(table_objectives) if is_accuracy(o)]
        if headline:  # the cross-space accuracy rank, decoded last (see ACCURACY_RANK)
            names = (*names, ACCURACY_RANK.name)
            labelled = np.hstack([labelled, quantiles(labelled[:, headline[0]])[:, None]])
            objectives.setdefault(ACCURACY_RANK.name, ACCURACY_RANK)
        tasks.append(Task(space.name, texts, names, np.hstack([free, labelled])))
    return tasks, list(objectives.values())


def quantiles(values: np.ndarray) -> np.ndarray:
    """Each known value's quantile among the known ones (ties share their mean rank), NaN stays NaN."""
    out = np.full(len(values), np.nan)
    known = np.flatnonzero(~np.isnan(values))
    if len(known) > 1:
        out[known] = (stats.rankdata(values[known]) - 1) / (len(known) - 1)
    return out


def _check_exclude(exclude: Sequence[str], spaces: Sequence[str],
                   data_dir: str | os.PathLike[str] | None) -> None:
    """Every ``exclude`` pattern must match a published column: a typo would otherwise exclude nothing
    and leave the base with the very targets it was meant never to see."""
    if not exclude:
        return
    columns = [tag(s, o.name) for s in spaces if s in TABLE_LOADERS and data_dir is not None
               for o in available_objectives(s, data_dir)]
    unmatched = [p for p in exclude if not any(fnmatch.fnmatchcase(c, p) for c in columns)]
    if unmatched:
        raise PretrainInputError(f"--exclude {', '.join(unmatched)} matches no published column of the "
                                 f"spaces pre-trained on (columns are space:objective, e.g. nb201:acc)")


def _table_objectives(space: str, data_dir: str | os.PathLike[str] | None,
                      exclude: Sequence[str]) -> list[Objective]:
    """The published columns of ``space`` whose files are in ``data_dir``, minus the excluded ones."""
    if space not in TABLE_LOADERS or data_dir is None:
        return []
    found = []
    free = {o.name for o in ALL_FREE_OBJECTIVES}
    for objective in available_objectives(space, data_dir):
        if objective.name in free or is_excluded(tag(space, objective.name), exclude):
            continue  # a published parameter count is the free label's quantity: one tag serves both
        try:
            load_table(space, [objective.name], data_dir, ids=[])
        except DataFileNotFoundError:
            continue
        found.append(objective)
    return found


def save_tasks(tasks: Sequence[Task], path: Path) -> None:
    """The rows of a run, so that ``--resume`` skips rebuilding them (plain arrays, no pickles)."""
    arrays = {}
    for k, t in enumerate(tasks):
        encoded = [text.encode() for text in t.texts]  # bytes: a unicode array pads each text to the longest
        arrays[f"{k}/text_bytes"] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        arrays[f"{k}/text_lengths"] = np.array([len(e) for e in encoded], dtype=np.int64)
        arrays[f"{k}/values"] = t.values
        arrays[f"{k}/objectives"] = np.array(t.objectives)
        arrays[f"{k}/space"] = np.array(t.space)
    np.savez_compressed(path, **arrays)  # canonical texts repeat themselves: about ten times smaller


def load_tasks(path: Path) -> list[Task]:
    data = np.load(path, allow_pickle=False)
    tasks = []
    for k in range(len({key.split("/")[0] for key in data.files})):
        raw, ends = data[f"{k}/text_bytes"].tobytes(), np.cumsum(data[f"{k}/text_lengths"])
        texts = [raw[end - n : end].decode() for n, end in zip(data[f"{k}/text_lengths"], ends, strict=True)]
        tasks.append(Task(str(data[f"{k}/space"]), texts, tuple(str(o) for o in data[f"{k}/objectives"]),
                          data[f"{k}/values"]))
    return tasks


def fit_transfer(tasks: Sequence[Task], objectives: Sequence[Objective], *, seed: int = 0
                 ) -> AccuracyTransfer | None:
    """The cross-space accuracy forest (:class:`~nasrlm.priors.transfer.AccuracyTransfer`) of the accuracy
    columns among ``tasks`` (so exactly those left after ``--exclude``); ``None`` if there is none."""
    accuracy = {o.name for o in objectives if is_accuracy(o)}
    width = len(ALL_FREE_OBJECTIVES)  # a task's free and graph labels come first
    tables = []
    for t in tasks:
        columns = [k for k, name in enumerate(t.objectives) if name in accuracy]
        if columns:
            tables.append((t.space, [t.objectives[k] for k in columns], t.values[:, :width],
                           t.values[:, columns]))
    if not tables:
        return None
    try:
        return AccuracyTransfer.fit(tables, seed=seed)
    except ValueError:  # no accuracy column has enough values
        return None


# --- training ---------------------------------------------------------------------------------------
def fit_normalizers(predictor: RLMPredictor, tasks: Sequence[Task]) -> None:
    """One normaliser per tag, over every row that has its value."""
    values: dict[str, list[np.ndarray]] = {}
    for t in tasks:
        for k, name in enumerate(t.objectives):
            values.setdefault(name, []).append(t.values[:, k])
    for name, parts in values.items():
        column = np.concatenate(parts)
        if np.isfinite(column).any():
            predictor.lm.normalizers[name] = Normalizer.fit(column)


def pretrain(predictor: RLMPredictor, tasks: Sequence[Task], config: PretrainConfig, *,
             output: Path | None = None, state: PretrainState | None = None,
             device: str | torch.device = "cpu") -> PretrainState:
    """Train ``predictor`` on ``tasks`` until ``config.minutes`` or ``config.max_steps`` is spent.

    With ``output``, the predictor, :data:`PRETRAINING_FILE` and the optimiser state are saved there
    every ``config.checkpoint_minutes``, at the end and on ctrl-C (which then raises
    ``KeyboardInterrupt`` naming the step saved). To continue a run, pass the saved ``state``
    and the predictor loaded from ``output``; the optimiser state is read from there. The learning rate
    warms up, then follows a cosine over whichever budget (time or steps) runs out first.
    """
    state = state or PretrainState.start(tasks, config)
    # the spaces it learns objectives of (not those whose free labels only it reads): predict refuses others
    labelled = {t.space for t in tasks if len(t.objectives) > len(ALL_FREE_OBJECTIVES)}
    predictor.spaces = tuple(sorted({*predictor.spaces, *labelled}))
    predictor.lm.members = []  # a fine-tuned model's other decoders: pre-training moves the encoder
    model = predictor.lm.model.to(device)
    free = len(FREE_OBJECTIVES)
    encoded = [predictor.lm.encode_texts(t.texts) for t in tasks]
    targets = [torch.as_tensor(predictor.lm.targets(t.values, t.objectives)) for t in tasks]
    known = [~np.isnan(t.values) for t in tasks]
    by_length = [np.argsort([len(ids) for ids in e], kind="stable") for e in encoded]
    ranks = [t.objectives.index(ACCURACY_RANK.name) if ACCURACY_RANK.name in t.objectives else None
             for t in tasks]
    accuracies = [{c for c, name in enumerate(t.objectives) if "acc" in name.split(TAG_SEPARATOR)[-1]}
                  for t in tasks]
    # with every_graph_label, the graph labels that vary over a task's rows are decoded in each of its
    # batches, last (the columns drawn before them are decoded as a fine-tune decodes them: after the free
    # labels at most); the columns drawn are then those from ``first`` on, the table's
    graph = [varying_graph_labels(t) if config.every_graph_label else [] for t in tasks]
    first = len(ALL_FREE_OBJECTIVES) if config.every_graph_label else free
    weights = np.array([_task_weight(t) for t in tasks])
    weights /= weights.sum()
    stepper = Stepper(model, weight_decay=config.weight_decay, clip_norm=config.clip_norm)
    if output is not None and (output / OPTIMIZER_FILE).is_file() and state.step:
        stepper.load(output / OPTIMIZER_FILE)
    rng = np.random.default_rng(config.seed + state.step)
    torch.manual_seed(config.seed + state.step)
    budget = 60 * config.minutes

    def progress(step: int, seconds: float) -> float:  # share of the budget spent, in [0, 1]
        share = seconds / budget if budget > 0 else 1.0
        if config.max_steps:
            share = max(share, step / config.max_steps)
        return min(1.0, share)

    if progress(state.step, state.seconds) < 1.0:  # a resume with nothing left (only to ship) adds none
        state.segments.append({"step": state.step, "seconds": round(state.seconds, 1),
                               "device": _device_name(device),
                               **{k: v for k, v in asdict(config).items() if k != "progress"}})
    started = time.perf_counter() - state.seconds
    last_save, running, count = time.perf_counter(), 0.0, 0
    bar = tqdm(total=100, desc="pre-training", unit="%", disable=not config.progress,
               initial=int(100 * progress(state.step, state.seconds)))
    model.train()
    try:
        while progress(state.step, time.perf_counter() - started) < 1.0:
            k = int(rng.choice(len(tasks), p=weights))
            size = min(config.batch_size, len(encoded[k]))
            start = int(rng.integers(len(encoded[k]) - size + 1))  # rows of similar length: little padding
            rows = by_length[k][start : start + size]
            present = np.flatnonzero(known[k][rows].any(axis=0)[first:]) + first
            chosen = rng.permutation(present)[: config.objectives_per_batch]
            rank = ranks[k]
            if rank is not None and rank in present:  # always, last, after no other accuracy of the rows
                chosen = [c for c in chosen if c != rank and c not in accuracies[k]]
                chosen = chosen[: config.objectives_per_batch - 1] + [rank]
            columns = [*range(free), *chosen, *graph[k]]
            ids, mask = pad_batch([encoded[k][r] for r in rows], model.config.text_pad_id)
            names = tuple(tasks[k].objectives[c] for c in columns)
            batch_targets = targets[k][rows][:, columns]
            share = progress(state.step, time.perf_counter() - started)
            warm = min(1.0, (state.step + 1) / config.warmup_steps)
            learning_rate = config.learning_rate * warm * 0.5 * (1 + math.cos(math.pi * share))
            loss = model(ids.to(device), mask.to(device), names, batch_targets.to(device))
            stepper.step(loss, learning_rate)
            state.step += 1
            running, count = running + loss.item(), count + 1
            state.seconds = time.perf_counter() - started
            done = int(100 * progress(state.step, state.seconds))
            if done > bar.n:
                bar.update(done - bar.n)
            bar.set_postfix(step=state.step, loss=f"{running / count:.3f}")
            if output is not None and time.perf_counter() - last_save > 60 * config.checkpoint_minutes:
                state.loss.append(running / count)
                running, count = 0.0, 0
                _checkpoint(predictor, stepper, state, output)
                last_save = time.perf_counter()
    except KeyboardInterrupt:  # ctrl-C: keep every step done so far, then stop as asked
        bar.close()
        if output is None:
            raise
        if count:
            state.loss.append(running / count)
        model.eval()
        _checkpoint(predictor, stepper, state, output)
        raise KeyboardInterrupt(f"interrupted at step {state.step:,}: saved in {output}") from None
    bar.close()
    if count:
        state.loss.append(running / count)
    state.finished = True
    model.eval()
    if output is not None:
        _checkpoint(predictor, stepper, state, output)
    return state


def varying_graph_labels(task: Task) -> list[int]:
    """Columns of ``task`` holding graph labels (after the free labels proper) whose known values are not
    all equal: those worth decoding (a label constant over a space says nothing about its architectures)."""
    free, width = len(FREE_OBJECTIVES), len(ALL_FREE_OBJECTIVES)
    columns = task.values[:, free:width]
    spread = [np.nanmax(c) > np.nanmin(c) if np.isfinite(c).any() else False for c in columns.T]
    return [free + j for j, varies in enumerate(spread) if varies]


def _task_weight(task: Task) -> float:
    """How often a task's batches are drawn: the square root of its rows, so small tables get more than
    their share; a quarter of that for rows with free labels only, which teach less per (often long) text.
    """
    labelled = len(task.objectives) > len(ALL_FREE_OBJECTIVES)
    return float(np.sqrt(len(task.texts))) * (1.0 if labelled else 0.25)


def _device_name(device: str | torch.device) -> str:
    """``cpu``, or the GPU's own name (``cuda: NVIDIA H200``), for the record of a run."""
    device = torch.device(device)
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type


def _checkpoint(predictor: RLMPredictor, stepper: Stepper, state: PretrainState, output: Path) -> None:
    predictor.save(output)
    stepper.save(output / OPTIMIZER_FILE)
    state.save(output)
