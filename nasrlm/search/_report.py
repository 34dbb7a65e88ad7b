"""What a finished search leaves behind: ``pareto.csv``, ``pareto.png``, ``hypervolume.png``, ``report.md``.

Quality is measured the way the benchmark tables are: hypervolume with the reference point at the
median of every objective over the whole space (when a table covers it; otherwise over everything the
searches evaluated), as a fraction of the true front's hypervolume, and Pareto recall, the share of the
true front's architectures that were found.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nasrlm.metrics import hypervolume, hypervolume_history, median_reference, pareto_mask, pareto_recall
from nasrlm.plots import (
    Axis,
    ParetoPlotData,
    hypervolume_plot_data,
    pareto_plot_data,
    plot_hypervolume,
    plot_pareto,
)
from nasrlm.search._constraints import Constraint
from nasrlm.search._run import SearchResult
from nasrlm.search.sampler import RLMSampler


@dataclass
class Truth:
    """Every architecture of the space with all objectives known: the true front and the reference; with
    constraints, each architecture's value of each (``limits``, met at 0 or less)."""

    ids: list[str]
    values: np.ndarray
    limits: np.ndarray | None = None

    @property
    def feasible(self) -> np.ndarray:
        """(architectures,) whether each meets every constraint (all of them, without constraints)."""
        if self.limits is None or not self.limits.size:
            return np.ones(len(self.ids), dtype=bool)
        return (self.limits <= 0).all(axis=1)

    def front(self, maximize: Sequence[bool]) -> np.ndarray:
        """Indices of the non-dominated architectures among those that meet the constraints."""
        feasible = np.flatnonzero(self.feasible)
        return feasible[pareto_mask(self.values[feasible], maximize)]


@dataclass
class PredictedFront:
    """The model's view: predicted medians and quartiles of the architectures it thinks are optimal."""

    ids: list[str]
    median: np.ndarray
    low: np.ndarray  # 25 % quantile
    high: np.ndarray  # 75 % quantile


@dataclass
class Scores:
    """Hypervolume ratio (or absolute hypervolume without a truth) and Pareto recall of one result; under
    constraints, of its feasible evaluations only, with their share and, for one objective, the best feasible
    value found and how far it falls short of the table's (``regret``, in the objective's unit)."""

    hypervolume: float
    hypervolume_ratio: float | None
    pareto_recall: float | None
    history: np.ndarray = field(repr=False)  # HV (ratio where known) after each evaluation
    feasible_share: float | None = None
    best: float | None = None
    regret: float | None = None


def reference_point(results: Sequence[SearchResult], truth: Truth | None) -> np.ndarray:
    """Hypervolume reference: the median of the whole space when known, else of everything evaluated."""
    if truth is not None:
        return median_reference(truth.values)
    return median_reference(np.vstack([r.values for r in results]))


def score(result: SearchResult, reference: np.ndarray, truth: Truth | None) -> Scores:
    """``result``'s scores against ``reference`` (and the true front where ``truth`` is known); an evaluation
    that misses a constraint adds nothing, from the same reference point as without the limit."""
    maximize, feasible = result.maximize, result.feasible
    values = np.where(feasible[:, None], result.values, np.nan)
    if "evaluations" in result.extra:  # a table of some evaluations: each at its number, none between
        spread = np.full((max(result.extra["evaluations"], default=0), len(maximize)), np.nan)
        spread[np.asarray(result.extra["evaluations"], dtype=int) - 1] = values
        values = spread
    history = hypervolume_history(values, reference, maximize)
    hv = float(history[-1]) if len(history) else 0.0
    constrained = bool(result.constraints)
    share = float(feasible.mean()) if constrained and len(feasible) else None
    best = regret = None
    if constrained and len(maximize) == 1 and feasible.any():
        best = float(_best(result.values[feasible, 0], maximize[0]))
    if truth is None:
        return Scores(hv, None, None, history, share, best)
    true_hv = hypervolume(truth.values[truth.feasible], reference, maximize)
    front_ids = [truth.ids[k] for k in truth.front(maximize)]
    if constrained and len(maximize) == 1 and truth.feasible.any():
        top = float(_best(truth.values[truth.feasible, 0], maximize[0]))
        regret = None if best is None else abs(top - best)
    ratio, curve = (hv / true_hv, history / true_hv) if true_hv > 0 else (None, history)
    recall = pareto_recall(result.arch_ids, front_ids) if front_ids else None
    return Scores(hv, ratio, recall, curve, share, best, regret)


