"""``nasrlm plot``: earlier studies and tables drawn side by side, as ``nasrlm search`` draws its own."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nasrlm.cli._common import CliError, Command, _comma_list, _positive_int
from nasrlm.cli._inputs import _space
from nasrlm.data import resolve_data_dir


class Plot(Command):
    name = "plot"
    help = "draw the fronts and hypervolume curves of earlier studies and tables side by side"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("sources", nargs="+", metavar="SOURCE",
                       help="an Optuna storage URL (sqlite:///study.db: every study it holds) or a CSV table "
                            "('nasrlm data', or a search's pareto.csv)")
        p.add_argument("--out", required=True, help="directory for pareto.png, hypervolume.png, report.md")
        p.add_argument("--study", action="append", default=[], metavar="NAME",
                       help="draw only these studies of the storages (repeatable; default: all)")
        p.add_argument("--space", help="the search space, for the true front and the reference point where a "
                                       "table covers it (default: the one a CSV records)")
        p.add_argument("--data-dir", help="benchmark data directory (default $NASRLM_DATA)")
        p.add_argument("--report-at", default="50,100", metavar="BUDGETS",
                       help="evaluations at which report.md gives each study's hypervolume (default 50,100)")

    def run(self, args: argparse.Namespace) -> int:
        from nasrlm.search import read_sources, write_report

        budgets = [_positive_int(b) for b in _comma_list(args.report_at)]
        results = read_sources(args.sources, args.study)
        if not results:
            raise CliError(f"--study {', '.join(args.study)}: none of the sources holds such a study")
        names = [o.name for o in results[0].objectives]
        for r in results[1:]:
            if [o.name for o in r.objectives] != names:
                raise CliError(f"{r.study_name} has objectives {', '.join(o.name for o in r.objectives)}, "
                               f"{results[0].study_name} {', '.join(names)}: plot results of the same "
                               "objectives")
        space_name = args.space or next((r.extra["space"] for r in results
                                         if r.extra.get("space") not in (None, "unknown")), None)
        truth = _truth(space_name, results, args.data_dir) if space_name else None
        seen = set()
        for r in results:  # two studies of one name in two storages: told apart in the legend
            if r.sampler in seen:
                r.sampler = f"{r.sampler} ({r.study_name})"
            seen.add(r.sampler)
        files = write_report(results[0], Path(args.out), space=space_name or "studies", truth=truth,
                             baselines=results[1:], command=" ".join(["nasrlm", *sys.argv[1:]]),
                             report_at=budgets)
        print(f"{len(results)} results drawn: {', '.join(r.sampler for r in results)}")
        print(f"results in {Path(args.out)}/: {', '.join(p.name for p in files.values())}")
        return 0


def _truth(space_name: str, results: list, data_dir: str | None):
    """The true front of ``space_name`` for the results' objectives (and constraints, where they are limits
    ``nasrlm search`` wrote, ``pixel3<=10``), where its tables cover the space; else ``None``."""
    from nasrlm.search import ArchEvaluator, Constraint, Truth

    space = _space(space_name)
    names = [o.name for o in results[0].objectives]
    try:
        constraints = [Constraint.parse(c) for c in results[0].constraints]
    except ValueError:
        constraints = []  # another tool's constraint names say no limit: no feasible truth
    try:
        evaluator = ArchEvaluator.for_names(space, names, data_dir=resolve_data_dir(data_dir),
                                            constraints=constraints)
    except ValueError:  # a study's objective no table of the space publishes: no true front
        return None
    known = evaluator.truth()
    return None if known is None else Truth(*known)
