"""The evaluation's figures per question category, its baselines, the ablation, the bootstrap and the set names.

Pure: report rows built by hand (the over-HTTP path is exercised by test_evaluate_modes and test_evaluate_learning);
the LoCoMo set converted from a tiny hand-made archive (the real data never enters the suite).
"""

from __future__ import annotations

import json
import zipfile

import pytest
from django.core.management.base import CommandError

from feedback.harness import evaluation, scoring
from feedback.harness.report import EvaluationReport, ablation_means, edge_counts, frozen0_table, question_groups
from feedback.management.commands import evaluate_all

from .test_locomo import SAMPLE

# --- the plain hybrid and the ways in --------------------------------------------------------------------------


def test_hybrid_is_rrf_of_the_two_raw_rankings_with_k_60():
    hits = [
        {"key": "a", "vector_score": 0.9, "bm25": 0.0},  # vector 1st, no words
        {"key": "b", "vector_score": 0.5, "bm25": 3.0},  # vector 3rd, lexical 1st
        {"key": "c", "vector_score": 0.6, "bm25": 1.0},  # vector 2nd, lexical 2nd
        {"key": "d", "vector_score": None, "bm25": 0.5},  # no vector, lexical 3rd
        {"key": "e", "vector_score": 0.1, "bm25": 0.0},  # vector 4th
    ]
    ranked = scoring.hybrid_keys(hits)
    # b: 1/63 + 1/61 = 0.032266; c: 1/62 + 1/62 = 0.032258; a: 1/61; d: 1/63; e: 1/64.
    assert ranked == ["b", "c", "a", "d", "e"]
    # k weighs the ranks, never the raw inputs: with k=0, a's vector 1st (1) ties c's two 2nds (1/2 + 1/2).
    assert scoring.hybrid_keys(hits, rrf_k=0) == ["b", "a", "c", "d", "e"]
    # Ties break by key; a note listed twice counts once, with its best raws.
    tied = [{"key": "y", "vector_score": 0.5, "bm25": 0}, {"key": "x", "vector_score": 0.5, "bm25": 0}]
    assert scoring.hybrid_keys(tied + tied[:1]) == ["x", "y"]


def test_an_item_came_through_an_edge_only_when_expansion_reached_it():
    assert scoring.edge_way({"entry": "expansion", "path": [4, 9], "edge_type": "follows"}) == "follows"
    assert scoring.edge_way({"entry": "expansion", "path": [4], "edge_type": None}) == "?"
    assert scoring.edge_way({"entry": "co_recall", "path": [4], "edge_type": "co_used"}) == "co_used"  # a new way
    for entry in ("vector", "lexical", "start", "memory"):
        assert scoring.edge_way({"entry": entry, "path": [], "edge_type": None}) is None
    # A triplet hit carries the hit edge as its path, and is an entry point all the same.
    assert scoring.edge_way({"entry": "triplet", "path": [3], "edge_type": "related"}) is None
    items = [
        {"rank": 2, "entry": "expansion", "path": [1], "edge_type": "follows"},
        {"rank": 1, "entry": "vector", "path": []},
    ]
    assert evaluation.item_ways(items) == [None, "follows"]


def test_pending_work_is_read_from_any_key_naming_it():
    assert evaluation.pending_of({"id": 3, "vectors_pending": 12, "edges_pending": 0, "pending_flag": True}) == {
        "vectors_pending": 12
    }
    assert evaluation.pending_of({"id": 3, "nodes": 40}) == {}


# --- the bootstrap ---------------------------------------------------------------------------------------------


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [1.0] * 30 + [0.0] * 20 + [0.5] * 10
    a, b = scoring.bootstrap_mean(values), scoring.bootstrap_mean(values)
    assert a == b and a["n"] == 60 and a["mean"] == pytest.approx(35 / 60, abs=1e-4)
    assert a["lo"] < a["mean"] < a["hi"]
    # About 1.96 standard errors either side (normal approximation of the mean of 60 draws).
    sd = (sum((v - 35 / 60) ** 2 for v in values) / 60) ** 0.5
    assert (a["hi"] - a["lo"]) / 2 == pytest.approx(1.96 * sd / 60**0.5, rel=0.15)
    # Four times the questions: about half the width.
    wide = scoring.bootstrap_mean(values * 4)
    assert (wide["hi"] - wide["lo"]) == pytest.approx((a["hi"] - a["lo"]) / 2, rel=0.2)
    assert scoring.bootstrap_mean([0.7] * 5) == {"mean": 0.7, "lo": 0.7, "hi": 0.7, "n": 5}
    assert scoring.bootstrap_mean([]) == {"mean": 0.0, "lo": 0.0, "hi": 0.0, "n": 0}
    assert scoring.bootstrap_mean(values, seed=1) != a  # another seed, another (close) interval