def _best(values: np.ndarray, maximize: bool) -> float:
    return float(values.max() if maximize else values.min())


def write_report(result: SearchResult, out_dir: str | Path, *, space: str, truth: Truth | None = None,
                 predicted: PredictedFront | None = None, baselines: Sequence[SearchResult] = (),
                 command: str = "", report_at: Sequence[int] = ()) -> dict[str, Path]:
    """Write the four files into ``out_dir`` and return their paths by name.

    With one objective there is no Pareto plot (a front of one axis is its best architecture), and the
    report names the best architecture found instead of a front: three files; under a constraint,
    ``pareto.png`` draws the objective against the constrained quantity, the limit a line. Under
    constraints the front, the best found and the hypervolume are the feasible evaluations' (with one
    objective, ``hypervolume.png`` draws the best feasible value found so far). ``report_at``: budgets at
    which the report gives each result's hypervolume too. A result whose ``extra["ordered"]`` is false (a
    table in no evaluation order) has no curve.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    objectives, maximize = result.objectives, result.maximize
    reference = reference_point([result, *baselines], truth)
    scores = {r.sampler: score(r, reference, truth) for r in [result, *baselines]}
    paths = {"csv": out / "pareto.csv", "pareto": out / "pareto.png", "hypervolume": out / "hypervolume.png",
             "report": out / "report.md"}
    if len(objectives) < 2 and not result.constraints:
        del paths["pareto"]

    front = result.front
    front = front[np.lexsort(result.values[front].T[::-1])]  # sorted by the first objective
    true_front = truth.values[truth.front(maximize)] if truth is not None else None
    with paths["csv"].open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["arch_id", "evaluation", *(o.header for o in objectives)])
        for k in front:
            writer.writerow([result.arch_ids[k], k + 1, *(f"{v:.6g}" for v in result.values[k])])

    title = f"{space}: {len(result.arch_ids)} evaluations with {result.sampler}"
    if "pareto" in paths and len(objectives) == 1:
        plot_pareto(_against_the_limit(result, truth, baselines, title), paths["pareto"])
    elif "pareto" in paths:
        met = result.feasible
        data = pareto_plot_data(
            [Axis(o.name, o.unit, o.higher_is_better) for o in objectives], result.values[met],
            evaluated_ids=[i for i, ok in zip(result.arch_ids, met, strict=True) if ok],
            true_front=true_front,
            predicted_front=predicted.median if predicted is not None else None,
            predicted_low=predicted.low if predicted is not None else None,
            predicted_high=predicted.high if predicted is not None else None,
            background=truth.values if truth is not None else None,
            baselines={b.sampler: b.values[b.feasible] for b in baselines if b.feasible.any()},
            infeasible=result.values[~met] if result.constraints else None,
            limit_lines=[(result.names.index(c.quantity), c.limit, c.name) for c in _constraints(result)
                         if c.quantity in result.names], title=title)
        plot_pareto(data, paths["pareto"])
    ordered = [r for r in [result, *baselines] if r.extra.get("ordered", True) and len(r.arch_ids)]
    if not ordered:
        del paths["hypervolume"]
    elif result.constraints and len(objectives) == 1:  # the best feasible value so far, as regret would
        o = objectives[0]
        curves = {r.sampler: _best_so_far(r)[None, :] for r in ordered}
        plot_hypervolume(hypervolume_plot_data(
            curves, y_label=f"best feasible {o.header}",
            title=f"{space}: best feasible {o.name} vs evaluations",
            reference=_best(truth.values[truth.feasible, 0], o.higher_is_better)
            if truth is not None and truth.feasible.any() else None), paths["hypervolume"])
    else:
        ratio = truth is not None and all(s.hypervolume_ratio is not None for s in scores.values())
        curves = {r.sampler: scores[r.sampler].history[None, :] for r in ordered}
        plot_hypervolume(hypervolume_plot_data(
            curves, true_hypervolume=1.0 if ratio else None,
            title=f"{space}: hypervolume{' of feasible evaluations' if result.constraints else ''} vs "
                  "evaluations"), paths["hypervolume"])
    ordered_names = {r.sampler for r in ordered}
    at = {name: [float(s.history[b - 1]) if name in ordered_names and len(s.history) >= b else None
                 for b in report_at] for name, s in scores.items()}
    paths["report"].write_text(_markdown(result, front, scores, reference, truth, true_front, predicted,
                                         space=space, command=command, report_at=(list(report_at), at),
                                         files=[p.name for p in paths.values()]))
    return paths


def _constraints(result: SearchResult) -> list[Constraint]:
    """The constraints ``result`` searched under, read back from their names."""
    return [Constraint.parse(name) for name in result.constraints]


def _quantity(values: np.ndarray, limits: np.ndarray, objectives: Sequence[str], c: Constraint, k: int
              ) -> np.ndarray:
    """The constrained quantity of constraint ``k`` (``c``) of each row: an objective's values, or read back
    from the constraint's values (``limits``)."""
    if c.quantity in objectives:
        return values[:, list(objectives).index(c.quantity)]
    return limits[:, k] + c.limit if c.operator == "<=" else c.limit - limits[:, k]


