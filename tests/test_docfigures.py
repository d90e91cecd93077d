"""README.md and docs/*.md quote the bundled pipeline's figures as a fresh run gives them.

The checker (tests/docfigures.py) is tested on hand-written Markdown against a hand-written run
folder; then every tagged figure of the docs is checked against `dvfslab pipeline` on data/replay.
"""

from __future__ import annotations

import json

import docfigures as D
import pytest

# A run folder written by hand: the values the snippets below are checked against.
SUMMARY = {"governors": {"mlg": {"mean_saving_pct": 23.484127, "mean_regret_pct": 0.1778},
                         "mlg-paper": {"mean_saving_pct": 22.321250},
                         "ffg": {"min_saving_pct": -1.5730, "mean_saving_pct": 23.3677}},
           "evaluation": {"probe_noise_cv": 0.011964, "eval_split": "evaluation"},
           "recommended": {"candidates": {"mlg": {"diff_pts": -0.0386}}},
           "model_selection": {"cannot_learn": None}}
BY_SIZE = "policy,size_group,mean_saving_pct\nmlg,<= 70M,22.2813\nmlg,> 70M,24.0855\noracle,> 70M,24.2374\n"
LEVELS = "workload_id,opt_level\na/x,510.0\nb/x,612.0\nc/x,612.0\n"


@pytest.fixture
def run(tmp_path) -> D.Source:
    (tmp_path / "tables").mkdir()
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY))
    (tmp_path / "tables" / "evaluation_by_size.csv").write_text(BY_SIZE)
    (tmp_path / "tables" / "optimal_levels.csv").write_text(LEVELS)
    return D.Source(tmp_path)


def test_a_correct_tag_passes_in_every_form(run):
    text = ("MLG saves 23.48 %<!-- summary: governors.mlg.mean_saving_pct --> (23.5<!-- summary: "
            "governors.mlg.mean_saving_pct -->, 23<!-- summary: governors.mlg.mean_saving_pct -->).\n"
            "| `mlg` | 24.09 %<!-- table: evaluation_by_size.csv[policy=mlg,size_group=> 70M].mean_saving_pct --> |\n"
            "612 for 2<!-- count: optimal_levels.csv[opt_level=612] --> of 3<!-- count: optimal_levels.csv[] -->\n"
            # 100 × 0.011964 = 1.1964 → 1.2; 23.3677 − 22.32125 = 1.04645 → 1.0; −(−1.5730) → 1.6
            "noise 1.2 %<!-- summary: 100 * evaluation.probe_noise_cv -->, 1.0<!-- summary: governors.ffg."
            "mean_saving_pct - governors.mlg-paper.mean_saving_pct --> points, loses 1.6 %<!-- summary: "
            "-governors.ffg.min_saving_pct -->\n"
            # signs: −0.0386 → −0.04 (either minus), +0.18 for a positive value, −1.57
            "(−0.04<!-- summary: recommended.candidates.mlg.diff_pts --> or -0.04<!-- summary: "
            "recommended.candidates.mlg.diff_pts -->) +0.18<!-- summary: governors.mlg.mean_regret_pct --> "
            "-1.57 %<!-- summary: governors.ffg.min_saving_pct -->\n")
    figures, problems = D.scan(text, "doc.md")
    assert problems == [] and len(figures) == 13
    assert D.check_text(text, "doc.md", run) == []


def test_a_wrong_number_names_file_line_tag_written_and_expected(run):
    text = "intro\n\nMLG saves 23.41 %<!-- summary: governors.mlg.mean_saving_pct --> vs MAXN\n"
    assert D.check_text(text, "docs/x.md", run) == [
        "docs/x.md:3: 23.41 should be 23.48 (summary: governors.mlg.mean_saving_pct = 23.484127)"]
    # a sign is part of the figure: +0.04 for −0.0386 is wrong, and so is an unsigned 1.57 for −1.573
    assert D.check_text("+0.04<!-- summary: recommended.candidates.mlg.diff_pts -->\n", "d.md", run) == [
        "d.md:1: +0.04 should be -0.04 (summary: recommended.candidates.mlg.diff_pts = -0.0386)"]
    assert D.check_text("1.57<!-- summary: governors.ffg.min_saving_pct -->\n", "d.md", run) == [
        "d.md:1: 1.57 should be -1.57 (summary: governors.ffg.min_saving_pct = -1.573)"]
    assert len(D.check_text("1<!-- count: optimal_levels.csv[opt_level=612] -->\n", "d.md", run)) == 1


def test_an_untagged_decimal_inside_a_region_fails(run):
    text = (f"0.99 outside is ignored\n{D.REGION_OPEN}\n"
            "| `mlg` | 23.48 %<!-- summary: governors.mlg.mean_saving_pct --> | 98.8 % |\n"
            "| paper | 13.11 %<!-- source: paper --> | `1.5` in code and 70M and v4 are not figures |\n"
            f"{D.REGION_CLOSE}\n0.98 outside again\n")
    assert D.check_text(text, "README.md", run) == [
        "README.md:3: 98.8 in a pipeline-figures region has no tag (<!-- summary: ... -->, "
        "<!-- table: ... --> or <!-- source: ... -->)"]
    # a decimal at the end of a sentence is still a decimal
    assert len(D.check_text(f"{D.REGION_OPEN}\nit is 0.74.\n{D.REGION_CLOSE}\n", "d.md", run)) == 1


