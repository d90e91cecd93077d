"""Issue 28, item 5: the registry as the one list.

Governor metadata is one record (``tags``); ``with_params`` does not share nested estimators;
``decide`` refuses a row that carries the answer; third-party governors come in through the
entry-point group ``dvfslab.governors`` and reach ``dvfslab govern`` and the pipeline's lists;
notebooks 04 and 05 take their governor lists from the registry.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest
from test_governors import HAND, trained, write_sweep

from dvfslab import analysis as F
from dvfslab.analysis.features import EXTRA_FEATURES, FEATURES
from dvfslab.evaluation import replay as E
from dvfslab.governors import registry as R
from dvfslab.governors.base import (
    ANSWER_COLUMNS,
    Decision,
    Governor,
    GovernorTags,
    ProbingGovernor,
    without_answers,
)
from dvfslab.governors.errors import GovernorError
from dvfslab.governors.static import FixedGovernor, OracleGovernor
from dvfslab.governors.zeus_jit import ZeusSimGovernor
from dvfslab.pipeline import runner

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_registry():
    """The registry read again (plugins on a changed sys.path), and again after the test; the
    plugin module of another test forgotten."""
    sys.modules.pop("dvfslab_lowest", None)
    R.registry.cache_clear()
    yield
    sys.modules.pop("dvfslab_lowest", None)
    R.registry.cache_clear()


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    sweep = write_sweep(tmp_path_factory.mktemp("hand") / "ds", HAND)
    return sweep, F.feature_table(sweep)


# --------------------------------------------------------------------------------------------
# One tags record
# --------------------------------------------------------------------------------------------


def test_every_registered_governor_states_its_tags_once_and_the_old_names_read_them():
    for name, cls in R.registry().items():
        assert isinstance(cls.tags, GovernorTags), name
        # the old flags are views of the record: no governor sets them (a class that does has them
        # folded into its tags, below; convert it to `tags = GovernorTags(...)`)
        assert cls._legacy_flags == (), f"{name} sets {cls._legacy_flags}: state them in its tags"
        assert cls.tags.probes == issubclass(cls, ProbingGovernor), name
        assert (cls.probing, cls.needs_training, cls.command_line) == (
            cls.tags.probes, cls.tags.needs_training, cls.tags.not_on_command_line), name
    # by hand, from what each governor is: the paper's tree answers clocks and learns nothing;
    # the oracle is a yardstick nobody can run; zeus-sim probes and needs no training
    paper, oracle, zeus = R.governor_class("mlg-paper"), R.governor_class("oracle"), R.governor_class("zeus-sim")
    assert paper.tags == GovernorTags(needs_training=False, knobs=("gpu_freq_mhz",), saves=("util_split", "tree_"))
    assert not oracle.tags.recommendable and oracle.tags.not_on_command_line and not oracle.tags.saves
    assert zeus.tags.probes and not zeus.tags.needs_training and zeus.tags.saves == ("units",)
    with pytest.raises(AttributeError, match="tags"):
        FixedGovernor().probing = True


def test_a_class_written_with_the_old_flags_has_them_as_its_tags():
    class Old(ProbingGovernor):
        name = "old"
        needs_training = False
        command_line = "probes"
        saves = ("units",)

    assert Old.tags == GovernorTags(needs_training=False, probes=True, saves=("units",), not_on_command_line="probes")
    assert Old._legacy_flags == ("needs_training", "saves", "command_line")
    assert Old.command_line == "probes" and Old().probing is True


# --------------------------------------------------------------------------------------------
# with_params does not share nested estimators
# --------------------------------------------------------------------------------------------


def test_with_params_leaves_the_original_and_its_nested_estimator_intact():
    from sklearn.base import clone
    from sklearn.tree import DecisionTreeClassifier

    from dvfslab.governors.tree import TreeGovernor

    original = TreeGovernor(estimator=DecisionTreeClassifier(max_depth=5))
    shallow = original.with_params(estimator__max_depth=2)
    assert original.estimator.max_depth == 5 and shallow.estimator.max_depth == 2
    assert shallow.estimator is not original.estimator
    # and the copy's later changes stay in the copy, as a clone's do
    shallow.set_params(estimator__max_depth=3)
    cloned = clone(original).set_params(estimator__max_depth=4)
    assert (original.estimator.max_depth, shallow.estimator.max_depth, cloned.estimator.max_depth) == (5, 3, 4)


def test_with_params_keeps_the_fitted_state(hand):
    sweep, table = hand
    ffg = FixedGovernor().fit(trained(sweep, table, ["A/t", "B/t"]))
    assert ffg.with_params(level=None).level_ == 510.0  # HAND's FFG level, by hand in test_governors


# --------------------------------------------------------------------------------------------
# A governor never sees the answer
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("column", ["opt_level", "opt_energy_j", "oracle_saving_pct"])
def test_decide_given_a_row_with_an_answer_column_raises_naming_it(column):
    ffg = FixedGovernor(level=612.0).fit()
    with pytest.raises(GovernorError) as err:
        ffg.decide({"workload_id": "A/t", "n_layers": 4.0, column: 510.0})
    assert column in str(err.value) and "\n" not in str(err.value)
    assert ffg.decide({"workload_id": "A/t", "n_layers": 4.0}).level == 612.0  # without it: its level


def test_every_governor_kind_refuses_the_answer_a_new_one_included():
    class Peeks(Governor):  # a new governor that would read the answer: refused before it runs
        name = "peeks"

        def decide(self, workload, probe=None):
            return Decision(workload["opt_level"])

    row = {"workload_id": "A/t", "opt_level": 510.0}
    for gov in (Peeks(), ZeusSimGovernor().fit(None), OracleGovernor()):
        with pytest.raises(GovernorError, match="opt_level"):
            gov.decide(row)


def test_the_answer_columns_are_every_column_of_the_feature_table_derived_from_the_measurement(hand):
    # by hand, from analysis.aggregate.optimal_levels: the least-energy level, its index, energy and
    # time, the oracle's saving, whether the optimum is interior, the paper's rank of it, and the
    # baseline run's totals (the run's true length and the saving's denominator); and the job's
    # true length (workloads.csv job_steps: a governor plans with plan_job_units instead)
    assert set(ANSWER_COLUMNS) == {"opt_level", "opt_level_idx", "opt_energy_j", "opt_time_s", "oracle_saving_pct",
                                   "u_shaped", "paper_label", "baseline_energy_j", "baseline_time_s", "job_steps"}
    _, table = hand
    identity = {"workload_id", "model", "model_family", "model_type", "task", "split", "size_group", "n_levels"}
    derived = set(table.columns) - identity - set(FEATURES) - set(EXTRA_FEATURES)
    assert derived == set(ANSWER_COLUMNS) - {"job_steps"}  # a new label column must join the list (or be shown harmless here)
    assert not set(ANSWER_COLUMNS) & set(without_answers(table.iloc[0].to_dict()))


def test_the_replay_hands_features_only_and_the_oracle_still_finds_the_answer(hand):
    """The oracle is fitted with the sweep (every workload's measured curve): it needs no answer
    column; HAND by hand: A's least energy is at 714 MHz, B's at 510 MHz."""
    sweep, table = hand
    assert {"opt_level", "oracle_saving_pct"} <= set(table.columns)  # the replay is given the whole table
    govs = R.build(["oracle", "ffg"], trained(sweep, table, ["A/t", "B/t"]))
    per = E.replay(govs, sweep, table).set_index(["policy", "workload_id"])
    assert (per["error"] == "").all()
    assert per.loc[("oracle", "A/t"), "level"] == 714.0 and per.loc[("oracle", "B/t"), "level"] == 510.0
    assert per.loc[("oracle", "A/t"), "regret_pct"] == 0.0 and per.loc[("ffg", "A/t"), "level"] == 510.0


# --------------------------------------------------------------------------------------------
# Third-party governors: the entry-point group dvfslab.governors
# --------------------------------------------------------------------------------------------

PLUGIN = '''
from dvfslab.governors.base import GovernorTags, LevelGovernor
from dvfslab.governors.objective import LEAST_ENERGY


class LowestGovernor(LevelGovernor):
    """The lowest level of the training data's table, for every workload."""

    name = "lowest"
    summary = "the lowest level of the table, for every workload (a third-party plugin)"
    tags = GovernorTags(needs_training=False, saves=("level_",))

    def __init__(self, objective=LEAST_ENERGY):
        self.objective = objective

    def _fit(self, data):
        self.level_ = min(self._require(data).level_table)

    def level_for(self, workload):
        return self.level_
'''


def install_plugin(site: Path, entry_points: str, module: str = PLUGIN) -> None:
    """A distribution installed in ``site``, as pip leaves one: its module and its dist-info."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "dvfslab_lowest.py").write_text(textwrap.dedent(module))
    info = site / "dvfslab_lowest-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dvfslab-lowest\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[dvfslab.governors]\n{entry_points}\n")


def test_a_plugin_governor_reaches_govern_and_the_pipeline(tmp_path, monkeypatch, capsys, fresh_registry, hand):
    from dvfslab.cli import main

    install_plugin(tmp_path / "site", "lowest = dvfslab_lowest:LowestGovernor")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    R.registry.cache_clear()
    assert R.names()[-1] == "lowest" and "lowest" in R.command_line_names() and R.broken_plugins() == {}
    with pytest.raises(SystemExit) as done:
        main(["govern", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    choices = re.search(r"--policy \{([^}]*)\}", out).group(1).split(",")
    assert "lowest" in choices and "the lowest level of the table" in re.sub(r"\s+", " ", out)
    for nb in ("04_governor_evaluation", "05_beyond_the_paper"):
        assert "lowest" in runner.registry_parameters(nb)["GOVERNOR_NAMES"], nb
    assert "lowest" in runner.registry_parameters("04_governor_evaluation")["RECOMMEND_CANDIDATES"]
    # and it is replayed as any other: HAND's table is the Orin's, lowest 306 MHz; replayed at
    # the nearest measured level, 510 MHz
    sweep, table = hand
    per = E.replay(R.build(["lowest"], trained(sweep, table, [])), sweep, table)
    assert (per["decided_level"] == 306.0).all() and (per["level"] == 510.0).all()


@pytest.mark.parametrize("entry, why", [
    ("nope = dvfslab_nothing_here:Nope", "cannot load it (ModuleNotFoundError: No module named 'dvfslab_nothing_here')"),
    ("ffg = dvfslab_lowest:LowestGovernor", "the entry point is named 'ffg' but the class's name is 'lowest'"),
    ("lowest = dvfslab_lowest:GovernorTags", "not a dvfslab.governors.base.Governor subclass with a name"),
])
def test_a_broken_plugin_is_one_line_naming_the_entry_point_and_the_rest_works(tmp_path, monkeypatch, capsys,
                                                                               fresh_registry, entry, why):
    install_plugin(tmp_path / "site", entry)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    R.registry.cache_clear()
    assert R.names()[:3] == ["maxn", "ffg", "mlg-paper"] and R.governor_class("ffg") is FixedGovernor
    name, _, value = (s.strip() for s in entry.partition("="))
    line = f"dvfslab: governor plugin {name} = {value!r} (entry point group dvfslab.governors) is left out: {why}"
    assert capsys.readouterr().err == line + "\n"
    assert R.broken_plugins() == {name: line}
    if name != "ffg":
        with pytest.raises(GovernorError) as err:
            R.make(name)
        assert str(err.value) == line.removeprefix("dvfslab: ")


def test_a_plugin_taking_a_builtin_name_is_left_out(tmp_path, monkeypatch, capsys, fresh_registry):
    install_plugin(tmp_path / "site", "ffg = dvfslab_lowest:LowestGovernor", PLUGIN.replace('"lowest"', '"ffg"'))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    R.registry.cache_clear()
    assert R.governor_class("ffg") is FixedGovernor
    assert capsys.readouterr().err.endswith(
        "is left out: the name 'ffg' is taken by dvfslab.governors.static.FixedGovernor\n")


# --------------------------------------------------------------------------------------------
# Notebooks 04 and 05 take the registry's lists from the pipeline
# --------------------------------------------------------------------------------------------


def test_the_pipeline_passes_the_registry_lists_to_notebooks_04_and_05(tmp_path, monkeypatch):
    """run_pipeline's call to papermill, kernels faked: each notebook gets the common parameters,
    04 and 05 the registry's lists besides."""
    import dvfslab.pipeline.kernels as kernels

    class NoKernels:
        def __init__(self, *args):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def take(self):
            return None

        def stop(self, km):
            pass

    given = {}
    monkeypatch.setattr(kernels, "KernelPool", NoKernels)
    monkeypatch.setattr(runner, "execute", lambda name, out, params, bar, km: given.setdefault(name, params))
    monkeypatch.setattr(runner, "missing_figures", lambda out, notebooks: [])
    runner.run_pipeline(None, tmp_path / "run", html=False, progress=False, log=lambda _: None,
                        notebooks=("03_model_selection_loocv", "04_governor_evaluation", "05_beyond_the_paper"))
    names = R.names()
    # by hand: every governor but FFG (the default) and the yardsticks maxn and oracle
    candidates = [n for n in names if n not in ("ffg", "maxn", "oracle")]
    assert given["04_governor_evaluation"]["GOVERNOR_NAMES"] == names
    assert given["04_governor_evaluation"]["RECOMMEND_CANDIDATES"] == candidates == R.recommendable_names()
    assert given["05_beyond_the_paper"]["GOVERNOR_NAMES"] == names
    assert "GOVERNOR_NAMES" not in given["03_model_selection_loocv"]
    assert {k: given["03_model_selection_loocv"][k] for k in ("SEED", "QUICK")} == {"SEED": 0, "QUICK": False}


@pytest.mark.parametrize("name", ["04_governor_evaluation", "05_beyond_the_paper"])
def test_notebooks_04_and_05_declare_the_registry_parameters_and_list_no_governor(name):
    """Each parameter the pipeline fills is declared in the parameters cell, empty (its default is
    the registry's list, read in the notebook); no cell spells a list of three governor names or more."""
    book = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text())
    cells = ["".join(c["source"]) for c in book["cells"] if c["cell_type"] == "code"]
    params = next("".join(c["source"]) for c in book["cells"] if "parameters" in c["metadata"].get("tags", []))
    for var in runner.REGISTRY_PARAMETERS[name]:
        assert re.search(rf"^{var}: list = \[\]  #", params, re.M), var
    names = "|".join(re.escape(n) for n in R.names())
    for source in cells:
        assert not re.search(rf'[\[(]\s*"(?:{names})"(?:\s*,\s*"(?:{names})"){{2}}', source), source[:200]


# --------------------------------------------------------------------------------------------
# The README's lists of governors are the registry's
# --------------------------------------------------------------------------------------------


def test_the_readme_lists_every_builtin_governor_and_its_govern_row_every_policy():
    builtin = [n for n, cls in R.registry().items() if cls.__module__.startswith("dvfslab.governors.")]
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Governors: the paper's, and beyond it"):]
    section = section[:section.index("- **Whole jobs.**")]
    assert sorted(re.findall(r"`([\w-]+)` —", section)) == sorted(builtin)  # one "`name` — what it does" each
    # dvfslab govern runs every governor (the measuring ones on the running command): its row
    # lists them all, and the pipeline's pick
    row = re.search(r"^\| `dvfslab govern --policy \{([^}]*)\}", readme, re.M)
    assert row.group(1).split(",") == [*builtin, "recommended"]