def _against_the_limit(result: SearchResult, truth: Truth | None, baselines: Sequence[SearchResult],
                       title: str) -> ParetoPlotData:
    """One objective under a constraint: the objective against the first constraint's quantity, its limit a
    line across, what missed a constraint marked apart, the table faintly where it covers the space."""
    c = _constraints(result)[0]
    unit = result.extra.get("units", {}).get(c.quantity, "")
    axes = [Axis(result.objectives[0].name, result.objectives[0].unit, result.maximize[0]),
            Axis(c.quantity, unit, c.operator == ">=")]

    def shown(r: SearchResult) -> np.ndarray:
        return np.column_stack([r.values[:, 0], _quantity(r.values, r.limits, r.names, c, 0)])

    points, met = shown(result), result.feasible
    background = None
    if truth is not None and truth.limits is not None:
        background = np.column_stack([truth.values[:, 0],
                                      _quantity(truth.values, truth.limits, result.names, c, 0)])
    ids = [i for i, ok in zip(result.arch_ids, met, strict=True) if ok]
    others = {b.sampler: shown(b)[b.feasible] for b in baselines if b.feasible.any()}
    return pareto_plot_data(axes, points[met], evaluated_ids=ids, background=background,
                            infeasible=points[~met], limit_lines=[(1, c.limit, c.name)], baselines=others,
                            title=title)


def _best_so_far(result: SearchResult) -> np.ndarray:
    """(evaluations,) the best feasible value of the one objective after each evaluation (NaN before the
    first feasible one)."""
    maximize = result.maximize[0]
    values = np.where(result.feasible, result.values[:, 0], np.nan)
    signed = values if maximize else -values
    with np.errstate(invalid="ignore"):
        best = np.fmax.accumulate(np.where(np.isnan(signed), -np.inf, signed)) if len(signed) else signed
    best = np.where(np.isinf(best), np.nan, best)
    return best if maximize else -best


