"""One search job from names to files: what ``nasrlm search`` and ``nasrlm demo`` run.

It resolves the objectives (tables or live measurement), builds the sampler, runs the study and any
baselines on the same evaluator, asks the RLM for its predicted front, and writes the report.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from tqdm.auto import tqdm

from nasrlm.measure import LatencyStore, is_profile
from nasrlm.search._constraints import Constraint, UnmeetableConstraintError
from nasrlm.search._evaluate import ArchEvaluator
from nasrlm.search._report import PredictedFront, Truth, predicted_front, reference_point, score, write_report
from nasrlm.search._run import SearchResult, SearchStopped, run_search
from nasrlm.search._training import TRAINED, NetworkTrainer, Training
from nasrlm.search.sampler import RLMSampler, earlier_front, read_warm_start, sampler_keywords
from nasrlm.search.sampler._warm_start import Source
from search_spaces import SearchSpace, SubsetSpace

SamplerFactory = Callable[[SearchSpace, int, bool], optuna.samplers.BaseSampler]

#: Samplers by name: ours and Optuna's usual multi-objective baselines (default settings; ``tpe-mv`` is
#: TPE with ``multivariate=True``, ``gp`` Optuna's Gaussian-process sampler with its LogEHVI).
SAMPLERS: dict[str, SamplerFactory] = {
    "rlm": lambda space, seed, progress: RLMSampler(space, seed=seed, progress=progress),
    "random": lambda space, seed, progress: optuna.samplers.RandomSampler(seed=seed),
    "nsga2": lambda space, seed, progress: optuna.samplers.NSGAIISampler(seed=seed),
    "nsga3": lambda space, seed, progress: optuna.samplers.NSGAIIISampler(seed=seed),
    "tpe": lambda space, seed, progress: optuna.samplers.TPESampler(seed=seed),
    "tpe-mv": lambda space, seed, progress: optuna.samplers.TPESampler(seed=seed, multivariate=True),
    "gp": lambda space, seed, progress: optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False),
}


def worker_seed(sampler: str, seed: int, worker: int) -> int:
    """The seed of worker ``worker`` (from 0) of a study searched with ``sampler`` seeded ``seed``: ``seed``
    itself for ``rlm``, whose random trials draw by their number
    (:mod:`~nasrlm.search.sampler._numbered_draws`), so that its workers start from the trials one worker
    would; ``seed + worker`` for Optuna's samplers, each drawing from a stream of its own, lest workers
    given one seed draw alike."""
    return seed if sampler == "rlm" else seed + worker


def make_sampler(name: str, space: SearchSpace, seed: int, *, progress: bool = False,
                 options: dict[str, Any] | None = None, warm_start: Sequence[Source] = ()
                 ) -> optuna.samplers.BaseSampler:
    """The sampler ``name``; ``options`` are :class:`RLMSampler`'s flat options by name (``rlm`` only; see
    :func:`~nasrlm.search.sampler_keywords`), and so is ``warm_start`` (Optuna's samplers read no earlier
    study: :func:`warm_enqueued` gives them its front the way Optuna users do)."""
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; choose from {', '.join(SAMPLERS)}")
    if not options and not warm_start:
        return SAMPLERS[name](space, seed, progress)
    if name != "rlm":
        raise ValueError(f"sampler options and warm starts apply to the rlm sampler, not {name!r}")
    return RLMSampler(space, seed=seed, progress=progress, warm_start=warm_start,
                      **sampler_keywords(options or {}))


def warm_enqueued(name: str, space: SearchSpace, warm_start: Sequence[Source]) -> list[dict[str, Any]]:
    """What a study searched with sampler ``name`` evaluates first, warm-started from ``warm_start``: nothing
    for ``rlm``, which reads the sources itself; for Optuna's samplers, the sources' fronts
    (:func:`~nasrlm.search.earlier_front`), as an Optuna user enqueues them."""
    return [] if name == "rlm" or not warm_start else earlier_front(warm_start, space)


@dataclass
class JobOutput:
    result: SearchResult
    baselines: list[SearchResult]
    files: dict[str, Path]
    truth: Truth | None
    predicted: PredictedFront | None


def search_job(space: SearchSpace, objectives: Sequence[str], *, budget: int, out_dir: str | Path,
               sampler: str = "rlm", seed: int = 0, storage: str | None = None, study_name: str | None = None,
               data_dir: str | os.PathLike[str] | None = None, db: str | Path | None = None,
               compare: Sequence[str] = (), sampler_options: dict[str, Any] | None = None,
               workers: int = 1, threads: int | None = None, progress: bool = True, command: str = "",
               training: Training | None = None, constraints: Sequence[Constraint] = (),
               warm_start: Sequence[Source] = (),
               log: Callable[[str], None] = lambda line: tqdm.write(line, file=sys.stderr)) -> JobOutput:
    """Search ``space`` for ``objectives`` with ``budget`` evaluations and write the report to ``out_dir``.

    Objectives named like device profiles are measured on this machine into the SQLite store ``db``
    (default ``<out_dir>/latency.db``) the first time an architecture needs them. ``val_acc`` is measured
    by training each network as ``training`` says; the best network so far is kept in
    ``<out_dir>/best_network/`` (the main worker's; every worker trains with the same recipe and seed, so
    ``nasrlm fit`` rebuilds any of the front). ``sampler_options``
    are flat options of :class:`RLMSampler` for the main sampler (see :func:`make_sampler`).

    ``workers`` > 1 starts that many processes in all on one study (worker ``k`` seeded :func:`worker_seed`,
    each with ``threads`` torch threads, default the cores shared out among them), in ``storage`` or
    else the SQLite file ``<out_dir>/study.db``; they share the budget exactly (:func:`run_search`).
    More workers on other machines join by running the same search on the same database storage and
    study name.

    ``constraints`` (:class:`~nasrlm.search.Constraint`, ``pixel3<=10``) limit any quantity the objectives
    could name, an objective or not: each trial tells Optuna how far it is from meeting each
    (``trial.set_constraint``), so the baselines of ``compare`` search under them too; the report is of
    the evaluations that meet them. Where a table covers the space and none of its architectures meets
    them, :class:`~nasrlm.search.UnmeetableConstraintError`.

    ``warm_start``: earlier studies and tables (:class:`RLMSampler`'s ``warm_start``), read once here, that
    the ``rlm`` sampler reads, and whose fronts Optuna's samplers (the main one, those of ``compare``)
    evaluate first (:func:`warm_enqueued`); the report says what was read and how the first evaluations used
    it.
    """
    if workers < 1:
        raise ValueError(f"workers must be 1 or more, got {workers}")
    if workers > 1 and storage is not None and ":memory:" in storage:
        raise ValueError(f"--storage {storage}: several workers need a storage they share (a file, a server)")
    # a bad source, sampler name or option fails before any file
    warm = read_warm_start(warm_start, space, objectives) if warm_start else None
    warm_start = warm.sources if warm is not None else ()  # read: every sampler and worker takes them so
    make_sampler(sampler, space, seed, options=sampler_options,
                 warm_start=warm_start if sampler == "rlm" else ())
    out = Path(out_dir)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    store = None
    measured = [*objectives, *(c.quantity for c in constraints)]  # what each architecture is measured for
    if any(is_profile(n) for n in measured):
        store = LatencyStore(db or out / "latency.db")
        log(f"latency measured live on this machine (onnxruntime), stored in {store.path}")
    try:
        try:
            trainer = _trainer(space, measured, training, out / "best_network")
            evaluator = ArchEvaluator.for_names(space, objectives, data_dir=data_dir, store=store,
                                                trainer=trainer, constraints=constraints)
            _check_meetable(evaluator)
        except Exception:  # a bad objective name or data dir: leave no empty run directory behind
            if store is not None:
                store.close()
                store = None
            if created:
                shutil.rmtree(out, ignore_errors=True)
            raise
        for o in evaluator.objectives:
            log(f"  {o.header:<16} {'maximise' if o.higher_is_better else 'minimise'}  {o.description}")
        for c in evaluator.constraints:
            log(f"  {c.name:<16} constraint (each trial's trial.set_constraint)")
        space, evaluator = restricted_to_table(space, evaluator, log)
        for line in warm.describe() if warm is not None else ():
            log(f"  {line}")
        main = make_sampler(sampler, space, seed, progress=False, options=sampler_options,
                            warm_start=warm_start if sampler == "rlm" else ())
        if isinstance(main, RLMSampler) and progress:
            main.on_fit = lambda n, seconds: log(f"  model trained on {n} evaluations in {seconds:.1f} s")
            main.log = lambda line: log(f"  {line}")
            main.cache.progress = True  # describing the candidate pool is the first fit's long part
        study_name = study_name or f"{space.name}-{sampler}-seed{seed}"
        if workers > 1:
            storage = storage or f"sqlite:///{(out / 'study.db').resolve()}"
            log(f"{workers} workers share study {study_name!r} in {storage}")
            threads = threads or max(1, (os.cpu_count() or 1) // workers)
            import torch  # here, not at the top: importing nasrlm.search should not cost torch's start-up

            torch.set_num_threads(threads)
        helpers = [_Helper(space, list(objectives), budget, sampler, worker_seed(sampler, seed, k), storage,
                           study_name, data_dir, db or (out / "latency.db"), out, sampler_options, threads,
                           training, list(constraints), list(warm_start)).start(k)
                   for k in range(1, workers)]
        try:
            result = run_search(space, evaluator, main, budget=budget, label=sampler, storage=storage,
                                study_name=study_name, progress=progress, log=log,
                                enqueue=warm_enqueued(sampler, space, warm_start))
        except SearchStopped as stopped:  # a report of what was done, then the one-line stop
            if stopped.result is not None and len(stopped.result.arch_ids):
                write_report(stopped.result, out, space=space.name, command=command)
                raise SearchStopped(f"{stopped}; a report of the {len(stopped.result.arch_ids)} evaluations "
                                    f"done is in {out}", stopped.result) from None
            raise
        finally:
            for k, helper in enumerate(helpers, start=1):
                helper.join(k, log)
        if trainer is not None:
            log(f"trained {len(trainer.curves)} networks here, {trainer.stopped} of them "
                f"stopped early by the median rule; the best in {out / 'best_network'}")
        baselines = []
        for name in compare:
            if name == sampler:
                continue
            other = make_sampler(name, space, seed, warm_start=warm_start if name == "rlm" else ())
            baselines.append(run_search(space, evaluator, other, budget=budget, label=name,
                                        study_name=f"{space.name}-{name}-seed{seed}", progress=progress,
                                        enqueue=warm_enqueued(name, space, warm_start)))
        if warm is not None:
            for r in (result, *baselines):
                r.extra["warm_start"] = [*warm.describe(), warm.used(r.arch_ids)]
        truth = None
        known = evaluator.truth()
        if known is not None:
            truth = Truth(*known)
        predicted = None
        if isinstance(main, RLMSampler) and main.fits:
            predicted = _predicted(main, result)
        files = write_report(result, out, space=space.name, truth=truth, predicted=predicted,
                             baselines=baselines, command=command)
    finally:
        if store is not None:
            store.close()
    return JobOutput(result, baselines, files, truth, predicted)


@dataclass
class _Helper:
    """What a worker process beside the main one needs to join the study (``search_job(workers=)``)."""

    space: SearchSpace
    objectives: list[str]
    budget: int
    sampler: str
    seed: int
    storage: str
    study_name: str
    data_dir: str | os.PathLike[str] | None
    db: str | Path
    out: Path
    sampler_options: dict[str, Any] | None
    threads: int | None
    training: Training | None = None
    constraints: list[Constraint] = field(default_factory=list)
    warm_start: list[Source] = field(default_factory=list)
    process: Any = None

    def start(self, k: int) -> _Helper:
        """Start the worker as a child process (forked where the system can, so plug-ins come along).

        The parent has not trained anything yet: a fork copies no busy torch thread pool.
        """
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self.process = context.Process(target=self.run, name=f"nasrlm-worker-{k}", daemon=False)
        self.process.start()
        return self

    def run(self) -> None:
        import torch

        torch.set_num_threads(self.threads or 1)
        measured = [*self.objectives, *(c.quantity for c in self.constraints)]
        store = LatencyStore(self.db) if any(is_profile(n) for n in measured) else None
        try:
            evaluator = ArchEvaluator.for_names(self.space, self.objectives, data_dir=self.data_dir,
                                                store=store, constraints=self.constraints,
                                                trainer=_trainer(self.space, measured, self.training))
            space, evaluator = restricted_to_table(self.space, evaluator)
            sampler = make_sampler(self.sampler, space, self.seed, options=self.sampler_options,
                                   warm_start=self.warm_start if self.sampler == "rlm" else ())
            run_search(space, evaluator, sampler, budget=self.budget, label=self.sampler,
                       storage=self.storage, study_name=self.study_name, progress=False,
                       enqueue=warm_enqueued(self.sampler, space, self.warm_start))
        except KeyboardInterrupt:  # ctrl-C reaches every worker: the main process says what was kept
            pass
        except Exception as error:  # one line, as the main process reports its own errors
            print(f"nasrlm: {multiprocessing.current_process().name}: error: {error}", file=sys.stderr)
            raise SystemExit(1) from None
        finally:
            if store is not None:
                store.close()

    def join(self, k: int, log: Callable[[str], None]) -> None:
        self.process.join()
        if self.process.exitcode != 0:
            log(f"worker {k} ended with exit code {self.process.exitcode}")


def _trainer(space: SearchSpace, objectives: Sequence[str], training: Training | None,
             keep: Path | None = None) -> NetworkTrainer | None:
    """The trainer of ``val_acc``, where it is measured (``objectives``: an objective or constrained);
    ``training`` without it is an error."""
    if TRAINED not in objectives:
        if training is not None:
            raise ValueError(f"training networks needs {TRAINED!r} among the objectives")
        return None
    return NetworkTrainer(space, training or Training(), keep)


def _check_meetable(evaluator: ArchEvaluator) -> None:
    """Refuse constraints that no architecture of a table covering the space meets."""
    tabulated = evaluator.tabulated()
    if not evaluator.constraints or tabulated is None or not len(tabulated[0]):
        return
    ids, _, limits = tabulated
    if (limits <= 0).all(axis=1).any():
        return
    missed = [c for k, c in enumerate(evaluator.constraints) if not (limits[:, k] <= 0).any()]
    which = missed[0] if missed else evaluator.constraints[0]
    k = evaluator.constraints.index(which)
    closest = which.limit + (limits[:, k].min() if which.operator == "<=" else -limits[:, k].min())
    said = f"{which.name} (the closest: {which.quantity} {closest:.4g})" if missed else "them all together"
    raise UnmeetableConstraintError(f"--constraint {' '.join(c.name for c in evaluator.constraints)}: none "
                                    f"of the {len(ids):,} architectures of the table meets {said}")


def restricted_to_table(space: SearchSpace, evaluator: ArchEvaluator,
                        log: Callable[[str], None] = lambda line: None) -> tuple[SearchSpace, ArchEvaluator]:
    """Where every objective is looked up and the table covers part of the space, search its rows only.

    Otherwise nearly every trial would ask for a cell the table cannot answer (NB101's published
    table has 20,000 of 423,624 cells).
    """
    tabulated = evaluator.tabulated()
    if tabulated is None or (space.size is not None and len(tabulated[0]) >= space.size):
        return space, evaluator
    of = f" of {space.size:,}" if space.size is not None else ""
    log(f"searching the {len(tabulated[0]):,}{of} {space.name} architectures with every objective tabulated")
    subset = SubsetSpace(space, tabulated[0])
    return subset, ArchEvaluator(subset, evaluator.objectives, evaluator.table, evaluator.store,
                                 constraints=evaluator.constraints, limited=evaluator.limited)


def _predicted(sampler: RLMSampler, result: SearchResult) -> PredictedFront:
    """The model's front over the evaluated architectures and the sampler's candidate pool.

    The pool is a random sample of the space whose texts and free labels the sampler already has:
    another 2,000 random architectures cost 40 s on NB201 and minutes on a torch space.
    """
    ids = list(dict.fromkeys([*result.arch_ids, *sampler.candidate_pool]))
    return predicted_front(sampler, ids, result.maximize)


def summary(job: JobOutput) -> list[str]:
    """Lines for the terminal: quality, front size and where the files are."""
    reference = reference_point([job.result, *job.baselines], job.truth)
    lines = []
    for r in [job.result, *job.baselines]:
        s = score(r, reference, job.truth)
        quality = (f"hypervolume {s.hypervolume_ratio:.3f} of the true front's, "
                   f"Pareto recall {s.pareto_recall:.2f}" if s.hypervolume_ratio is not None
                   else f"hypervolume {s.hypervolume:.4g}")
        if r.constraints:  # the best network under the limits is the question
            found = "none feasible" if s.best is None else f"best feasible {s.best:.4g}"
            regret = f" ({s.regret:.3g} short of the table's best)" if s.regret is not None else ""
            share = f"{s.feasible_share:.0%}" if s.feasible_share is not None else "none"
            quality = (f"{share} feasible, {found}{regret}" if len(r.objectives) == 1
                       else f"{share} feasible, {quality}")
        lines.append(f"{r.sampler:>8}: {len(r.arch_ids)} evaluations, {len(r.front)} on its front, {quality}")
    names = ", ".join(p.name for p in job.files.values())
    lines.append(f"results in {job.files['report'].parent}/: {names}")
    return lines
