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
from nasrlm.plots import Axis, hypervolume_plot_data, pareto_plot_data, plot_hypervolume, plot_pareto
from nasrlm.search._run import SearchResult
from nasrlm.search.sampler import RLMSampler


@dataclass
class Truth:
    """Every architecture of the space with all objectives known: the true front and the reference."""

    ids: list[str]
    values: np.ndarray

    def front(self, maximize: Sequence[bool]) -> np.ndarray:
        return np.flatnonzero(pareto_mask(self.values, maximize))


@dataclass
class PredictedFront:
    """The model's view: predicted medians and quartiles of the architectures it thinks are optimal."""

    ids: list[str]
    median: np.ndarray
    low: np.ndarray  # 25 % quantile
    high: np.ndarray  # 75 % quantile


@dataclass
class Scores:
    """Hypervolume ratio (or absolute hypervolume without a truth) and Pareto recall of one result."""

    hypervolume: float
    hypervolume_ratio: float | None
    pareto_recall: float | None
    history: np.ndarray = field(repr=False)  # HV (ratio where known) after each evaluation


def reference_point(results: Sequence[SearchResult], truth: Truth | None) -> np.ndarray:
    """Hypervolume reference: the median of the whole space when known, else of everything evaluated."""
    if truth is not None:
        return median_reference(truth.values)
    return median_reference(np.vstack([r.values for r in results]))


def score(result: SearchResult, reference: np.ndarray, truth: Truth | None) -> Scores:
    maximize = result.maximize
    history = hypervolume_history(result.values, reference, maximize)
    hv = float(history[-1]) if len(history) else 0.0
    if truth is None:
        return Scores(hv, None, None, history)
    true_hv = hypervolume(truth.values, reference, maximize)
    front_ids = [truth.ids[k] for k in truth.front(maximize)]
    return Scores(hv, hv / true_hv, pareto_recall(result.arch_ids, front_ids), history / true_hv)


def write_report(result: SearchResult, out_dir: str | Path, *, space: str, truth: Truth | None = None,
                 predicted: PredictedFront | None = None, baselines: Sequence[SearchResult] = (),
                 command: str = "") -> dict[str, Path]:
    """Write the four files into ``out_dir`` and return their paths by name.

    With one objective there is no Pareto plot (a front of one axis is its best architecture), and the
    report names the best architecture found instead of a front: three files.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    objectives, maximize = result.objectives, result.maximize
    axes = [Axis(o.name, o.unit, o.higher_is_better) for o in objectives]
    reference = reference_point([result, *baselines], truth)
    scores = {r.sampler: score(r, reference, truth) for r in [result, *baselines]}
    paths = {"csv": out / "pareto.csv", "pareto": out / "pareto.png", "hypervolume": out / "hypervolume.png",
             "report": out / "report.md"}
    if len(objectives) < 2:
        del paths["pareto"]

    front = result.front
    front = front[np.lexsort(result.values[front].T[::-1])]  # sorted by the first objective
    true_front = truth.values[truth.front(maximize)] if truth is not None else None
    with paths["csv"].open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["arch_id", "evaluation", *(o.header for o in objectives)])
        for k in front:
            writer.writerow([result.arch_ids[k], k + 1, *(f"{v:.6g}" for v in result.values[k])])

    if "pareto" in paths:
        data = pareto_plot_data(
            axes, result.values, evaluated_ids=result.arch_ids, true_front=true_front,
            predicted_front=predicted.median if predicted is not None else None,
            predicted_low=predicted.low if predicted is not None else None,
            predicted_high=predicted.high if predicted is not None else None,
            background=truth.values if truth is not None else None,
            baselines={b.sampler: b.values for b in baselines if len(b.values)},
            title=f"{space}: {len(result.arch_ids)} evaluations with {result.sampler}")
        plot_pareto(data, paths["pareto"])
    curves = {name: s.history[None, :] for name, s in scores.items()}
    plot_hypervolume(hypervolume_plot_data(
        curves, true_hypervolume=1.0 if truth is not None else None,
        title=f"{space}: hypervolume vs evaluations"), paths["hypervolume"])
    paths["report"].write_text(_markdown(result, front, scores, reference, truth, true_front, predicted,
                                         space=space, command=command,
                                         files=[p.name for p in paths.values()]))
    return paths


def _markdown(result: SearchResult, front: np.ndarray, scores: dict[str, Scores], reference: np.ndarray,
              truth: Truth | None, true_front: np.ndarray | None, predicted: PredictedFront | None, *,
              space: str, command: str, files: Sequence[str]) -> str:
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
    lines += ["", f"Reference point: median of each objective over {where}.", "", "## Quality", "",
              "| sampler | hypervolume | HV / true front's | Pareto recall |", "|---|---|---|---|"]
    for name, s in scores.items():
        ratio = f"{s.hypervolume_ratio:.3f}" if s.hypervolume_ratio is not None else "n/a"
        recall = f"{s.pareto_recall:.3f}" if s.pareto_recall is not None else "n/a"
        lines.append(f"| {name} | {s.hypervolume:.4g} | {ratio} | {recall} |")
    single = len(objectives) == 1
    if truth is not None and true_front is not None:
        held = "Best value held by" if single else "True front"
        lines += ["", f"{held}: {len(true_front)} of {len(truth.ids):,} architectures."]
    heading = "Best architecture found" if single else "Pareto front found"
    lines += ["", f"## {heading}", "", "| arch_id | evaluation | "
              + " | ".join(o.header for o in objectives) + " |", "|---|---|" + "---|" * len(objectives)]
    for k in front:
        cells = " | ".join(f"{v:.4g}" for v in result.values[k])
        arch_id = result.arch_ids[k].replace("|", "\\|")  # a bare | would end the table cell
        lines.append(f"| `{arch_id}` | {k + 1} | {cells} |")
    if predicted is not None and not single:
        lines += ["", f"The model's predicted front ({len(predicted.ids)} architectures, medians with "
                  "quartiles) is drawn dashed in `pareto.png`."]
    described = {"pareto.csv": f"`pareto.csv` (the {'best' if single else 'front'} found)"}
    shown = [described.get(name, f"`{name}`") for name in files if name != "report.md"]
    lines += ["", f"Files: {', '.join(shown)}.", ""]
    return "\n".join(lines)


def predicted_front(sampler: RLMSampler, arch_ids: Sequence[str], maximize: Sequence[bool], *,
                    num_samples: int = 16, seed: int = 0) -> PredictedFront:
    """The non-dominated predicted medians among ``arch_ids``, with their quartiles (the model's residual
    weighted as for the sampler's latest proposals)."""
    samples = sampler.predict_samples(list(arch_ids), num_samples=num_samples, seed=seed,
                                      residual_weight=sampler.last_residual_weights)
    low, median, high = np.quantile(samples, [0.25, 0.5, 0.75], axis=1)
    keep = np.flatnonzero(pareto_mask(median, maximize))
    return PredictedFront([arch_ids[k] for k in keep], median[keep], low[keep], high[keep])
