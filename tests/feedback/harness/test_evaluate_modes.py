"""The evaluation harness of issue 23: the simulated agent's feedback modes and the plain-cosine baseline.

The agent (``agent.agent_turn``) is pure: what it sends per mode is checked on its own. The
plain-cosine baseline reads the search API of a real server (live_server) and must equal the
node-vector top 5 computed directly with pgvector over the graph's stored node embeddings.
"""

from __future__ import annotations

import random

import pytest
from pgvector.django import CosineDistance

from feedback.harness import agent, config, evaluation, scoring
from feedback.harness.report import EvaluationReport
from graphadmin.accounts import create_token
from graphadmin.embeddings import embed_query
from graphadmin.models import Node
from graphadmin_client import GraphClient

ITEMS = [
    {"rank": 1, "key": "a", "node": 1, "text": "# A\n\nThe depot opens at six. Vans leave at seven!", "title": "A"},
    {"rank": 2, "key": "b", "node": 2, "text": "Nothing useful here. Really nothing.", "title": "B"},
    {"rank": 3, "key": "c", "node": 3, "text": "Refunds take five days.", "title": "C"},
    {"rank": 4, "key": "a", "node": 1, "text": "# A\n\nThe depot opens at six. Vans leave at seven!", "title": "A"},
]


def test_explicit_with_every_use_is_the_agent_of_before():
    for seed in range(20):
        old = agent.agent_reports(ITEMS, ["a", "c"], random.Random(seed), negative_rate=0.3)
        turn = agent.agent_turn(ITEMS, ["a", "c"], random.Random(seed), 0.3, report_p=1.0, feedback="explicit")
        assert (turn.uses, turn.outcome, turn.response) == (old[0], old[1], "")
        assert [u["node"] for u in turn.uses if u["signal"] == "explicit"] == [1, 3]


def test_report_p_reports_each_used_note_with_that_probability():
    useful = ["a", "c"]
    reported = sessions = 0
    outcomes = set()
    for seed in range(400):
        turn = agent.agent_turn(ITEMS, useful, random.Random(seed), 0.0, report_p=0.5, feedback="explicit")
        explicit = [u["node"] for u in turn.uses if u["signal"] == "explicit"]
        assert set(explicit) <= {1, 3} and len(explicit) == len(set(explicit))
        reported += len(explicit)
        sessions += 1
        outcomes.add(turn.outcome)
    assert 0.44 < reported / (2 * sessions) < 0.56
    assert outcomes == {"accepted"}  # the outcome is what it was given, reported or not
    never = agent.agent_turn(ITEMS, useful, random.Random(1), 0.0, report_p=0.0, feedback="explicit")
    assert never.uses == [] and never.outcome == "accepted"


def test_response_mode_sends_one_sentence_of_each_useful_note_given_and_no_uses():
    for seed in range(30):
        turn = agent.agent_turn(ITEMS, ["a", "c", "z"], random.Random(seed), 1.0, feedback="response")
        assert turn.uses == [] and turn.outcome == "rework"
        first, second = turn.response.split(" Refunds")
        assert first in ("The depot opens at six.", "Vans leave at seven!")
        assert "Refunds" + second == "Refunds take five days."
        assert "useful here" not in turn.response and "#" not in turn.response
    nothing = agent.agent_turn(ITEMS, ["z"], random.Random(0), 1.0, feedback="response")
    assert (nothing.response, nothing.uses, nothing.outcome) == ("", [], "rejected")
    assert agent.sentences("# T\n\nOne. Two?  Three!\nFour") == ["One.", "Two?", "Three!", "Four"]


def test_outcome_mode_sends_the_outcome_alone():
    turn = agent.agent_turn(ITEMS, ["a"], random.Random(0), 1.0, feedback="outcome")
    assert (turn.uses, turn.response, turn.outcome) == ([], "", "accepted")


def test_bad_modes_are_refused_before_anything_is_sent():
    with pytest.raises(config.EvaluationError, match="--feedback"):
        agent.agent_turn(ITEMS, ["a"], random.Random(0), 0.0, feedback="telepathy")
    questions = [config.Question("q", ["a"])]
    for cfg, match in [
        (config.EvaluationConfig("acme", feedback="telepathy"), "--feedback"),
        (config.EvaluationConfig("acme", report_p=1.5), "--report-p"),
        (config.EvaluationConfig("acme", report_p=0.5, feedback="outcome"), "--report-p applies"),
    ]:
        with pytest.raises(config.EvaluationError, match=match):
            evaluation.evaluate(None, "no/such/vault", questions, cfg)  # refused before the client is used


