"""Pareto-front plots of a search: what it evaluated, the front it found, the true and predicted fronts.

As in Optuna's ``visualization/_pareto_front.py``, a builder first turns raw arrays into a validated,
plain :class:`ParetoPlotData` (front mask, log-scale choice, …) that tests can inspect without drawing,
and :func:`plot_pareto` only renders it. Rendering uses ``matplotlib.figure.Figure`` with an Agg canvas
directly, never pyplot, so it leaves no global figure state behind and needs no display; matplotlib is
imported inside the render function to keep ``import nasrlm.plots`` cheap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nasrlm.metrics import pareto_mask, to_minimization
from nasrlm.plots._render import save_png

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Axis", "ParetoPlotData", "pareto_figure", "pareto_plot_data", "plot_pareto"]

#: An axis is drawn on a log scale when its positive data span more than this factor (two decades).
LOG_SPAN = 100.0
#: Evaluated points worse than this many interquartile ranges beyond the quartiles (Tukey's fence) do
#: not stretch an axis: one chance-level network at 10 % accuracy would squash every front to a line.
FENCE_IQR = 1.5
#: A point this many interquartile ranges beyond the quartiles on an axis' worse side (in logs where
#: the axis is positive, so a latency's long tail is not "far") sets neither the scale nor the range of
#: any axis, even on a front: NB201's cells that compute nothing reach chance accuracy in microseconds,
#: and would stretch a latency axis by three decades. Wide, so that a real trade-off stays in view.
FAR_IQR = 10.0

_FOUND = "tab:orange"
_PREDICTED = "tab:blue"
_DOMINATED = "0.6"
#: colours of other searches' fronts (``--compare``), after the found (orange) and predicted (blue) ones
_BASELINES = ("tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")
_BACKGROUND = "0.82"


@dataclass(frozen=True)
class Axis:
    """One objective as plotted: its name, unit and direction (``maximize`` True = higher is better)."""

    name: str
    unit: str
    maximize: bool

    @property
    def label(self) -> str:
        """Axis text such as ``"acc [%] ↑"``: the arrow tells the reader which way is better."""
        arrow = "↑" if self.maximize else "↓"
        unit = f" [{self.unit}]" if self.unit else ""
        return f"{self.name}{unit} {arrow}"


@dataclass(frozen=True, eq=False)
class ParetoPlotData:
    """Everything :func:`plot_pareto` draws, validated; arrays are (rows, m) in the axes' order."""

    axes: tuple[Axis, ...]
    evaluated: np.ndarray
    on_front: np.ndarray  # (n,) bool: evaluated rows that are non-dominated among the evaluated
    evaluated_ids: tuple[Any, ...] | None
    true_front: np.ndarray | None
    predicted_front: np.ndarray | None
    predicted_low: np.ndarray | None
    predicted_high: np.ndarray | None
    background: np.ndarray | None
    log_scale: tuple[bool, ...]  # per axis
    title: str
    #: per axis, the shown (low, high) when far-off points are left out (see FENCE_IQR, FAR_IQR), else None
    limits: tuple[tuple[float, float] | None, ...] = ()
    #: (label, front) of other searches drawn for comparison, each front (k, m) non-dominated
    baseline_fronts: tuple[tuple[str, np.ndarray], ...] = ()
    #: evaluated rows that missed a constraint (k, m): drawn apart, on no front
    infeasible: np.ndarray | None = None
    #: (axis, value, label) of each limit on an axis' quantity, drawn as a line across (``pixel3<=10``)
    limit_lines: tuple[tuple[int, float, str], ...] = ()

    @property
    def n_objectives(self) -> int:
        return len(self.axes)

    def beyond_limits(self, points: np.ndarray, axes: Sequence[int]) -> int:
        """How many of ``points`` fall outside the shown range of any of ``axes``."""
        out = np.zeros(len(points), dtype=bool)
        for k in axes:
            if self.limits and self.limits[k] is not None:
                low, high = self.limits[k]
                out |= (points[:, k] < low) | (points[:, k] > high)
        return int(out.sum())

    @property
    def found_front_ids(self) -> tuple[Any, ...]:
        """Ids of the found front's architectures (needs ``evaluated_ids``)."""
        if self.evaluated_ids is None:
            raise ValueError("no evaluated_ids were given to pareto_plot_data")
        return tuple(i for i, on in zip(self.evaluated_ids, self.on_front, strict=True) if on)


