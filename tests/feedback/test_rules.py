"""The learning rules, pure: no database (``feedback.rules``)."""

from datetime import UTC, datetime, timedelta

import pytest

from feedback import rules
from feedback.rules import ManualValue, Refusal, UseItem


def test_reinforce_and_weaken_move_toward_one_and_zero():
    assert rules.reinforce(0.5, 0.1) == pytest.approx(0.55)
    assert rules.reinforce(1.0, 0.1) == 1.0  # the ceiling of the soft mode
    assert rules.weaken(0.5, 0.1) == pytest.approx(0.45)
    assert rules.weaken(0.0, 0.1) == 0.0


def test_ema_blends_the_outcome_score():
    assert rules.ema(0.5, 0.1, 1.0) == pytest.approx(0.55)
    assert rules.ema(0.5, 0.3, 0.0) == pytest.approx(0.35)
    assert rules.ema(0.55, 0.1, 0.0) == pytest.approx(0.495)


def test_decay_never_goes_below_the_floor_and_leaves_the_floor_alone():
    assert rules.decayed(0.5, 0.95, 0.1) == pytest.approx(0.475)
    assert rules.decayed(0.105, 0.5, 0.1) == 0.1
    assert rules.decayed(0.05, 0.95, 0.1) == 0.05  # below the floor already: untouched


def test_normalize_caps_at_one():
    assert rules.normalized(0.4, 1 / 0.8) == pytest.approx(0.5)
    assert rules.normalized(0.9, 2.0) == 1.0


def test_decay_period_counts_from_the_epoch():
    now = datetime(2026, 12, 1, 13, 0, tzinfo=UTC)
    index, start, cutoff = rules.decay_period(now, 7)
    assert index == (now - rules.EPOCH).days // 7
    assert start <= now < start + timedelta(days=7) and start.weekday() == rules.EPOCH.weekday()
    assert cutoff == start - timedelta(days=7)
    assert (
        rules.decay_period(start, 7)[0] == index and rules.decay_period(start - timedelta(seconds=1), 7)[0] == index - 1
    )


def test_bounded_override_names_the_field():
    assert rules.out_of_bounds("learning_rate", None, 0.01, 0.5) is None and rules.bounded(None, 0.1) == 0.1
    assert rules.out_of_bounds("learning_rate", 0.2, 0.01, 0.5) is None and rules.bounded(0.2, 0.1) == 0.2
    refusal = rules.out_of_bounds("learning_rate", 0.9, 0.01, 0.5)
    assert (refusal.field, refusal.message) == ("learning_rate", "must be between 0.01 and 0.5.")


def test_unique_uses_refuses_bad_and_conflicting_signals():
    signals = ("explicit", "implicit", "negative")
    items = [UseItem("node", 1, "explicit"), UseItem("node", 1, "explicit"), UseItem("edge", 1, "negative")]
    assert rules.refused_uses(items, signals) is None
    assert rules.unique_uses(items) == [UseItem("node", 1, "explicit"), UseItem("edge", 1, "negative")]
    refusal = rules.refused_uses([UseItem("node", 1, "great")], signals)
    assert isinstance(refusal, Refusal) and refusal.field == "items[0].signal"
    refusal = rules.refused_uses([UseItem("node", 1, "explicit"), UseItem("node", 1, "negative")], signals)
    assert refusal.field == "items[1]" and "both explicit and negative" in refusal.message


def test_manual_values_are_checked():
    valid = [ManualValue("edge", 1, "weight", 0.0), ManualValue("edge", 1, "feedback_weight", 1.0)]
    assert rules.refused_manual_values(valid) is None
    for values, field in (
        ([ManualValue("node", 1, "weight", 0.5)], "values[0].field"),
        ([ManualValue("edge", 1, "priority", 0.5)], "values[0].field"),
        ([ManualValue("edge", 1, "weight", 1.5)], "values[0].value"),
        ([ManualValue("edge", 1, "weight", 0.5), ManualValue("edge", 1, "weight", 0.6)], "values"),
    ):
        assert rules.refused_manual_values(values).field == field


