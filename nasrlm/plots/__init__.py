"""Plots for the Pareto search: fronts (found, true, predicted) and hypervolume curves.

Builders (``*_plot_data``) validate and derive plain data objects; ``plot_*`` render them to PNG files
with matplotlib, imported only when rendering, and without pyplot's global state.
"""

from __future__ import annotations

from nasrlm.plots._hypervolume import (
    HypervolumeCurve,
    HypervolumePlotData,
    hypervolume_figure,
    hypervolume_plot_data,
    plot_hypervolume,
)
from nasrlm.plots._pareto import Axis, ParetoPlotData, pareto_figure, pareto_plot_data, plot_pareto

__all__ = [
    "Axis",
    "HypervolumeCurve",
    "HypervolumePlotData",
    "ParetoPlotData",
    "hypervolume_figure",
    "hypervolume_plot_data",
    "pareto_figure",
    "pareto_plot_data",
    "plot_hypervolume",
    "plot_pareto",
]