def _rows(name: str, array: Any, axes: Sequence[Axis], *, allow_empty: bool = True) -> np.ndarray:
    """``array`` as a float (k, m) array, or a ValueError that names the argument and the axes."""
    arr = np.asarray(array, dtype=float)
    m = len(axes)
    if arr.ndim == 1 and arr.size == 0:
        arr = arr.reshape(0, m)
    if arr.ndim != 2 or arr.shape[1] != m:
        names = ", ".join(a.name for a in axes)
        raise ValueError(f"{name} has shape {arr.shape}, expected (rows, {m}) for the axes ({names})")
    if not allow_empty and arr.shape[0] == 0:
        raise ValueError(f"{name} is empty: nothing to plot")
    return arr


def _wants_log(column_parts: Sequence[np.ndarray]) -> bool:
    """True when an axis' finite data are all positive and span more than two decades."""
    values = np.concatenate([np.ravel(p) for p in column_parts])
    values = values[np.isfinite(values)]
    if values.size == 0 or values.min() <= 0:
        return False
    return bool(values.max() / values.min() > LOG_SPAN)


def pareto_plot_data(axes: Sequence[Axis], evaluated: Any, *, evaluated_ids: Sequence[Any] | None = None,
                     true_front: Any = None, predicted_front: Any = None, predicted_low: Any = None,
                     predicted_high: Any = None, background: Any = None,
                     baselines: Mapping[str, Any] | None = None, title: str = "", infeasible: Any = None,
                     limit_lines: Sequence[tuple[int, float, str]] = ()) -> ParetoPlotData:
    """Validate a search's results and derive what the plot needs.

    ``evaluated`` (n, m): the values the search evaluated, in evaluation order; the non-dominated ones
    are found here (:func:`nasrlm.metrics.pareto_mask`). ``true_front`` (k, m): the real front from a
    full table. ``predicted_front`` (k, m): predicted medians of the model's front, optionally with
    ``predicted_low``/``predicted_high`` quantiles of the same shape for error bars. ``background``
    (N, m): the whole space, drawn faintly. ``baselines``: label -> values (n, m) other searches
    evaluated (``nasrlm search --compare``), whose fronts are drawn beside the one found. An axis gets
    a log scale when its data span > 2 decades. Under constraints, ``evaluated`` holds the evaluations
    that met them (the front is theirs), ``infeasible`` (k, m) those that did not, drawn apart, and
    ``limit_lines`` (axis, value, label) the limits on axes whose quantity is constrained.
    """
    axes = tuple(axes)
    if len(axes) < 2:
        raise ValueError(f"a Pareto plot needs at least two axes, got {len(axes)}")
    if not all(isinstance(a, Axis) for a in axes):
        raise ValueError("axes must be nasrlm.plots.Axis instances")
    missed = None if infeasible is None else _rows("infeasible", infeasible, axes)
    values = _rows("evaluated", evaluated, axes, allow_empty=missed is not None and len(missed) > 0)
    ids = None
    if evaluated_ids is not None:
        ids = tuple(evaluated_ids)
        if len(ids) != values.shape[0]:
            raise ValueError(f"evaluated_ids has {len(ids)} entries but evaluated has {values.shape[0]} rows")
    true = None if true_front is None else _rows("true_front", true_front, axes)
    bg = None if background is None else _rows("background", background, axes)
    pred = low = high = None
    if predicted_front is not None:
        pred = _rows("predicted_front", predicted_front, axes)
    for name, arr in (("predicted_low", predicted_low), ("predicted_high", predicted_high)):
        if arr is None:
            continue
        if pred is None:
            raise ValueError(f"{name} was given without predicted_front")
        arr = _rows(name, arr, axes)
        if arr.shape != pred.shape:
            raise ValueError(f"{name} has shape {arr.shape} but predicted_front has {pred.shape}")
        with np.errstate(invalid="ignore"):
            crossed = arr > pred if name == "predicted_low" else arr < pred
        if crossed.any():
            raise ValueError(
                f"{name} lies on the wrong side of predicted_front in {int(crossed.sum())} entries")
        if name == "predicted_low":
            low = arr
        else:
            high = arr
    maximize = [a.maximize for a in axes]
    others = []
    for label, other in (baselines or {}).items():
        other = _rows(f"baselines[{label!r}]", other, axes, allow_empty=False)
        others.append((str(label), other[pareto_mask(other, maximize)]))
    for axis, _, _ in limit_lines:
        if not 0 <= axis < len(axes):
            raise ValueError(f"limit_lines: axis {axis} of {len(axes)}")
    measured = values if missed is None else np.vstack([values, missed])  # every evaluation
    # a point far out on the worse side of an axis (a chance-level network, however fast) sets neither
    # the scale nor the range of any axis, even on a front (FAR_IQR)
    fences = [_fence(measured[:, k], maximize[k], FAR_IQR) for k in range(len(axes))]
    fronts = [front for _, front in others]
    if true is not None:
        fronts.append(true)
    kept = _within(measured, fences, maximize)
    fronts_kept = [_within(f, fences, maximize) for f in fronts]
    bg_kept = None if bg is None else _within(bg, fences, maximize)
    on_front = pareto_mask(values, maximize)
    must_show = [values[on_front & kept[: len(values)]],
                 *(f[m] for f, m in zip(fronts, fronts_kept, strict=True))]
    # what was measured sets the scale; predictions far beyond it are said to be off the axes
    parts = [measured[kept], *must_show[1:], *([] if bg is None else [bg[bg_kept]])]
    log_scale = tuple(_wants_log([p[:, i] for p in parts]) for i in range(len(axes)))
    wild = [measured[~kept], *(f[~m] for f, m in zip(fronts, fronts_kept, strict=True)),
            *([] if bg is None else [bg[~bg_kept]])]
    limits = tuple(_limits(measured[kept, i], [p[:, i] for p in must_show],
                           None if pred is None else pred[:, i], axes[i].maximize, log_scale[i],
                           dropped=np.concatenate([p[:, i] for p in wild]))
                   for i in range(len(axes)))
    return ParetoPlotData(
        axes=axes, evaluated=values, on_front=on_front, evaluated_ids=ids, true_front=true,
        predicted_front=pred, predicted_low=low, predicted_high=high, background=bg, log_scale=log_scale,
        title=title, limits=limits, baseline_fronts=tuple(others), infeasible=missed,
        limit_lines=tuple((int(a), float(v), str(label)) for a, v, label in limit_lines),
    )


