"""Hypervolume-versus-evaluations curves: how fast each search method approaches the true front.

Each method runs with several seeds, so a curve is the seeds' mean with a min–max band; against a
tabulated space the curves are normalised by the true front's hypervolume, which makes methods and
reference points comparable (1.0 = the whole front found). Built as plain data first, rendered second,
like :mod:`nasrlm.plots._pareto`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nasrlm.plots._render import save_png

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["HypervolumeCurve", "HypervolumePlotData", "hypervolume_figure", "hypervolume_plot_data",
           "plot_hypervolume"]

RATIO_LABEL = "hypervolume / true front's"


@dataclass(frozen=True, eq=False)
class HypervolumeCurve:
    """One method's curve over evaluations 1 … n: the seeds' mean and their min and max."""

    label: str
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_seeds: int

    @property
    def evaluations(self) -> np.ndarray:
        """The x values: number of evaluations, starting at 1."""
        return np.arange(1, self.mean.shape[0] + 1)


@dataclass(frozen=True, eq=False)
class HypervolumePlotData:
    """Everything :func:`plot_hypervolume` draws; values are ratios when ``true_hypervolume`` is set.
    ``reference``: a value drawn across as the best there is (the best feasible value of a table)."""

    curves: tuple[HypervolumeCurve, ...]
    true_hypervolume: float | None
    y_label: str
    title: str
    reference: float | None = None

    @property
    def ratio(self) -> bool:
        return self.true_hypervolume is not None


def hypervolume_plot_data(curves: Mapping[str, Any], *, true_hypervolume: float | None = None,
                          title: str = "", y_label: str | None = None, reference: float | None = None
                          ) -> HypervolumePlotData:
    """Summarise per-seed hypervolume histories: ``curves`` maps a label to a (seeds, evaluations) array
    (a 1-D array is one seed). With ``true_hypervolume`` every value is divided by it. Other progress
    curves draw the same way (``y_label``; the best feasible value found so far, NaN where none was yet,
    with the best there is as ``reference``)."""
    if not curves:
        raise ValueError("curves is empty: nothing to plot")
    if true_hypervolume is not None and not (np.isfinite(true_hypervolume) and true_hypervolume > 0):
        raise ValueError(f"true_hypervolume must be positive and finite, got {true_hypervolume}")
    out = []
    for label, raw in curves.items():
        arr = np.asarray(raw, dtype=float)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ValueError(f"curve {label!r} has shape {np.shape(raw)}, expected (seeds, evaluations) "
                             "with at least one of each")
        if np.isinf(arr).any() or (y_label is None and np.isnan(arr).any()):
            raise ValueError(f"curve {label!r} holds non-finite hypervolumes")
        if true_hypervolume is not None:
            arr = arr / true_hypervolume
        with warnings.catch_warnings():  # an evaluation no seed has a value at yet is NaN, and left blank
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, low, high = np.nanmean(arr, axis=0), np.nanmin(arr, axis=0), np.nanmax(arr, axis=0)
        out.append(HypervolumeCurve(label=str(label), mean=mean, low=low, high=high, n_seeds=arr.shape[0]))
    label = y_label or (RATIO_LABEL if true_hypervolume is not None else "hypervolume")
    return HypervolumePlotData(curves=tuple(out), true_hypervolume=true_hypervolume, y_label=label,
                               title=title, reference=reference)


def hypervolume_figure(data: HypervolumePlotData) -> Figure:
    """The figure :func:`plot_hypervolume` saves (mean line and min–max band per method), outside pyplot."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6.4, 4.4), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for index, curve in enumerate(data.curves):
        color = f"C{index % 10}"
        seeds = f" ({curve.n_seeds} seeds)" if curve.n_seeds > 1 else ""
        x = curve.evaluations
        ax.plot(x, curve.mean, drawstyle="steps-post", color=color, lw=1.6, label=f"{curve.label}{seeds}")
        if curve.n_seeds > 1:
            ax.fill_between(x, curve.low, curve.high, step="post", color=color, alpha=0.18, linewidth=0)
    if data.reference is not None:
        ax.axhline(data.reference, color="black", lw=0.9, ls=":", label="best in the table")
    if data.ratio:
        ax.axhline(1.0, color="black", lw=0.9, ls=":", label="true front")
        ax.set_ylim(bottom=0.0, top=max(1.05, max(float(c.high.max()) for c in data.curves) * 1.02))
    ax.set_xlim(left=1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # evaluations are whole: no tick at 2.5
    ax.set_xlabel("evaluations")
    ax.set_ylabel(data.y_label)
    ax.grid(True, alpha=0.35)
    handles, labels = ax.get_legend_handles_labels()  # below the axes: the bands fill the inside
    banded = any(c.n_seeds > 1 for c in data.curves)
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 3), fontsize=8,
               frameon=False, title="line: mean over seeds, band: min–max" if banded else None,
               title_fontsize=8)
    if data.title:
        ax.set_title(data.title)
    return fig


def plot_hypervolume(data: HypervolumePlotData, path: str | Path) -> Path:
    """Render ``data`` (see :func:`hypervolume_figure`) to a 150-dpi PNG at ``path`` and return the path."""
    return save_png(hypervolume_figure(data), path)