def test_credit_paths_credits_the_path_and_blames_only_the_last_step():
    items = [UseItem("node", 10, "explicit"), UseItem("node", 20, "negative"), UseItem("edge", 3, "implicit")]
    selected = [
        (10, 100, 2, {"path": [1, 2, 3]}),  # edge 3 is reported itself: keeps its own signal
        (20, 101, 5, {"path": [4, 5]}),  # negative: only the last edge, 5
        (20, 102, 2, {"path": [2]}),  # 2 is credited up by node 10's path: not blamed
        (10, 103, 7, None),  # a log older than the pipeline: its one edge
    ]
    assert rules.credit_paths(items, selected) == [
        UseItem("edge", 1, "explicit", 100),
        UseItem("edge", 2, "explicit", 100),
        UseItem("edge", 5, "negative", 101),
        UseItem("edge", 7, "explicit", 103),
    ]
    assert rules.credit_paths([UseItem("edge", 1, "explicit")], []) == []


def test_vector_text_is_pgvector_input_or_none():
    assert rules.vector_text([0.5, -1.0]) == "[0.5,-1.0]"
    assert rules.vector_text([0.0, 0.0]) is None and rules.vector_text(None) is None


def test_rules_import_nothing_from_django():
    import ast
    import pathlib

    tree = ast.parse(pathlib.Path(rules.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert not {m for m in imported if m.split(".")[0] in ("django", "psycopg", "graphadmin", "feedback", "ranking")}


def test_surfaced_is_the_selected_nodes_and_the_edges_on_their_paths():
    nodes, edges = rules.surfaced([(1, 10, [9, 10]), (2, None, None), (3, 11, None)])
    assert nodes == {1, 2, 3} and edges == {9, 10, 11}
    assert rules.first_unsurfaced([("node", 1), ("edge", 9)], nodes, edges) is None
    assert rules.first_unsurfaced([("node", 1), ("edge", 12), ("node", 4)], nodes, edges) == (1, "edge", 12)
    assert rules.first_unsurfaced([("node", 9)], nodes, edges) == (0, "node", 9)  # an edge id is not a node


# --------------------------------------------------------------------------------------------------
# Question-conditional evidence


def test_answered_after_moves_evidence_by_kind():
    assert rules.answered_after(0.5, rules.USED) == 1.0  # full strength on first report
    assert rules.answered_after(0.25, rules.USED) == 1.0
    assert rules.answered_after(0.5, rules.FLAGGED) == 0.0
    assert rules.answered_after(0.5, rules.NOT_USED) == 0.25
    assert rules.answered_after(0.5, rules.SHOWN_ACCEPTED) == 0.75
    with pytest.raises(ValueError):
        rules.answered_after(0.5, "maybe")


def test_the_not_used_rule_accepted_sessions_add_none_and_rework_without_uses_adds_none():
    shown = [1, 2, 3]
    assert rules.session_evidence("accepted", shown, used=[2], flagged=[]) == {}
    assert rules.session_evidence("accepted", shown, used=[], flagged=[]) == dict.fromkeys(shown, rules.SHOWN_ACCEPTED)
    assert rules.session_evidence("rework", shown, used=[], flagged=[]) == {}
    assert rules.session_evidence("rework", shown, used=[2], flagged=[]) == {1: rules.NOT_USED, 3: rules.NOT_USED}
    assert rules.session_evidence("rejected", shown, used=[], flagged=[3]) == {1: rules.NOT_USED, 2: rules.NOT_USED}
    assert rules.session_evidence(None, shown, used=[], flagged=[]) == {}


def test_merge_evidence_keeps_the_strongest_per_question_and_note():
    merged = rules.merge_evidence(
        [(1, 10, rules.NOT_USED), (1, 10, rules.USED), (1, 11, rules.SHOWN_ACCEPTED), (1, 11, rules.FLAGGED)]
    )
    assert merged == {(1, 10): rules.USED, (1, 11): rules.FLAGGED}


# --- the graph's evidence similarity (rules.evidence_similarity) -------------------------------------


def test_evidence_similarity_is_the_lowest_similarity_where_pairs_still_mostly_agree():
    from feedback.rules import evidence_similarity

    pairs = [(0.95, True)] * 6 + [(0.9, True)] * 4 + [(0.85, False)] * 4 + [(0.8, True)] * 2 + [(0.75, False)] * 10
    # From the top: 10 of 10 agree at 0.9, 10 of 14 at 0.85, 12 of 16 at 0.8, 12 of 26 (< half) at 0.75.
    assert evidence_similarity(pairs) == 0.8
    assert evidence_similarity(pairs, precision=0.8) == 0.9


def test_evidence_similarity_needs_enough_pairs_and_some_agreement():
    from feedback.rules import evidence_similarity

    assert evidence_similarity([(0.99, True)] * 19) is None  # too little history
    assert evidence_similarity([(0.99, False)] * 40) is None  # even the most alike disagree
    assert evidence_similarity([(0.7, True)] * 40) == 0.7