def _fence(column: np.ndarray, maximize: bool, iqr: float) -> float | None:
    """Tukey's fence ``iqr`` ranges out on the worse side of an axis' finite values (``None``: < 4),
    measured in logs where every value is positive."""
    finite = column[np.isfinite(column)]
    if finite.size < 4:
        return None
    log = bool(finite.min() > 0)
    q1, q3 = np.percentile(np.log10(finite) if log else finite, [25, 75])
    fence = float(q1 - iqr * (q3 - q1) if maximize else q3 + iqr * (q3 - q1))
    return 10**fence if log else fence


def _within(points: np.ndarray, fences: Sequence[float | None], maximize: Sequence[bool]) -> np.ndarray:
    """Rows of ``points`` inside every axis' fence (see :func:`_fence`)."""
    keep = np.ones(len(points), dtype=bool)
    for k, (fence, up) in enumerate(zip(fences, maximize, strict=True)):
        if fence is not None:
            keep &= ~(points[:, k] < fence if up else points[:, k] > fence)
    return keep


def _limits(column: np.ndarray, must_show: Sequence[np.ndarray], predicted: np.ndarray | None,
            maximize: bool, log: bool, *, dropped: np.ndarray | None = None) -> tuple[float, float] | None:
    """The axis range of what was measured, or None when everything fits in it anyway.

    Evaluated points beyond Tukey's fence on the axis' *worse* side are left out; ``must_show`` (the
    fronts within every axis' fence) is always inside. Predicted medians outside that range (a model
    extrapolating past every measurement) are left out too, so that they do not set the scale.
    ``dropped``: values of points left out for another axis' fence; the range is set if they fall
    outside it here.
    """
    transform = np.log10 if log else (lambda v: v)

    def finite(v: np.ndarray) -> np.ndarray:
        v = np.ravel(v)
        v = v[np.isfinite(v)]
        return transform(v[v > 0]) if log else v

    values = finite(column)
    shown = np.concatenate([finite(p) for p in must_show] or [np.zeros(0)])
    outside = np.zeros(values.shape, dtype=bool)
    if values.size >= 4:
        q1, q3 = np.percentile(values, [25, 75])
        fence = q1 - FENCE_IQR * (q3 - q1) if maximize else q3 + FENCE_IQR * (q3 - q1)
        if shown.size:
            fence = min(fence, shown.min()) if maximize else max(fence, shown.max())
        outside = values < fence if maximize else values > fence
    inside = np.concatenate([values[~outside], shown])
    if inside.size == 0:
        return None
    low, high = float(inside.min()), float(inside.max())
    pad = 0.05 * (high - low or 1.0)
    low, high = low - pad, high + pad
    guesses = np.zeros(0) if predicted is None else finite(predicted)
    extrapolated = bool(np.any((guesses < low) | (guesses > high)))
    left = np.zeros(0) if dropped is None else finite(dropped)
    if not outside.any() and not extrapolated and not np.any((left < low) | (left > high)):
        return None
    return (10**low, 10**high) if log else (low, high)


