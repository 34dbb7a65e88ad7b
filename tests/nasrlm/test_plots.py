"""Plot builders (validation, front mask, log-scale choice) and rendering (PNG written, no pyplot state)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nasrlm.metrics import pareto_mask
from nasrlm.plots import (
    Axis,
    hypervolume_figure,
    hypervolume_plot_data,
    pareto_figure,
    pareto_plot_data,
    plot_hypervolume,
    plot_pareto,
)

ACC = Axis("acc", "%", True)
PIXEL3 = Axis("pixel3", "ms", False)
PARAMS = Axis("params", "MB", False)
FLOPS = Axis("flops", "M", False)
ENERGY = Axis("energy", "mJ", False)
AXES = [ACC, PIXEL3, PARAMS, FLOPS, ENERGY]


def nb201_like(n: int, m: int, seed: int = 0) -> np.ndarray:
    """Accuracy 10–94 %, pixel3 latency 0.1–25 ms, and further minimised objectives that grow with size."""
    rng = np.random.default_rng(seed)
    cap = rng.beta(2, 2, n)
    lat = (0.12 * np.exp(5.2 * cap) * np.exp(rng.normal(0, 0.45, n))).clip(0.1, 25)
    acc = (94 - 35 * (1 - cap) ** 2 - np.abs(rng.normal(0, 3, n))).clip(10, 94)
    acc[rng.random(n) < 0.06] = 10.0
    extra = [lat * rng.uniform(0.02, 0.08, n), cap * 200 + 8, lat * rng.uniform(0.5, 3, n)]
    return np.column_stack([acc, lat, *extra])[:, :m]


@pytest.fixture
def no_pyplot_figures():
    plt = pytest.importorskip("matplotlib.pyplot")
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before == []


def test_axis_label_names_unit_and_direction() -> None:
    assert ACC.label == "acc [%] ↑"
    assert PIXEL3.label == "pixel3 [ms] ↓"
    assert Axis("score", "", True).label == "score ↑"


def test_importing_plots_does_not_import_matplotlib() -> None:
    code = "import sys, nasrlm.plots; assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_pareto_plot_data_marks_the_found_front_and_its_ids() -> None:
    values = np.array([[90.0, 5.0], [80.0, 6.0], [70.0, 1.0], [90.0, 5.0], [60.0, 0.5]])
    data = pareto_plot_data([ACC, PIXEL3], values, evaluated_ids=["a", "b", "c", "d", "e"])
    np.testing.assert_array_equal(data.on_front, [True, False, True, True, True])
    assert data.found_front_ids == ("a", "c", "d", "e")
    with pytest.raises(ValueError, match="no evaluated_ids"):
        _ = pareto_plot_data([ACC, PIXEL3], values).found_front_ids


@pytest.mark.parametrize("m", [2, 3, 5])
def test_the_found_front_is_every_point_no_other_point_dominates(m: int) -> None:
    values = nb201_like(120, m, seed=m)
    data = pareto_plot_data(AXES[:m], values)
    loss = np.where([a.maximize for a in AXES[:m]], -values, values)  # smaller is better on every axis
    dominated = [any((other <= point).all() and (other < point).any() for other in loss) for point in loss]
    np.testing.assert_array_equal(data.on_front, ~np.array(dominated))


def test_pareto_plot_data_validates_shapes() -> None:
    values = nb201_like(20, 2)
    with pytest.raises(ValueError, match=r"evaluated has shape \(20, 2\), expected \(rows, 3\)"):
        pareto_plot_data([ACC, PIXEL3, PARAMS], values)
    with pytest.raises(ValueError, match="evaluated is empty"):
        pareto_plot_data([ACC, PIXEL3], np.empty((0, 2)))
    with pytest.raises(ValueError, match="at least two axes"):
        pareto_plot_data([ACC], values[:, :1])
    with pytest.raises(ValueError, match="evaluated_ids has 3 entries but evaluated has 20 rows"):
        pareto_plot_data([ACC, PIXEL3], values, evaluated_ids=[1, 2, 3])
    with pytest.raises(ValueError, match="true_front has shape"):
        pareto_plot_data([ACC, PIXEL3], values, true_front=np.ones((4, 3)))
    with pytest.raises(ValueError, match="background has shape"):
        pareto_plot_data([ACC, PIXEL3], values, background=np.ones(5))
    with pytest.raises(ValueError, match="predicted_low was given without predicted_front"):
        pareto_plot_data([ACC, PIXEL3], values, predicted_low=values[:3])
    with pytest.raises(ValueError, match=r"predicted_high has shape \(2, 2\) but predicted_front has"):
        pareto_plot_data([ACC, PIXEL3], values, predicted_front=values[:3], predicted_high=values[:2])
    with pytest.raises(ValueError, match="predicted_low lies on the wrong side"):
        pareto_plot_data([ACC, PIXEL3], values, predicted_front=values[:3], predicted_low=values[:3] + 1)
    with pytest.raises(ValueError, match="Axis instances"):
        pareto_plot_data(["acc", "pixel3"], values)


def test_log_scale_only_beyond_two_decades() -> None:
    values = np.array([[10.0, 0.1], [94.0, 25.0], [50.0, 3.0]])
    assert pareto_plot_data([ACC, PIXEL3], values).log_scale == (False, True)
    narrow = np.array([[10.0, 1.0], [94.0, 5.0]])
    assert pareto_plot_data([ACC, PIXEL3], narrow).log_scale == (False, False)
    # The faint background counts: it sets the axis range.
    assert pareto_plot_data([ACC, PIXEL3], narrow, background=values).log_scale == (False, True)
    # Zero or negative values never get a log axis.
    assert pareto_plot_data([ACC, PIXEL3], np.array([[1.0, 0.0], [2.0, 25.0]])).log_scale == (False, False)


@pytest.mark.parametrize("m", [2, 3, 5])
def test_plot_pareto_writes_a_png(m: int, tmp_path: Path, no_pyplot_figures: None) -> None:
    space = nb201_like(3000, m, seed=1)
    rng = np.random.default_rng(2)
    evaluated = space[rng.choice(len(space), 150, replace=False)]
    true = space[pareto_mask(space, [a.maximize for a in AXES[:m]])]
    predicted = true[:6] * 1.01
    data = pareto_plot_data(AXES[:m], evaluated, true_front=true, predicted_front=predicted,
                            predicted_low=predicted * 0.97, predicted_high=predicted * 1.03, background=space,
                            title=f"{m} objectives")
    path = plot_pareto(data, tmp_path / "sub" / f"pareto{m}.png")
    assert path == tmp_path / "sub" / f"pareto{m}.png"
    assert path.stat().st_size > 5_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("m", "panels"), [(2, 1), (3, 3), (4, 6), (5, 10)])
def test_pareto_figure_has_one_panel_per_pair(m: int, panels: int, no_pyplot_figures: None) -> None:
    data = pareto_plot_data(AXES[:m], nb201_like(200, m))
    fig = pareto_figure(data)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == panels
    pairs = {(ax.get_xlabel(), ax.get_ylabel()) for ax in visible}
    assert (ACC.label, PIXEL3.label) in pairs
    assert len(pairs) == panels
    first = visible[0]
    assert first.get_xscale() == "linear" and first.get_yscale() == "log"  # latency spans 0.1–25 ms
    assert len(fig.legends) == 1


def test_pareto_staircase_runs_from_best_x_to_worst() -> None:
    values = np.array([[70.0, 1.0], [90.0, 5.0], [80.0, 2.0], [60.0, 9.0]])
    fig = pareto_figure(pareto_plot_data([ACC, PIXEL3], values))
    (line,) = [ln for ln in fig.axes[0].get_lines() if ln.get_drawstyle() == "steps-post"]
    np.testing.assert_array_equal(line.get_xdata(), [90.0, 80.0, 70.0])  # accuracy is maximised
    np.testing.assert_array_equal(line.get_ydata(), [5.0, 2.0, 1.0])


def test_compared_searches_fronts_are_drawn_beside_the_one_found() -> None:
    values = np.array([[70.0, 1.0], [90.0, 5.0], [80.0, 2.0]])
    random = np.array([[60.0, 0.5], [85.0, 9.0], [50.0, 8.0]])  # (50, 8) is dominated
    data = pareto_plot_data([ACC, PIXEL3], values, baselines={"random": random})
    (label, front), = data.baseline_fronts
    assert label == "random" and sorted(front[:, 0]) == [60.0, 85.0]
    fig = pareto_figure(data)
    assert any(text.get_text() == "random's front (2)" for text in fig.legends[0].get_texts())
    staircases = [ln for ln in fig.axes[0].get_lines() if ln.get_drawstyle() == "steps-post"]
    assert len(staircases) == 2  # the found front's and random's
    with pytest.raises(ValueError, match="baselines\\['random'\\]"):
        pareto_plot_data([ACC, PIXEL3], values, baselines={"random": random[:, :1]})


def test_hypervolume_plot_data_summarises_seeds() -> None:
    curves = {"random": np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 4.0]]), "rlm": np.array([1.0, 3.0])}
    data = hypervolume_plot_data(curves, title="t")
    random, rlm = data.curves
    np.testing.assert_allclose(random.mean, [0.5, 1.0, 3.0])
    np.testing.assert_allclose(random.low, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(random.high, [1.0, 1.0, 4.0])
    assert random.n_seeds == 2 and rlm.n_seeds == 1
    np.testing.assert_array_equal(rlm.evaluations, [1, 2])
    assert not data.ratio and data.y_label == "hypervolume"


def test_hypervolume_ratio_mode() -> None:
    data = hypervolume_plot_data({"a": np.array([[1.0, 2.0], [3.0, 4.0]])}, true_hypervolume=4.0)
    assert data.ratio and data.y_label == "hypervolume / true front's"
    np.testing.assert_allclose(data.curves[0].mean, [0.5, 0.75])
    np.testing.assert_allclose(data.curves[0].high, [0.75, 1.0])
    fig = hypervolume_figure(data)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "hypervolume / true front's"
    assert any(list(line.get_ydata()) == [1.0, 1.0] for line in ax.get_lines())  # the true front's level


def test_hypervolume_plot_data_validation() -> None:
    with pytest.raises(ValueError, match="curves is empty"):
        hypervolume_plot_data({})
    with pytest.raises(ValueError, match=r"curve 'a' has shape \(2, 0\)"):
        hypervolume_plot_data({"a": np.empty((2, 0))})
    with pytest.raises(ValueError, match="curve 'a' has shape"):
        hypervolume_plot_data({"a": np.ones((2, 3, 4))})
    with pytest.raises(ValueError, match="non-finite"):
        hypervolume_plot_data({"a": [1.0, np.nan]})
    with pytest.raises(ValueError, match="positive and finite"):
        hypervolume_plot_data({"a": [1.0]}, true_hypervolume=0.0)


def test_plot_hypervolume_writes_a_png(tmp_path: Path, no_pyplot_figures: None) -> None:
    rng = np.random.default_rng(0)
    curves = {name: np.maximum.accumulate(rng.random((5, 300)), axis=1) * scale
              for name, scale in (("random", 0.8), ("rlm", 0.95))}
    path = plot_hypervolume(hypervolume_plot_data(curves, true_hypervolume=1.0, title="demo"),
                            tmp_path / "hv.png")
    assert path.stat().st_size > 5_000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = hypervolume_figure(hypervolume_plot_data(curves))
    assert fig.axes[0].get_lines()[0].get_xdata()[0] == 1  # x counts evaluations from 1


def test_a_short_search_has_whole_numbers_of_evaluations_on_its_axis() -> None:
    fig = hypervolume_figure(hypervolume_plot_data({"random": np.array([[0.1, 0.2, 0.2, 0.5, 0.6]])}))
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if 1 <= t <= 5]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_a_far_dominated_outlier_does_not_stretch_the_axes() -> None:
    rng = np.random.default_rng(0)
    values = np.column_stack([rng.uniform(85, 94, 40), rng.uniform(1, 5, 40)])
    assert pareto_plot_data([ACC, PIXEL3], values).limits == (None, None)
    chance = np.vstack([values, [[10.0, 1.5]]])  # a chance-level network: dominated, far away
    data = pareto_plot_data([ACC, PIXEL3], chance)
    (low, high), latency = data.limits
    assert 10.0 < low < values[:, 0].min() and high > values[:, 0].max() and latency is None
    assert data.beyond_limits(chance, (0, 1)) == 1 and data.beyond_limits(values, (0, 1)) == 0
    # on the front too when it is far out: a chance-level network faster than all (NB201's cells that
    # compute nothing) would otherwise stretch the latency axis by decades
    fast = np.vstack([values, [[10.0, 0.001]]])
    far = pareto_plot_data([ACC, PIXEL3], fast)
    assert far.on_front[-1] and far.log_scale == (False, False)
    (acc_low, _), (lat_low, _) = far.limits
    assert acc_low > 10.0 and lat_low > 0.001
    assert any("found front" in t.get_text() and "1 off the axes" in t.get_text()
               for t in pareto_figure(far).legends[0].get_texts())
    figure = pareto_figure(data)
    assert figure.axes[0].get_xlim()[0] == pytest.approx(low)
    assert any("1 off the axes" in t.get_text() for t in figure.legends[0].get_texts())


def test_a_long_tail_of_latencies_and_a_close_trade_off_stay_in_view() -> None:
    rng = np.random.default_rng(3)
    lat = np.exp(rng.normal(1.0, 1.0, 300))  # log-normal: the slow end is a tail, not an outlier
    acc = 93.5 - 6 / (1 + lat) + rng.normal(0, 0.3, 300)
    data = pareto_plot_data([ACC, PIXEL3], np.column_stack([acc, lat]))
    front = data.evaluated[data.on_front]
    assert data.beyond_limits(front, (0, 1)) == 0  # the slowest, most accurate network included
    # a search clustered at the top still shows its few cheaper trade-offs
    clustered = np.vstack([np.column_stack([rng.uniform(93, 94, 40), rng.uniform(8, 12, 40)]),
                           [[90.0, 2.0], [91.0, 3.0]]])
    close = pareto_plot_data([ACC, PIXEL3], clustered)
    assert close.beyond_limits(clustered[-2:], (0, 1)) == 0


def test_predictions_beyond_every_measurement_neither_set_the_scale_nor_the_range() -> None:
    rng = np.random.default_rng(1)
    values = np.column_stack([rng.uniform(85, 94, 30), rng.uniform(1, 5, 30)])
    wild = np.array([[92.0, 2.0], [102.0, 5.0], [86.0, 0.005]])  # 102 % accuracy, 5 microseconds
    data = pareto_plot_data([ACC, PIXEL3], values, predicted_front=wild)
    assert data.log_scale == (False, False)  # 0.005 ms would have asked for a log axis
    (acc_low, acc_high), (lat_low, _) = data.limits
    assert acc_high < 102 and lat_low > 0.005 and acc_low < values[:, 0].min()
    assert data.beyond_limits(wild, (0, 1)) == 2
    texts = [t.get_text() for t in pareto_figure(data).legends[0].get_texts()]
    assert any("predicted front (3; 2 off the axes)" in t for t in texts)


def test_a_long_legend_fits_the_figure(no_pyplot_figures: None) -> None:
    rng = np.random.default_rng(0)
    values = nb201_like(60, 2)
    far = np.column_stack([rng.uniform(-50, 300, 235), rng.uniform(-10, 100, 235)])  # mostly off the axes
    data = pareto_plot_data([ACC, PIXEL3], values, predicted_front=far, predicted_low=far - 1,
                            predicted_high=far + 1, true_front=values[:5],
                            baselines={"random": values[5:20], "nsga2": values[20:30], "tpe": values[30:40]})
    fig = pareto_figure(data)
    fig.canvas.draw()
    [legend] = fig.legends
    box = legend.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width  # before: 3 columns, cut at both edges
    assert any("off the axes" in t.get_text() for t in legend.get_texts())