def test_paired_bootstrap_resamples_questions_with_their_pair():
    a = [0.2, 0.9, 0.4, 1.0, 0.0, 0.6] * 5
    b = [x - 0.1 for x in a]
    # Every question gains exactly 0.1: the paired interval is that point, while the unpaired means vary a lot.
    d = scoring.bootstrap_paired(a, b)
    assert d["mean"] == pytest.approx(0.1) and d["lo"] == pytest.approx(0.1) and d["hi"] == pytest.approx(0.1)
    mixed = scoring.bootstrap_paired([1.0, 0.0] * 20, [0.0, 1.0] * 20)
    assert mixed["mean"] == 0.0 and mixed["lo"] < -0.2 and mixed["hi"] > 0.2
    with pytest.raises(ValueError, match="lengths"):
        scoring.bootstrap_paired([1.0], [1.0, 0.0])


# --- the report per category -----------------------------------------------------------------------------------


def _row(i, split, category, frozen0, hops0, hybrid, plain, ways, learning_last=None):
    return {
        "index": i,
        "q": f"q{i}",
        "useful": ["a"],
        "split": split,
        "category": category,
        "recall5": {
            "learning": [frozen0, learning_last if learning_last is not None else frozen0],
            "frozen": [frozen0, frozen0],
        },
        "ways": {"learning": [ways, ways], "frozen": [ways, ways]},
        "plain_recall5": plain,
        "hybrid_recall5": hybrid,
        "hops0_recall5": hops0,
        "hops0_ways": [None] * len(ways),
    }


ROWS = [
    _row(0, "train", "single-hop", 1.0, 1.0, 1.0, 1.0, [None, None, "follows"], learning_last=1.0),
    _row(1, "test", "single-hop", 1.0, 0.0, 0.0, 0.0, [None, "follows", None]),
    _row(2, "train", "multi-hop", 0.5, 0.0, 0.5, 0.5, [None, "related", "related"], learning_last=0.75),
    _row(3, "test", "multi-hop", 0.0, 0.5, 0.0, 0.0, [None, None, None]),
    _row(4, "test", "temporal", 1.0, 1.0, 1.0, 0.0, [None, None, None]),
]


def _cat_report():
    return EvaluationReport(config={"rounds": 1}, graphs={}, train=[0, 2], test=[1, 3, 4], questions=ROWS, rounds=[])


def test_groups_are_all_then_the_known_categories_in_order():
    groups = question_groups(ROWS + [{**ROWS[0], "category": "zebra"}, {**ROWS[0], "category": ""}])
    assert list(groups) == ["all", "multi-hop", "temporal", "single-hop", "zebra"]
    assert len(groups["all"]) == 7 and len(groups["multi-hop"]) == 2 and len(groups["zebra"]) == 1


def test_summary_gives_every_figure_per_category_with_intervals():
    s = _cat_report().summary()
    assert list(s) == ["all", "multi-hop", "temporal", "single-hop"]
    assert s["all"]["n"] == 5 and s["all"]["n_split"] == {"train": 2, "test": 3}
    f = s["all"]["frozen0"]
    assert f["product"]["mean"] == pytest.approx(0.7) and f["hops0"]["mean"] == pytest.approx(0.5)
    assert f["hybrid"]["mean"] == pytest.approx(0.5) and f["plain"]["mean"] == pytest.approx(0.3)
    assert f["expansion"]["mean"] == pytest.approx(0.2) and f["product_vs_hybrid"]["mean"] == pytest.approx(0.2)
    assert f["expansion"]["lo"] <= 0.2 <= f["expansion"]["hi"]
    mh = s["multi-hop"]["frozen0"]
    assert s["multi-hop"]["n"] == 2 and mh["product"]["mean"] == 0.25 and mh["expansion"]["mean"] == 0.0
    # Items through an edge: 4 of the 15 items received at round 0, by type.
    assert s["all"]["edges"] == {
        "items": 15,
        "through_edge": 4,
        "share": round(4 / 15, 4),
        "by_type": {"follows": 2, "related": 2},
    }
    assert s["multi-hop"]["edges"]["by_type"] == {"related": 2} and s["temporal"]["edges"]["through_edge"] == 0
    assert s["all"]["edges_hops0"]["through_edge"] == 0
    # Rounds per split: the learning graph's last round moved the multi-hop train question only.
    last = s["multi-hop"]["rounds"][-1]
    assert last["learning"]["train"] == 0.75 and last["frozen"]["train"] == 0.5 and last["learning"]["test"] == 0.0
    json.dumps(s)  # the JSON report carries it