def _best_first(points: np.ndarray, x_axis: Axis, y_axis: Axis) -> np.ndarray:
    """Order of ``points`` (k, 2) from the best x to the worst, so that ``steps-post`` draws the staircase."""
    loss = to_minimization(points, [x_axis.maximize, y_axis.maximize])
    return np.lexsort((loss[:, 1], loss[:, 0]))


def _counted(name: str, points: np.ndarray, data: ParetoPlotData, i: int, j: int) -> str:
    """A legend label: ``name``, how many ``points``, and how many of them lie off panel (i, j)."""
    off = data.beyond_limits(points, (i, j))
    return f"{name} ({len(points)}" + (f"; {off} off the axes)" if off else ")")


def _draw_panel(ax: Any, data: ParetoPlotData, i: int, j: int) -> None:
    """One (objective i, objective j) panel; staircases only when the data are really 2-D."""
    x_axis, y_axis = data.axes[i], data.axes[j]
    staircase = data.n_objectives == 2
    if data.background is not None and len(data.background):
        ax.scatter(data.background[:, i], data.background[:, j], s=3, c=_BACKGROUND, linewidths=0,
                   rasterized=True, zorder=0, label=f"search space ({len(data.background):,})")
    dominated = data.evaluated[~data.on_front]
    beyond = data.beyond_limits(dominated, (i, j))
    ax.scatter(dominated[:, i], dominated[:, j], s=14, c=_DOMINATED, alpha=0.8, linewidths=0, zorder=1,
               label=f"evaluated, dominated ({len(dominated):,}"
                     + (f"; {beyond} off the axes)" if beyond else ")"))
    if data.true_front is not None and len(data.true_front):
        true = data.true_front[:, [i, j]]
        if staircase:
            true = true[_best_first(true, x_axis, y_axis)]
            ax.plot(true[:, 0], true[:, 1], drawstyle="steps-post", color="black", lw=1.0, zorder=2)
        big = len(true) <= 150  # hundreds of rings would hide everything else
        ax.scatter(true[:, 0], true[:, 1], s=46 if big else 16, facecolors="none", edgecolors="black",
                   linewidths=1.0 if big else 0.6,
                   zorder=5, label=_counted("true front", data.true_front, data, i, j))
    if data.predicted_front is not None and len(data.predicted_front):
        med = data.predicted_front
        has_err = data.predicted_low is not None or data.predicted_high is not None
        low = med if data.predicted_low is None else data.predicted_low
        high = med if data.predicted_high is None else data.predicted_high
        xerr, yerr = ((np.vstack([med[:, c] - low[:, c], high[:, c] - med[:, c]]) if has_err else None)
                      for c in (i, j))
        pred = med[:, [i, j]]
        if staircase:
            order = _best_first(pred, x_axis, y_axis)
            ax.plot(pred[order, 0], pred[order, 1], drawstyle="steps-post", color=_PREDICTED, lw=1.2,
                    ls="--", zorder=3)
        off = data.beyond_limits(med, (i, j))
        ax.errorbar(pred[:, 0], pred[:, 1], xerr=xerr, yerr=yerr, fmt="D", ms=4, color=_PREDICTED,
                    ecolor=_PREDICTED, elinewidth=0.8, capsize=2, alpha=0.85, zorder=3,
                    label=f"predicted front ({len(pred)}" + (f"; {off} off the axes" if off else "")
                          + (", with quantile range)" if has_err else ")"))
    for (label, front), color in zip(data.baseline_fronts, itertools.cycle(_BASELINES), strict=False):
        points = front[:, [i, j]]
        if staircase:
            points = points[_best_first(points, x_axis, y_axis)]
            ax.plot(points[:, 0], points[:, 1], drawstyle="steps-post", color=color, lw=1.1, ls="-.",
                    zorder=3)
        ax.scatter(points[:, 0], points[:, 1], s=22, marker="s", c=color, linewidths=0, alpha=0.85,
                   zorder=3, label=_counted(f"{label}'s front", front, data, i, j))
    if data.infeasible is not None and len(data.infeasible):
        missed = data.infeasible
        ax.scatter(missed[:, i], missed[:, j], s=16, marker="x", c="tab:red", alpha=0.6, linewidths=0.8,
                   zorder=1, label=_counted("evaluated, missed a constraint", missed, data, i, j))
    for axis, value, label in data.limit_lines:
        if axis in (i, j):
            draw = ax.axvline if axis == i else ax.axhline
            draw(value, color="tab:red", lw=1.0, ls="--", zorder=2, label=f"limit {label}")
    found = data.evaluated[data.on_front][:, [i, j]]
    if staircase and len(found):
        line = found[_best_first(found, x_axis, y_axis)]
        ax.plot(line[:, 0], line[:, 1], drawstyle="steps-post", color=_FOUND, lw=1.6, zorder=3)
    ax.scatter(found[:, 0], found[:, 1], s=34, c=_FOUND, edgecolors="black", linewidths=0.5, zorder=4,
               label=_counted("found front", data.evaluated[data.on_front], data, i, j))
    ax.set_xlabel(x_axis.label)
    ax.set_ylabel(y_axis.label)
    if data.log_scale[i]:
        ax.set_xscale("log")
    if data.log_scale[j]:
        ax.set_yscale("log")
    if data.limits and data.limits[i] is not None:
        ax.set_xlim(*data.limits[i])
    if data.limits and data.limits[j] is not None:
        ax.set_ylim(*data.limits[j])
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)


