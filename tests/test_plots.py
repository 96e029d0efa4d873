"""Figures explain themselves: labelled tier lines, a title saying what was swept, plain ticks, error bars only
with a seed spread, legends outside the axes, one TPS/user estimator for simulated and measured points."""

from __future__ import annotations

import numpy as np
import pytest

from specsim import fmt
from specsim.analysis import plots
from specsim.analysis.results import MeasuredPoint
from conftest import REPO
from test_frontier import synthetic_records


@pytest.fixture
def figures(monkeypatch):
    """The figures the plot functions save, kept open for inspection (in call order)."""
    kept = []

    def keep(fig, out_png):
        fig.canvas.draw()
        kept.append(fig)
        return out_png
    monkeypatch.setattr(plots, "_save", keep)
    yield kept


def _records(seeds=(0, 1)):
    recs = [r for r in synthetic_records() if r["config"]["seed"] in seeds]
    for r in recs:                      # a TPOT consistent with nothing in particular: 1000 / TPOT = 2 x TPS/user
        r["summary"]["mean_tpot_ms"] = 500.0 / r["summary"]["mean_tps_per_user"]
    return recs


def _legend_outside(ax) -> bool:
    leg = ax.get_legend()
    return leg is not None and leg.get_window_extent().x0 >= ax.get_window_extent().x1


def test_frontier_figure_labels_tiers_title_and_keeps_the_legend_off_the_data(figures):
    plots.plot_frontiers([("runs/prod", _records(seeds=(0,)))], "unused.png", tiers=[100, 150])
    ax = figures[0].axes[0]
    texts = [t.get_text().strip() for t in ax.texts]
    assert "SLA 100 tok/s" in texts and "SLA 150 tok/s" in texts
    assert ax.get_title() == "runs/prod: A, B, oracle; closed loop 1-16 users; 1 seed"
    assert not ax.containers                          # one seed: no error bars anywhere
    assert _legend_outside(ax)
    assert "mean over requests" in ax.get_xlabel()


def test_error_bars_only_with_several_seeds(figures):
    plots.plot_frontiers([("two", _records())], "unused.png")
    plots.plot_budget(_records(), "unused.png")
    plots.plot_budget(_records(seeds=(0,)), "unused.png")
    assert figures[0].axes[0].containers and figures[1].axes[0].containers
    assert not figures[2].axes[0].containers
    # plain tick labels at the swept loads: 1 4 16, not 2^0 2^2 2^4
    ax = figures[2].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
    assert _legend_outside(ax)


def test_one_tps_estimator_for_simulated_and_measured_points(figures):
    summary_only = MeasuredPoint("bench.json", "vllm", "measured: vllm", "concurrency 16", 1, 50.0,
                                 "1000 / mean TPOT", 900.0)
    per_request = MeasuredPoint("d.json", "vllm", "measured: detailed", "concurrency 4", 1, 30.0, "per-request",
                                300.0)
    assert plots.tps_estimator([per_request]) == "per-request"
    assert plots.tps_estimator([per_request, summary_only]) == "1000 / mean TPOT"
    recs = _records(seeds=(0,))
    plots.plot_frontiers([("p", recs)], "unused.png", measured=[summary_only])
    ax = figures[0].axes[0]
    assert "1000 / mean TPOT" in ax.get_xlabel()
    # the simulated points moved to 1000 / mean TPOT = 2 x their per-request TPS/user
    xs = np.sort(np.concatenate([line.get_xdata() for line in ax.lines if line.get_marker() == "o"]))
    want = np.sort([2 * r["summary"]["mean_tps_per_user"] for r in recs])
    assert xs == pytest.approx(want)


def test_plots_and_reports_leave_pyplot_alone(tmp_path):
    """A notebook's inline backend survived no specsim figure: every plot function called ``matplotlib.use("Agg")``
    (a fresh user's frontier cell drew nothing after ``write_report``). Figures are now made without pyplot:
    the backend a user chose stays, and no figure is left registered with pyplot."""
    import matplotlib
    import matplotlib.pyplot as plt

    from specsim.analysis.report import write_report
    from specsim.scenario import load_scenario
    from specsim.sweep import SweepSpec, run_sweep
    from specsim.workload import load_trace

    before = matplotlib.get_backend()
    matplotlib.use("svg")                           # a backend of the user's choosing, not specsim's Agg
    try:
        recs = _records()
        plots.plot_frontiers([("sweep", recs)], tmp_path / "f", tiers=(100.0,))
        plots.plot_budget(recs, tmp_path / "b.png")
        plots.plot_throughput_vs_load(recs, tmp_path / "t.png")
        run_sweep(SweepSpec(policies=("static",), concurrency=(2,), num_requests=16),
                  load_scenario(), load_trace(REPO / "traces" / "prod.jsonl"), tmp_path / "sweep", executor="serial")
        write_report(tmp_path / "sweep")
        assert matplotlib.get_backend() == "svg" and plt.get_fignums() == []
    finally:
        matplotlib.use(before)
    assert (tmp_path / "f.png").is_file() and (tmp_path / "b.png").is_file()


def test_a_figure_path_without_a_suffix_is_returned_as_written(tmp_path):
    """``plot_frontiers(recs, "out/f6")`` returned ``out/f6`` while matplotlib wrote ``out/f6.png``."""
    got = plots.plot_frontiers([("sweep", _records())], tmp_path / "f6")
    assert got == tmp_path / "f6.png" and got.is_file()


def test_frontier_figure_takes_a_list_of_sweep_folders_titled_by_their_names(tmp_path):
    """A fresh user's frontier_figure(["runs/a", "runs/b"]) was refused: only (title, folder) pairs were taken.
    Folders of one name are told apart by their parents; one folder given twice is numbered."""
    from specsim.errors import SpecsimInputError
    from specsim.sweep.store import write_record

    for d in ("runs/a", "runs/b", "x/sweep", "y/sweep"):
        for r in _records(seeds=(0,)):
            write_record(tmp_path / d, r)
    fig = plots.frontier_figure([tmp_path / "runs/a", str(tmp_path / "runs/b")], tiers=[100])
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["a", "b"]
    fig = plots.frontier_figure([tmp_path / "x/sweep", ("mine", tmp_path / "runs/a"), tmp_path / "y/sweep"])
    assert [ax.get_title().split(":")[0] for ax in fig.axes] == ["x/sweep", "mine", "y/sweep"]
    assert fmt.folder_titles(["runs/a", "runs/a", "b"]) == ["a", "a (2)", "b"]
    assert fmt.folder_titles(["p/q/sweep", "r/q/sweep"]) == ["p/q/sweep", "r/q/sweep"]
    with pytest.raises(SpecsimInputError, match="a sweep's results folder"):
        plots.frontier_figure([tmp_path / "runs/a", tmp_path / "missing"])
    with pytest.raises(SpecsimInputError, match="sweep folders"):
        plots.frontier_figure([3, 4])
