"""Figures: drawn from tidy frames, titled SIMULATED when the data is simulated."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from analysis_fixtures import make_dataset  # noqa: E402

from dvfslab.analysis import aggregate as F
from dvfslab.analysis import features as FT
from dvfslab.analysis import plots as P
from dvfslab.analysis.training import TrainingData
from dvfslab.data.contract import load_dataset  # noqa: E402
from dvfslab.evaluation import replay as E
from dvfslab.evaluation import selection as S
from dvfslab.governors import registry as G
from dvfslab.governors.tree import paper_tree


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    ds = load_dataset(make_dataset(tmp_path_factory.mktemp("p") / "ds", models=["bert-tiny", "bert-base", "pythia-70m"],
                                   tasks=["sst2", "mrpc", "rte"]))
    sweep = F.sweep_from_dataset(ds)
    table = FT.feature_table(sweep)
    optima = F.optimal_levels(sweep)
    train = list(table.loc[table["split"] == "characterization", "workload_id"])
    govs = G.build(["maxn", "ffg", "oracle", "mlg-paper"], TrainingData(sweep, table, train))
    per = E.replay(govs, sweep, table, sweep.workload_ids("evaluation"))
    models = {n: m for n, m in S.candidate_models(quick=True).items() if n in ("tree(depth=2,leaf=1,gini)", "knn")}
    cv = S.summarize_cv(S.fold_metrics(S.cross_validate(models, table[table["workload_id"].isin(train)], sweep,
                                                        ["n_layers", "avg_seq_len"])))
    return {"sweep": sweep, "table": table, "optima": optima, "per": per, "cv": cv}


def _figures(f, simulated):
    sweep, table, per = f["sweep"], f["table"], f["per"]
    rel = F.long_form(F.relative_levels(sweep), ["time_rel", "power_rel", "energy_rel"],
                      ["workload_id", "model", "params_m", "level"])
    levels = sweep.levels.merge(sweep.workloads[["workload_id", "model", "task"]], on="workload_id")
    return {
        "sweep_curves": P.sweep_curves(rel, simulated),
        "u_curves": P.u_curves(levels, f["optima"], simulated),
        "heatmap": P.optimal_heatmap(table, simulated),
        "features": P.feature_relations(F.long_form(table, ["n_layers", "avg_seq_len"], ["model_type", "opt_level"],
                                                    var_name="feature"), simulated),
        "cv": P.cv_comparison(S.comparison(f["cv"], "tree(depth=2,leaf=1,gini)"), simulated),
        "tree": P.tree_diagram(paper_tree(), simulated),
        "bars": P.savings_bars(F.long_form(per, ["saving_pct", "slowdown_pct"], ["policy", "size_group"]), simulated),
        "pareto": P.saving_vs_slowdown(E.summarize(per, by=["size_group"]), simulated),
    }


@pytest.fixture(scope="module")
def simulated_figs(frames):
    figs = _figures(frames, True)
    yield figs
    for fig in figs.values():
        plt.close(fig)


def test_every_figure_says_simulated(simulated_figs):
    for name, fig in simulated_figs.items():
        assert "SIMULATED" in fig._suptitle.get_text(), name
        assert fig.axes, name


def test_measured_data_is_not_called_simulated(frames):
    assert P.title("x", False) == "x" and "SIMULATED" in P.title("x", True)
    for fig in (P.tree_diagram(paper_tree(), False), P.optimal_heatmap(frames["table"], False)):
        assert "SIMULATED" not in fig._suptitle.get_text()
        plt.close(fig)


def test_facets_follow_the_data(frames, simulated_figs):
    figs = simulated_figs
    assert len(figs["sweep_curves"].axes) == 3                     # time, power, energy
    assert len([a for a in figs["u_curves"].axes if a.get_title()]) == 3  # one panel per model
    starred = [c for a in figs["u_curves"].axes for c in a.collections if c.get_label() == "least energy"]
    assert sum(len(c.get_offsets()) for c in starred) == len(frames["optima"])  # one star per workload
    texts = [t.get_text() for t in figs["tree"].axes[0].texts]
    assert {"510 MHz", "612 MHz", "714 MHz", "816 MHz", "1020 MHz"} <= set(texts)
    assert "n_layers\n<= 7" in texts
    heat = figs["heatmap"].axes[0]
    assert [t.get_text() for t in heat.get_yticklabels()] == ["bert-tiny", "pythia-70m", "bert-base"]  # by size


def test_model_selection_figure_without_any_cv():
    import pandas as pd

    no_predictions = pd.DataFrame(columns=["model", "family", "scheme", "held_out", "workload_id", "true_idx",
                                           "pred_idx", "pred_level", "regret_pct"])
    summary = S.summarize_cv(S.fold_metrics(no_predictions), ["tree(depth=2,leaf=1,gini)", "knn"])
    why = "no cross-validation: one training workload (m/t): nothing to generalize from"
    fig = P.cv_comparison(S.comparison(summary, "tree(depth=2,leaf=1,gini)"), True, note=why)
    assert fig.axes[0].texts[0].get_text().replace("\n", " ") == why  # wrapped to the figure
    assert "SIMULATED" in fig._suptitle.get_text()
    plt.close(fig)


def test_feature_and_governor_cv_figures_with_nothing_to_draw():
    import pandas as pd

    why = "no feature to show: no feature varies over the 3 training workloads (n_layers is 12 in every training workload)"
    empty = pd.DataFrame(columns=["workload_id", "model_type", "opt_level", "feature", "value"])
    fig = P.feature_relations(empty, False, note=why)
    assert fig.axes[0].texts[0].get_text().replace("\n", " ") == why
    plt.close(fig)
    no_cv = pd.DataFrame(columns=["policy", "scheme", "mean_regret_pct", "mean_saving_pct"])
    fig = P.governor_cv(no_cv, True)  # one training workload: nothing held out (notebook 05)
    assert fig.axes[0].texts[0].get_text() == "no cross-validation: fewer than two training workloads"
    plt.close(fig)


def test_level_axes_default_to_the_gpu_clock(simulated_figs):
    figs = simulated_figs
    assert {a.get_xlabel() for a in figs["sweep_curves"].axes} == {"GPU level (MHz)"}
    assert "GPU level (MHz)" in {a.get_xlabel() for a in figs["u_curves"].axes}
    assert "vs GPU frequency" in figs["sweep_curves"]._suptitle.get_text()


def test_a_power_limit_knob_labels_axes_titles_and_leaves_in_watts(frames):
    from dvfslab.data.knobs import get_knob

    watts = get_knob("power_limit_w")
    f = frames
    rel = F.long_form(F.relative_levels(f["sweep"]), ["time_rel", "energy_rel"], ["workload_id", "model", "params_m",
                                                                                  "level"])
    levels = f["sweep"].levels.merge(f["sweep"].workloads[["workload_id", "model", "task"]], on="workload_id")
    curves = P.sweep_curves(rel, False, knob=watts)
    assert {a.get_xlabel() for a in curves.axes} == {"GPU power limit (W)"}
    assert "vs GPU power limit" in curves._suptitle.get_text()
    u = P.u_curves(levels, f["optima"], False, knob=watts)
    assert "GPU power limit (W)" in {a.get_xlabel() for a in u.axes}
    heat = P.optimal_heatmap(f["table"], False, knob=watts)
    assert heat._suptitle.get_text() == "Energy-optimal GPU power limit"
    assert heat.axes[1].get_ylabel() == "optimal level (W)"  # the colour bar
    tree = {"nodes": [{"feature": "batch_size", "threshold": 64.0, "left": 1, "right": 2},
                      {"level": 150.0}, {"level": 225.0}]}
    leaves = {t.get_text() for t in P.tree_diagram(tree, False, knob=watts).axes[0].texts}
    assert {"150 W", "225 W"} <= leaves
    plt.close("all")


def test_heatmap_by_batch_size_when_a_model_task_has_several_workloads():
    import pandas as pd

    # two batch sizes of one model and task, two optimizers at batch 8: cell = their median
    table = pd.DataFrame({"model": ["net"] * 3, "task": ["data"] * 3, "params_m": [1.0] * 3,
                          "batch_size": [8.0, 8.0, 16.0], "opt_level": [100.0, 150.0, 200.0]})
    fig = P.optimal_heatmap(table, False)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16"] and ax.get_xlabel() == "batch size"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["net / data"]
    assert sorted(t.get_text() for t in ax.texts) == ["125", "200"]  # median(100, 150) = 125
    plt.close(fig)


def test_heatmap_of_one_network_at_many_concurrencies_wraps_and_names_the_load():
    import pandas as pd

    # LoudVA's shape: one network, 40 request concurrencies (batch_size = concurrency, and the
    # workloads carry the name): 40 columns at 16 a panel wrap into 16 + 16 + 8
    n = 40
    table = pd.DataFrame({"workload_id": [f"w{c}" for c in range(1, n + 1)], "model": ["inception_v3"] * n,
                          "task": ["inference"] * n, "params_m": [23.8] * n,
                          "batch_size": [float(c) for c in range(1, n + 1)],
                          "opt_level": [300.0 + 10 * (c % 5) for c in range(1, n + 1)]})
    workloads = table[["workload_id"]].assign(concurrency=range(1, n + 1))
    fig = P.optimal_heatmap(table, False, workloads=workloads)
    panels = [a for a in fig.axes if a.get_xlabel()]
    assert [len(a.get_xticklabels()) for a in panels] == [16, 16, 8]
    assert {a.get_xlabel() for a in panels} == {"request concurrency"}
    assert [t.get_text() for t in panels[2].get_xticklabels()][-1] == "40"
    assert len(fig.axes) == 4  # three panels, one colour bar for all
    # one colour scale: every panel spans the same 300..340 MHz
    assert {tuple(a.collections[0].get_clim()) for a in panels} == {(300.0, 340.0)}
    plt.close(fig)


def test_pareto_labels_do_not_overlap_and_point_at_their_points():
    import pandas as pd

    # the bundled run's points (notebook 05): six governors within 0.01 of each other under the
    # limit, four within 0.1 without it, and three drawn on one spot
    rows = [("maxn", "none", 1.0, 1.0), ("ffg", "none", 0.7663, 1.9203), ("mlg-paper", "none", 0.7768, 1.7569),
            ("mlg", "none", 0.7652, 1.9882), ("curve", "none", 0.7662, 1.9578), ("online", "none", 0.7768, 2.0187),
            ("oracle", "none", 0.7634, 2.0332), ("maxn", "<= 50 %", 1.0, 1.0), ("ffg", "<= 50 %", 0.8272, 1.3993),
            ("mlg-paper", "<= 50 %", 0.8266, 1.4004), ("mlg", "<= 50 %", 0.8266, 1.4004),
            ("curve", "<= 50 %", 0.8266, 1.4004), ("online", "<= 50 %", 0.8349, 1.4036),
            ("oracle", "<= 50 %", 0.8285, 1.3885)]
    points = pd.DataFrame(rows, columns=["policy", "limit", "energy_rel", "time_rel"]).assign(pareto=False)
    fig = P.pareto(points, True)
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text()]
    named = [t.get_text().split(", ") for t in labels]
    # every policy labelled, each name once per spot; maxn's two points (one spot) share a label,
    # and so do the three drawn on one spot under the limit (with any point within the same pixel)
    assert set().union(*map(set, named)) == set(points["policy"])
    assert sum(n.count("maxn") for n in named) == 1
    assert any({"mlg-paper", "mlg", "curve"} <= set(n) for n in named)
    assert all(len(n) == len(set(n)) for n in named)
    from matplotlib.text import Text

    boxes = [Text.get_window_extent(t) for t in labels]  # the text's box (an Annotation's adds its leader)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (labels[i].get_text(), labels[j].get_text())
    spots = {(round(r.time_rel, 4), round(r.energy_rel, 4)) for r in points.itertuples()}
    assert {(round(t.xy[0], 4), round(t.xy[1], 4)) for t in labels} <= spots  # anchored on a point
    plt.close(fig)
    # a governor with no figure (the online one on a one-workload sweep: NaN) is not drawn nor labelled
    nan = pd.DataFrame([("maxn", 1.0, 1.0), ("online", float("nan"), float("nan"))],
                       columns=["policy", "energy_rel", "time_rel"]).assign(pareto=[True, False])
    fig = P.pareto(nan, True)
    assert [t.get_text() for t in fig.axes[0].texts if t.get_text()] == ["maxn"]
    plt.close(fig)