def test_regions_must_open_and_close(run):
    assert D.check_text(f"{D.REGION_OPEN}\n1.0<!-- source: x -->\n", "d.md", run) == [
        f"d.md:1: the region opened here is never closed ({D.REGION_CLOSE})"]
    assert D.check_text(f"{D.REGION_CLOSE}\n", "d.md", run) == ["d.md:1: a region closes that was never opened"]


def test_a_tag_path_that_does_not_exist_fails(run):
    cases = {
        "1.0<!-- summary: governors.mlg.mean_savings_pct -->": "summary.json has no governors.mlg.mean_savings_pct",
        "1.0<!-- summary: evaluation.eval_split -->": "summary.json evaluation.eval_split is 'evaluation', not a number",
        "1.0<!-- summary: model_selection.cannot_learn -->": "is None, not a number",
        "1.0<!-- table: nope.csv[policy=mlg].mean_saving_pct -->": "the run has no tables/nope.csv",
        "1.0<!-- table: evaluation_by_size.csv[policy=mlg].mean_saving_pct -->": "(2 rows match)",
        "1.0<!-- table: evaluation_by_size.csv[policy=mlg,size_group=> 70M].saving -->": "no column 'saving'",
        "1.0<!-- table: evaluation_by_size.csv[polcy=mlg].mean_saving_pct -->": "has no column 'polcy'",
    }
    for line, reason in cases.items():
        problems = D.check_text(line + "\n", "d.md", run)
        assert len(problems) == 1 and problems[0].startswith("d.md:1: 1.0 is tagged ") and reason in problems[0], line


def test_tags_that_follow_no_number_or_are_unknown_fail(run):
    assert D.check_text("MLG <!-- summary: governors.mlg.mean_saving_pct --> saves\n", "d.md", run) == [
        "d.md:1: the tag <!-- summary: governors.mlg.mean_saving_pct --> follows no number"]
    assert D.check_text("23.48 %<!-- sumary: governors.mlg.mean_saving_pct -->\n", "d.md", run) == [
        "d.md:1: unknown tag kind 'sumary' (use summary, table, count or source)"]


def test_numbers_outside_regions_and_in_code_are_left_alone(run):
    text = ("A 24.73 % figure, untagged.\n```\n22.86 <!-- summary: no.such.path -->\n```\n"
            "a tag is written `1.0 %<!-- summary: no.such.path -->`, in a code span\n")
    assert D.scan(text, "d.md") == ([], [])
    assert D.check_text(text, "d.md", run) == []


def test_the_updater_rewrites_every_tagged_figure_in_its_own_form(run):
    text = ("| `mlg` | 23.41 %<!-- summary: governors.mlg.mean_saving_pct --> | 24.73 |\n"
            "(−0.09<!-- summary: recommended.candidates.mlg.diff_pts -->) 13.11 %<!-- source: paper -->\n")
    new, changes = D.update_text(text, "d.md", run)
    assert new == ("| `mlg` | 23.48 %<!-- summary: governors.mlg.mean_saving_pct --> | 24.73 |\n"
                   "(−0.04<!-- summary: recommended.candidates.mlg.diff_pts -->) 13.11 %<!-- source: paper -->\n")
    assert changes == ["d.md:1: 23.41 -> 23.48 (summary: governors.mlg.mean_saving_pct)",
                       "d.md:2: −0.09 -> −0.04 (summary: recommended.candidates.mlg.diff_pts)"]
    assert D.check_text(new, "d.md", run) == []
    assert D.update_text(new, "d.md", run) == (new, [])


def test_formatting_by_hand():
    assert D.formatted(-1e-15, "0.00") == "0.00" and D.formatted(-1e-15, "0") == "0"
    assert D.formatted(-0.004, "−0.01") == "0.00"
    assert D.formatted(0.116, "+0.12") == "+0.12" and D.formatted(-0.116, "+0.12") == "-0.12"
    assert D.formatted(612.0, "612") == "612" and D.formatted(0.3418, "0.34") == "0.34"


# --------------------------------------------------------------------------------------------
# The docs against a fresh run on the bundled data
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_figure_the_docs_quote_from_the_bundled_pipeline_is_what_it_gives(bundled_pipeline):
    source = D.Source(bundled_pipeline)
    problems, n_figures, regions = [], {}, {}
    for path in D.documents():
        text, name = path.read_text(), str(path.relative_to(D.REPO))
        figures, _ = D.scan(text, name)
        n_figures[name] = sum(f.kind != "source" for f in figures)
        regions[name] = text.count(D.REGION_OPEN)
        problems += D.check_text(text, name, source)
    assert problems == [], "\n".join(
        problems + ["refresh them: python tests/docfigures.py --update <a `dvfslab pipeline` output folder>"])
    # the tables of the bundled run are there to be checked: README's headline and governors tables,
    # docs/governors.md's recommendation and where-each-lands tables
    assert regions["README.md"] >= 2 and regions["docs/governors.md"] >= 2, regions
    assert n_figures["README.md"] > 0 and n_figures["docs/governors.md"] > 0, n_figures


def test_the_command_line_says_what_it_needs(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        D.main([str(tmp_path), "--check"])
    assert err.value.code == 2 and "has no summary.json" in capsys.readouterr().err