def pareto_figure(data: ParetoPlotData) -> Figure:
    """The figure :func:`plot_pareto` saves, on an Agg canvas outside pyplot.

    Two objectives give one panel with staircases; three or more give a grid of all pairwise panels
    (i < j), where fronts are shown as markers only, since a projected m-D front is no staircase. One
    legend sits below the panels.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    pairs = list(itertools.combinations(range(data.n_objectives), 2))
    ncols = min(len(pairs), 3) if len(pairs) <= 6 else 5
    nrows = math.ceil(len(pairs) / ncols)
    single = len(pairs) == 1
    panel = (6.4, 4.8) if single else ((4.2, 3.6) if ncols <= 3 else (3.8, 3.3))
    fig = Figure(figsize=(panel[0] * ncols, panel[1] * nrows + 0.6), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, ncols, squeeze=False)
    for ax, (i, j) in zip(grid.flat, pairs, strict=False):
        _draw_panel(ax, data, i, j)
    for ax in grid.flat[len(pairs):]:
        ax.set_visible(False)
    # Below the panels, so that it hides no data and does not collide with the title.
    handles, labels = grid.flat[0].get_legend_handles_labels()
    renderer = fig.canvas.get_renderer()
    for columns in range(min(len(labels), 3 if single else 5), 0, -1):  # as many as fit the width
        legend = fig.legend(handles, labels, loc="outside lower center", ncols=columns,
                            fontsize=8 if single else 9, frameon=False, markerscale=1.5 if single else 1.8)
        if columns == 1 or legend.get_window_extent(renderer).width <= fig.bbox.width:
            break
        legend.remove()
    if data.title:
        fig.suptitle(data.title)
    return fig


def plot_pareto(data: ParetoPlotData, path: str | Path) -> Path:
    """Render ``data`` (see :func:`pareto_figure`) to a 150-dpi PNG at ``path`` and return the path."""
    return save_png(pareto_figure(data), path)