def _report(plain, rounds):
    """A report of two questions (0 train, 1 test) whose rows carry the rounds' recall@5 (one question per split:
    each split's mean is its question's figure)."""
    questions = [
        {
            "index": j,
            "q": f"q{j}",
            "useful": ["a"],
            "split": side,
            "category": "",
            "recall5": {"learning": [lr[j] for lr, _ in rounds], "frozen": [fr[j] for _, fr in rounds]},
            "plain_recall5": plain[j],
        }
        for j, side in enumerate(("train", "test"))
    ]
    return EvaluationReport(
        config={"rounds": len(rounds) - 1},
        graphs={},
        train=[0],
        test=[1],
        questions=questions,
        rounds=[
            {
                "round": i,
                "learning": {
                    s: {"hit5": 0, "recall5": lr[j], "mrr5": 0, "n": 1} for j, s in enumerate(("train", "test"))
                },
                "frozen": {
                    s: {"hit5": 0, "recall5": fr[j], "mrr5": 0, "n": 1} for j, s in enumerate(("train", "test"))
                },
            }
            for i, (lr, fr) in enumerate(rounds)
        ],
        plain={"train": {"recall5": plain[0]}, "test": {"recall5": plain[1]}},
    )


def test_targets_are_against_round_0_frozen_and_the_twin_drift_is_shown():
    report = _report((0.4, 0.3), [((0.5, 0.5), (0.5, 0.5)), ((0.8, 0.47), (0.4, 0.6))])
    t = report.targets()
    assert (t["base_train"], t["base_test"]) == (0.5, 0.5)
    assert t["train_vs_base"] == pytest.approx(0.3) and t["train_vs_base_needed"] == pytest.approx(0.25)
    assert t["train_vs_base_met"] and t["test_vs_base"] == pytest.approx(-0.03) and not t["test_vs_base_met"]
    assert t["twin_drift_train"] == pytest.approx(-0.1) and not t["twin_met"]
    assert t["frozen_vs_plain"] == pytest.approx(0.15) and t["frozen_vs_plain_met"]
    # Against the same round's twin (issue 12's view) the test loss looks like a gain: why base is reported.
    assert t["test_change"] == pytest.approx(-0.13) and t["train_gain"] == pytest.approx(0.4)
    table = report.table()
    assert "    1 train |" in table and "plain cosine top 5" in table and "base = round 0, frozen" in table
    row = report.markdown_row("full, seed 0")
    assert row.startswith("| full, seed 0 | 1 / 1 | 0.400 / 0.300 | – / – | 0.500 / 0.500 | 0.800 / 0.470 |")
    assert row.endswith("| 0.400 / 0.600 | +30.0 / -3.0 | -10.0 / +10.0 |")


def test_plain_cosine_orders_by_vector_score_alone():
    hits = [
        {"key": "x", "vector_score": 0.2, "total": 9.0},
        {"key": "y", "vector_score": None, "total": 8.0},
        {"key": "z", "vector_score": 0.9, "total": 0.1},
        {"key": "w", "vector_score": 0.2, "total": 5.0},
    ]
    assert evaluation.plain_cosine_keys(hits) == ["z", "w", "x"]


NOTES = {
    "Depot Hours": "The Avonmouth depot opens at six in the morning; vans leave at seven.",
    "Refunds": "A refund reaches the customer's card within five working days.",
    "Allotment": "Plot 27 has rhubarb, potatoes and a shed with a padlock.",
    "Kimchi Stew": "Old sour kimchi, gochugaru, pork belly and tofu make the stew.",
    "Half Marathon": "Tomás ran the Bath Half in 1:48:09, Maya in 1:57:41.",
    "Router": "The broadband router blinks red and drops the connection four times a week.",
    "Lisbon Flat": "The flat in Graça costs 710 euros for four nights, with a roof terrace.",
}