def _markdown(result: SearchResult, front: np.ndarray, scores: dict[str, Scores], reference: np.ndarray,
              truth: Truth | None, true_front: np.ndarray | None, predicted: PredictedFront | None, *,
              space: str, command: str, files: Sequence[str],
              report_at: tuple[list[int], dict[str, list[float | None]]] = ([], {})) -> str:
    """``front``: indices of the front found, in table order; ``true_front``: its values, if known."""
    objectives = result.objectives
    lines = [f"# Search report: {space}", ""]
    if command:
        lines += ["```", command, "```", ""]
    lines += [f"{len(result.arch_ids)} evaluations with `{result.sampler}` in {result.seconds:.0f} s "
              f"({result.extra.get('failed_trials', 0)} failed trials).", "", "## Objectives", "",
              "| objective | unit | direction | reference point | source |", "|---|---|---|---|---|"]
    for o, r in zip(objectives, reference, strict=True):
        lines.append(f"| {o.name} | {o.unit} | {'maximise' if o.higher_is_better else 'minimise'} | "
                     f"{r:.4g} | {o.description} ({o.source}) |")
    where = "the whole space" if truth is not None else "everything evaluated (no table covers the space)"
    lines += ["", f"Reference point: median of each objective over {where}."]
    warm = result.extra.get("warm_start")
    if warm:  # what earlier studies and tables told the search, and how its first evaluations used it
        lines += ["", "## Warm start", "", *(f"- {line.removeprefix('warm start: ')}" for line in warm)]
    constrained, single = bool(result.constraints), len(objectives) == 1
    if constrained:
        named = ", ".join(f"`{c}`" for c in result.constraints)
        lines += ["", "## Constraints", "", f"Searched under {named}"
                  + " (each trial's `trial.set_constraint`): an evaluation that misses one counts toward the "
                  "budget but adds nothing to the hypervolume, the front or the best found."]
        if truth is not None:
            met = truth.feasible
            lines += ["", f"{int(met.sum()):,} of {len(truth.ids):,} architectures of the table "
                      f"({met.mean():.1%}) meet them."]
            if single and met.any():
                k = np.flatnonzero(met)[np.argmax(truth.values[met, 0] * (1 if result.maximize[0] else -1))]
                lines += ["", f"The best of them: `{_cell(truth.ids[k])}`, {objectives[0].name} "
                          f"{truth.values[k, 0]:.4g} {objectives[0].unit}".rstrip() + "."]
    budgets, at = report_at
    ratios = truth is not None and all(s.hypervolume_ratio is not None for s in scores.values())
    head = "| sampler | hypervolume | HV / true front's | Pareto recall |"
    head += "".join(f" {'HV ratio' if ratios else 'HV'} @{b} |" for b in budgets)
    if constrained:
        head += " feasible |" + (" best feasible | regret |" if single else "")
    lines += ["", "## Quality", "", head, "|" + "---|" * (head.count("|") - 1)]
    for name, s in scores.items():
        ratio = f"{s.hypervolume_ratio:.3f}" if s.hypervolume_ratio is not None else "n/a"
        recall = f"{s.pareto_recall:.3f}" if s.pareto_recall is not None else "n/a"
        row = f"| {name} | {s.hypervolume:.4g} | {ratio} | {recall} |"
        row += "".join(" n/a |" if v is None else f" {v:.3f} |" for v in at.get(name, []))
        if constrained:
            row += f" {s.feasible_share:.0%} |" if s.feasible_share is not None else " n/a |"
            if single:
                row += (f" {s.best:.4g} |" if s.best is not None else " none |")
                row += (f" {s.regret:.4g} |" if s.regret is not None else " n/a |")
        lines.append(row)
    if truth is not None and true_front is not None:
        held = "Best value held by" if single else "True front"
        among = f"{int(truth.feasible.sum()):,} feasible" if constrained else f"{len(truth.ids):,}"
        lines += ["", f"{held}: {len(true_front)} of {among} architectures."]
    heading = "Best architecture found" if single else "Pareto front found"
    if constrained:
        heading = "Best feasible architecture found" if single else "Feasible Pareto front found"
    lines += ["", f"## {heading}", ""]
    if len(front):
        lines += ["| arch_id | evaluation | " + " | ".join(o.header for o in objectives) + " |",
                  "|---|---|" + "---|" * len(objectives)]
    else:
        lines += ["None: no evaluation met the constraints."]
    for k in front:
        cells = " | ".join(f"{v:.4g}" for v in result.values[k])
        arch_id = _cell(result.arch_ids[k])
        lines.append(f"| `{arch_id}` | {k + 1} | {cells} |")
    if predicted is not None and not single:
        lines += ["", f"The model's predicted front ({len(predicted.ids)} architectures, medians with "
                  "quartiles) is drawn dashed in `pareto.png`."]
    described = {"pareto.csv": f"`pareto.csv` (the {'best' if single else 'front'} found)"}
    shown = [described.get(name, f"`{name}`") for name in files if name != "report.md"]
    lines += ["", f"Files: {', '.join(shown)}.", ""]
    return "\n".join(lines)


def _cell(arch_id: str) -> str:
    """An architecture id inside a markdown table: a bare ``|`` would end the cell."""
    return arch_id.replace("|", "\\|")


def predicted_front(sampler: RLMSampler, arch_ids: Sequence[str], maximize: Sequence[bool], *,
                    num_samples: int = 16, seed: int = 0) -> PredictedFront:
    """The non-dominated predicted medians among ``arch_ids`` (of those predicted to meet the study's
    constraints), with their quartiles (the model's residual weighted as for the sampler's latest
    proposals)."""
    samples = sampler.predict_samples(list(arch_ids), num_samples=num_samples, seed=seed,
                                      residual_weight=sampler.last_residual_weights)
    low, median, high = np.quantile(samples, [0.25, 0.5, 0.75], axis=1)
    m = len(maximize)  # the study's constraints come after its objectives
    low, high, met = low[:, :m], high[:, :m], (median[:, m:] <= 0).all(axis=1)
    median = median[:, :m]
    keep = np.flatnonzero(met)[pareto_mask(median[met], maximize)]
    return PredictedFront([arch_ids[k] for k in keep], median[keep], low[keep], high[keep])
