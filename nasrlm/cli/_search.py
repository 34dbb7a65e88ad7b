"""``nasrlm search`` and ``nasrlm demo``, and the checks of a study's storage before a search starts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nasrlm.cli._common import (
    CliError,
    Command,
    _add_label_options,
    _add_threads,
    _check_db,
    _check_output_dir,
    _comma_list,
    _count,
    _device,
    _positive_int,
    _say_alias,
    torch_threads,
)
from nasrlm.cli._inputs import _load_base, _objective_names, _profile, _space
from nasrlm.cli._sampler_checks import _check_rlm_options, _check_sampler, _rlm_options
from nasrlm.data import resolve_data_dir

#: What ``--threads`` of a command that searches adds: the sampler's model keeps its own count.
SEARCH_THREADS_NOTE = ("; the rlm sampler's own model trains and decodes on one whatever this says, so "
                       "that a seed gives the same trials with any count")


class Search(Command):
    name = "search"
    help = "multi-objective architecture search; writes plots and a report"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from nasrlm.search import SAMPLERS  # the run needs nasrlm.search anyway

        p.add_argument("space")
        p.add_argument("--objectives", required=True,
                       help="comma-separated, e.g. acc,pixel3 (tables), acc,cpu-1t-b1 (measured live) or "
                            "val_acc,cpu-1t-b1 (val_acc: each network trained here, see --train)")
        p.add_argument("--budget", type=_positive_int, required=True,
                       help="objective evaluations (completed trials)")
        p.add_argument("--constraint", action="append", default=[], metavar="EXPR",
                       help="search only among architectures that meet it, e.g. 'pixel3<=10' or 'acc>=70' "
                            "(repeatable; any name 'nasrlm objectives' lists, an objective or not, in its "
                            "unit): the best network under a latency budget")
        p.add_argument("--warm-start", action="append", default=[], metavar="SOURCE",
                       help="start from what is known: an Optuna storage URL (every study it holds that "
                            "names its objectives; any sampler, any tool) or a CSV table ('nasrlm data', a "
                            "search's pareto.csv); repeatable. A column named as an objective is known, "
                            "any other is evidence the model reads; --compare's samplers get the earlier "
                            "front enqueued first")
        p.add_argument("--warm-start-study", action="append", default=[], metavar="NAME",
                       help="read only these studies of the --warm-start storages (repeatable)")
        p.add_argument("--sampler", choices=list(SAMPLERS), default="rlm",
                       help="default rlm; tpe-mv: multivariate TPE; gp: Optuna's Gaussian-process sampler")
        p.add_argument("--compare", metavar="NAMES", help="also run these samplers, e.g. random,nsga2,tpe")
        p.add_argument("--rlm-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an RLMSampler setting, e.g. num_candidates=4000 or temperature=2 (repeatable; "
                            "docs/sampler.md lists them)")
        p.add_argument("--base", metavar="BASE",
                       help="start every refit of the rlm sampler from this base model: 'shipped' (the one "
                            "in the package) or a directory 'nasrlm pretrain' wrote (default: none, a model "
                            "learned from scratch)")
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
        p.add_argument("--seed", type=_count, default=0,
                       help="the search's seed (default %(default)s); workers of one rlm study on other "
                            "machines take the same one; other samplers' take seeds at least --workers "
                            "apart (worker k of a machine: the seed plus k)")
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
        _add_threads(p, SEARCH_THREADS_NOTE)
        _add_label_options(p)
        p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.measure import is_profile
        from nasrlm.search import SAMPLERS, search_job, summary

        space = _space(args.space)
        names = _objective_names(args.objectives)
        for name in names:
            if is_profile(name):  # measured live, here
                _profile(name, "--objectives", run=True, space=space)
        constraints = _constraints(args.constraint)
        for c in constraints:
            if is_profile(c.quantity) and c.quantity not in names:
                _profile(c.quantity, "--constraint", run=True, space=space)
        compare = _comma_list(args.compare or "")
        unknown = [n for n in compare if n not in SAMPLERS]
        if unknown:
            raise CliError(f"--compare: unknown sampler {unknown[0]!r}; choose from "
                           f"{', '.join(SAMPLERS)}")
        if space.size is not None and args.budget > space.size:
            raise CliError(f"--budget {args.budget}: search space {space.name} has only {space.size:,} "
                           "architectures")
        rlm_only = [o for o, given in (("--rlm-option", args.rlm_option), ("--base", args.base),
                                       ("--device", args.device != "cpu" and "val_acc" not in names))
                    if given]
        if rlm_only and args.sampler != "rlm":
            raise CliError(f"{rlm_only[0]} applies to --sampler rlm, not {args.sampler}")
        options = _rlm_options(args.rlm_option)
        if "base" in options:  # the old way to name it
            _say_alias("--rlm-option base=", "--base")
            named = options.pop("base")  # null: no base
            named = None if named is None else str(named)
            if args.base and named is not None and args.base != named:
                raise CliError(f"--base {args.base} and --rlm-option base={named}: give one of them")
            args.base = args.base or named
        _check_rlm_options(options, space)
        if args.base:  # resolved once, here: a bad base is a one-line error now, not at the first fit
            _load_base(args.base, [], space.name)
            options["base"] = args.base
        if args.device != "cpu" and args.sampler == "rlm":
            options["device"] = _device(args.device)
        _check_sampler(args.sampler, space, args.seed, options)
        warm_start = _warm_start(args.warm_start, args.warm_start_study, space, names)
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
        _check_study(kept, study_name, names, [c.name for c in constraints])
        torch_threads(args.threads)
        try:
            job = search_job(space, names, budget=args.budget, out_dir=out, sampler=args.sampler,
                             seed=args.seed, storage=storage, study_name=args.study_name, data_dir=data_dir,
                             db=args.db, compare=compare, sampler_options=options, workers=args.workers,
                             threads=args.threads, progress=not args.quiet,
                             command=_shown_command(sys.argv[1:]), training=training, constraints=constraints,
                             warm_start=warm_start)
        except KeyboardInterrupt:
            raise Interrupted(_what_was_kept(kept, study_name)) from None
        for line in summary(job):
            print(line)
        return 0


def _warm_start(sources: Sequence[str], studies: Sequence[str], space: Any, names: Sequence[str]
                ) -> list[Any]:
    """``--warm-start``'s studies and tables, each read once here (the search takes them as read): a missing
    file, an unknown study, unnamed objectives or another space's table is a one-line error before the search
    starts."""
    from nasrlm.search import WarmStartError, read_warm_start, warm_start_sources

    if studies and not sources:
        raise CliError("--warm-start-study needs --warm-start naming the storage that holds it")
    try:
        return list(read_warm_start(warm_start_sources(sources, studies), space, names).sources)
    except WarmStartError as error:
        raise CliError(f"--warm-start: {error}") from None


def _constraints(given: Sequence[str]) -> list[Any]:
    """``--constraint``s parsed (each at most once), or a one-line error naming the one at fault."""
    from nasrlm.search import Constraint

    constraints = []
    for text in given:
        try:
            c = Constraint.parse(text)
        except ValueError as error:
            raise CliError(f"--constraint: {error}") from None
        if c.name in {d.name for d in constraints}:
            raise CliError(f"--constraint {c.name} is given twice")
        constraints.append(c)
    return constraints


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


def _check_study(storage: str | None, study_name: str, names: Sequence[str], constraints: Sequence[str] = ()
                 ) -> None:
    """A study to resume in an SQLite file must optimise the same objectives, in the same order, under the
    same constraints.

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
    from nasrlm.search import CONSTRAINTS_ATTR

    before = list(study.user_attrs.get(CONSTRAINTS_ATTR, []))
    if study.metric_names is not None and before != list(constraints):
        raise CliError(f"--study-name {study_name}: the study in {parsed.database} searches under the "
                       f"constraints {', '.join(before) or 'none'}, not {', '.join(constraints) or 'none'}; "
                       "pick another --study-name")


class Demo(Command):
    name = "demo"
    help = "the main job: NB201 accuracy vs latency search, plots in runs/demo"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--budget", type=_positive_int, default=100, help="evaluations (default 100)")
        p.add_argument("--out", default="runs/demo", help="output directory (default runs/demo)")
        p.add_argument("--data-dir", help="use published tables (acc, pixel3) instead of live measurement")
        p.add_argument("--seed", type=_count, default=0)
        _add_threads(p, SEARCH_THREADS_NOTE)
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