@pytest.mark.django_db(transaction=True)
def test_plain_cosine_baseline_equals_pgvector_over_the_node_embeddings(live_server, acme, alice, tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    for key, text in NOTES.items():
        (vault / f"{key}.md").write_text(f"{text}\n", encoding="utf-8")
    with GraphClient(live_server.url, create_token(alice), timeout=60) as client:
        graph = client.create_graph("acme", "plain", "plain")
        client.import_vault(graph["id"], evaluation.zip_vault(vault))
        cfg = config.EvaluationConfig("acme", wait_timeout=120)
        assert len(evaluation._wait_ready(client, graph["id"], cfg)) == len(NOTES)
        questions = [
            "when do the vans leave the depot",
            "how long until my money comes back",
            "what did the runners finish in",
            "spicy korean soup recipe",
            "why does my internet keep cutting out",
        ]
        for q in questions:
            keys = evaluation.plain_cosine_keys(client.search(graph["id"], q, k=evaluation.PLAIN_K)["results"])
            expected = list(
                Node.objects.filter(graph_id=graph["id"], archived=False, embedding__isnull=False)
                .annotate(distance=CosineDistance("embedding", embed_query(q)))
                .order_by("distance", "key")
                .values_list("key", flat=True)
            )
            assert keys[: scoring.K] == expected[: scoring.K], q
            assert set(keys) == set(expected)  # every embedded node is a candidate on a graph this small


TINY = {
    "Event Log": "Kafka keeps scan events for seven days, partitioned by parcel id, so order is kept per parcel.",
    "Short Tokens": "Access tokens live fifteen minutes; refresh tokens are rotated on use.",
    "Notifier": "Push first; when no receipt arrives within two minutes an SMS follows.",
    "Geofence": "A polygon around a depot; entering it triggers an event.",
}
TINY_QUESTIONS = [
    {"q": "how long are scan events kept and how are they partitioned", "useful": ["Event Log"]},
    {"q": "how long do access tokens live", "useful": ["Short Tokens"]},
    {"q": "what happens when a push message gets no receipt", "useful": ["Notifier"]},
    {"q": "what is the polygon around a depot", "useful": ["Geofence"]},
]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_response_and_outcome_agents_through_the_command(live_server, acme, alice, celery_worker_process, tmp_path):
    import io
    import json

    from django.core.management import call_command

    from feedback.models import AgentSession, UpdateBatch, UseEvent
    from graphadmin.models import Graph

    vault = tmp_path / "vault"
    vault.mkdir()
    for key, text in TINY.items():
        (vault / f"{key}.md").write_text(f"{text}\n", encoding="utf-8")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"questions": TINY_QUESTIONS}), encoding="utf-8")
    token = create_token(alice)
    reports = {}
    for mode in ("response", "outcome"):
        out, path = io.StringIO(), tmp_path / f"{mode}.json"
        call_command(
            "evaluate_learning",
            str(vault),
            str(questions),
            url=live_server.url,
            token=token,
            org="acme",
            rounds=1,
            seed=0,
            feedback=mode,
            json_out=str(path),
            stdout=out,
            stderr=io.StringIO(),
        )
        reports[mode] = report = json.loads(path.read_text())
        printed = out.getvalue()
        assert f"feedback {mode}" in printed and "plain cosine top 5" in printed and "frozen twin drift" in printed
        learning = Graph.objects.get(pk=report["graphs"]["learning"]["id"])
        run = report["config"]["run"]
        train_sessions = {f"eval-{run}-learning-r0-q{i}" for i in report["train"]}
        # Every train session of round 0 reported its outcome, and only those.
        assert (
            set(
                AgentSession.objects.filter(graph=learning, outcome__isnull=False).values_list("external_id", flat=True)
            )
            == train_sessions
        )
        assert UpdateBatch.objects.filter(graph=learning, kind="outcome", status="applied").count() == 2
        assert not UseEvent.objects.filter(graph=learning, signal__in=["explicit", "negative"]).exists()
        fb = report["rounds"][0]["feedback"]
        assert fb["mode"] == mode and fb["uses"] == fb["negatives"] == 0
        assert 0.0 <= report["questions"][0]["plain_recall5"] <= 1.0 and len(report["questions"][0]["plain_top"]) <= 5
    # The response agent quoted a sentence of each useful note it was given (all four notes fit the budget, so
    # every train session answered), and the worker detected each quote as an implicit use.
    fb = reports["response"]["rounds"][0]["feedback"]
    assert fb["responses"] == len(reports["response"]["train"]) == fb["responses_applied"]
    learning = Graph.objects.get(pk=reports["response"]["graphs"]["learning"]["id"])
    assert UseEvent.objects.filter(graph=learning, signal="implicit", source="response").count() >= fb["responses"]
    assert reports["outcome"]["rounds"][0]["feedback"]["responses"] == 0
    assert not UseEvent.objects.filter(graph_id=reports["outcome"]["graphs"]["learning"]["id"]).exists()


def test_evaluate_all_writes_one_block_and_replaces_it(tmp_path):
    from feedback.management.commands import evaluate_all

    runs = [
        ("conversation", "full", seed, _report((0.4, 0.3), [((0.5, 0.5), (0.5, 0.5)), ((0.8, 0.5), (0.5, 0.5))]), 60.0)
        for seed in (0, 1)
    ]
    page = tmp_path / "learning.md"
    page.write_text("# Learning\n\nText before.\n", encoding="utf-8")
    evaluate_all.write_block(page, evaluate_all.markdown(runs, "manage.py evaluate_all"))
    first = page.read_text(encoding="utf-8")
    assert first.startswith("# Learning\n\nText before.\n") and first.count(evaluate_all.START) == 1
    assert "| full, seed 0 (1.0 min) | 1 / 1 | 0.400 / 0.300 | – / – | 0.500 / 0.500 |" in first
    assert "| **full, mean of 2 seeds** | 1 / 1 | 0.400 / 0.300 | – / – | 0.500 / 0.500 | 0.800 / 0.500 |" in first
    assert "2 runs, 2 minutes of runs" in first
    evaluate_all.write_block(page, evaluate_all.markdown(runs[:1], "manage.py evaluate_all"))
    second = page.read_text(encoding="utf-8")
    assert second.count(evaluate_all.START) == second.count(evaluate_all.END) == 1
    assert "mean of 2 seeds" not in second and second.startswith("# Learning\n\nText before.\n")