def test_markdown_gives_a_row_per_category_and_the_frozen_table():
    report = _cat_report()
    table = frozen0_table(report.summary())
    lines = table.splitlines()
    assert len(lines) == 2 + 4 and lines[2].startswith("| all | 5 | 0.300 [")
    assert "| multi-hop | 2 |" in table and "| +20.0 [" in lines[2]
    assert "26.7% (4 of 15) | follows 2, related 2 |" in lines[2]
    row = report.markdown_row("multi-hop", report.groups()["multi-hop"])
    assert row.startswith("| multi-hop | 1 / 1 | 0.500 / 0.000 | 0.500 / 0.000 | 0.500 / 0.000 | 0.750 / 0.000 |")
    runs = [("locomo:26", "full", 0, report, 60.0), ("locomo:30", "full", 0, report, 60.0)]
    block = evaluate_all.markdown(runs, "manage.py evaluate_all", plot="docs/learning-curves.png")
    assert "#### locomo:26: 5 questions" in block and "&nbsp;&nbsp;temporal |" in block
    assert "#### The ablation over 2 sets (locomo:26, locomo:30)" in block
    assert "![Learning curves" in block and "(learning-curves.png)" in block
    means = ablation_means({"a": report.summary(), "b": report.summary()})
    first = means.splitlines()[2]
    assert first.startswith("| all | 2 | 10 | 0.300 | 0.500 | 0.700 | 0.500 | +20.0 | 0 | +20.0 | 26.7% |")


def test_edge_counts_over_answers():
    assert edge_counts([]) == {"items": 0, "through_edge": 0, "share": 0.0, "by_type": {}}
    assert edge_counts([["a", None], ["b", "a"]])["by_type"] == {"a": 2, "b": 1}


# --- the command's sets ----------------------------------------------------------------------------------------


def test_sets_take_locomo_dev_conversations_and_refuse_the_reserved():
    assert evaluate_all.parse_sets("demo, locomo:26,conversation,locomo:26") == ["demo", "locomo:26", "conversation"]
    dev = evaluate_all.parse_sets("locomo:dev")
    assert dev == [f"locomo:{c}" for c in ("26", "30", "41", "43", "44", "47", "49", "50")]
    assert (
        evaluate_all.parse_sets("locomo:30,locomo:dev")[0] == "locomo:30"
        and len(evaluate_all.parse_sets("locomo:30,locomo:dev")) == 8
    )
    for reserved in ("locomo:42", "locomo:48", "locomo:", "locomo:all"):
        with pytest.raises(CommandError, match="reserved for acceptance"):
            evaluate_all.parse_sets(f"demo,{reserved}")
    with pytest.raises(CommandError, match="unknown 'nope'"):
        evaluate_all.parse_sets("demo,nope")
    with pytest.raises(CommandError, match="empty"):
        evaluate_all.parse_sets(" , ")


def test_a_locomo_set_is_converted_at_run_time(tmp_path):
    archive = tmp_path / "locomo10.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data/x/26.json", json.dumps(SAMPLE))
    vault, questions = evaluate_all.set_files("locomo:26", str(archive), str(tmp_path / "out"))
    assert (tmp_path / "out" / "26").is_dir() and vault.startswith(str(tmp_path / "out"))
    assert len(json.loads(open(questions, encoding="utf-8").read())["questions"]) == 2
    assert evaluate_all.set_files("demo") == evaluate_all.SETS["demo"]
    with pytest.raises(CommandError, match="no LoCoMo archive"):
        evaluate_all.set_files("locomo:30", str(tmp_path / "missing.zip"), str(tmp_path / "out"))


def test_run_files_name_the_set_mode_seed_rounds_and_limit(tmp_path):
    assert evaluate_all.run_file(tmp_path, "locomo:26", "full", 0, 5, None).name == "locomo-26-full-s0-r5.json"
    assert evaluate_all.run_file(tmp_path, "demo", "p0.5", 2, 1, 20).name == "demo-p0.5-s2-r1-q20.json"
    assert evaluate_all.run_file(tmp_path, "locomo:30", "full", 0, 5, None, 5).name == "locomo-30-full-s0-r5-b5.json"


def test_the_command_refuses_bad_sets_and_limits_before_running():
    from django.core.management import call_command

    with pytest.raises(CommandError, match="reserved for acceptance"):
        call_command("evaluate_all", org="acme", token="x", sets="locomo:42")
    with pytest.raises(CommandError, match="--questions-limit"):
        call_command("evaluate_all", org="acme", token="x", sets="demo", questions_limit=1)
    with pytest.raises(CommandError, match="--budget"):
        call_command("evaluate_all", org="acme", token="x", sets="demo", budget=0)


def test_the_learning_curve_figure_is_drawn_from_the_runs(tmp_path):
    from feedback.harness.plots import write_learning_curves

    from .test_evaluate_modes import _report

    runs = [
        (name, mode, _report((0.4, 0.3), [((0.5, 0.5), (0.5, 0.5)), ((0.8, 0.5), (0.5, 0.5))]))
        for name in ("locomo:26", "locomo:30")
        for mode in ("full", "outcome")
    ]
    path = tmp_path / "curves.png"
    write_learning_curves(runs, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
