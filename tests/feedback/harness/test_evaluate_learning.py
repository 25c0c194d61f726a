"""manage.py evaluate_learning against a real server (live_server) and a real Celery worker.

It measures; it does not judge the pipeline: no assertion on learning gains here (the retrieval
and reinforcement own those numbers). What it must guarantee: the rounds, train feedback only on
the learning graph, nothing on the test questions or the frozen twin, metrics that are fractions.
"""

from __future__ import annotations

import io
import json
import random

import pytest
from django.core.management import CommandError, call_command

from feedback.harness import agent, config, evaluation, scoring
from feedback.models import AgentSession, UpdateBatch, UseEvent
from graphadmin.accounts import create_token
from graphadmin.models import Graph

NOTES = {
    "Architecture/Overview": (
        "The courier app sends scans to the tracking service; every scan becomes an event. See [[Event Log]]."
    ),
    "Architecture/Event Log": (
        "Kafka keeps scan events for seven days, partitioned by parcel id, so order is kept per parcel."
    ),
    "Decisions/Short Tokens": (
        "Access tokens live fifteen minutes; refresh tokens are rotated on use. Derived from [[Token Study]]."
    ),
    "Research/Token Study": (
        "Stolen tokens: a fifteen-minute lifetime shrinks the window fourfold for two percent more calls."
    ),
    "Components/Notifier": "Push first; when no receipt arrives within two minutes an SMS follows.",
    "Glossary/Geofence": "A polygon around a depot; entering it triggers an event.",
}
QUESTIONS = [
    {"q": "how long do access tokens live and why", "useful": ["Decisions/Short Tokens", "Research/Token Study"]},
    {"q": "how long are scan events kept and how are they partitioned", "useful": ["Architecture/Event Log"]},
    {"q": "what happens when a push message gets no receipt", "useful": ["Components/Notifier"]},
    {"q": "what is the polygon around a depot", "useful": ["Glossary/Geofence"]},
]


@pytest.fixture
def tiny(tmp_path):
    vault = tmp_path / "vault"
    for key, text in NOTES.items():
        path = vault / f"{key}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {key.split('/')[-1]}\n\n{text}\n", encoding="utf-8")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"questions": QUESTIONS}), encoding="utf-8")
    return vault, questions


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_two_rounds_learning_against_frozen(live_server, acme, alice, celery_worker_process, tiny, tmp_path):
    vault, questions = tiny
    out, report_path = io.StringIO(), tmp_path / "report.json"
    call_command(
        "evaluate_learning",
        str(vault),
        str(questions),
        url=live_server.url,
        token=create_token(alice),
        org="acme",
        rounds=2,
        seed=3,
        negative_rate=1.0,
        policy_set=["learning_rate=0.2", "ceiling_mode=soft"],
        json_out=str(report_path),
        stdout=out,
        stderr=io.StringIO(),
    )
    printed = out.getvalue()
    report = json.loads(report_path.read_text())

    # Rounds 0..2, both graphs, both splits, in the table and the JSON; every metric a fraction.
    assert [r["round"] for r in report["rounds"]] == [0, 1, 2]
    for r in report["rounds"]:
        for graph in ("learning", "frozen"):
            for side in ("train", "test"):
                assert r[graph][side]["n"] == 2
                assert all(0.0 <= r[graph][side][m] <= 1.0 for m in ("hit5", "recall5", "mrr5"))
        for side in ("train", "test"):
            assert f"{r['round']:>5} {side:<5} |" in printed
    assert sorted(report["train"] + report["test"]) == [0, 1, 2, 3] and len(report["train"]) == 2
    assert [r["feedback"]["sessions"] for r in report["rounds"]] == [2, 2, 0]  # the last round only measures
    assert (
        all(sum(m.values()) == 2 for m in report["moved"].values())
        and "questions by recall@5 against frozen" in printed
    )

    learning = Graph.objects.get(pk=report["graphs"]["learning"]["id"])
    frozen = Graph.objects.get(pk=report["graphs"]["frozen"]["id"])
    assert learning.slug.endswith("-learning") and frozen.slug.endswith("-frozen") and learning.organization == acme
    # The notes (the learning graph also holds the question nodes its reported sessions asked).
    assert learning.nodes.exclude(kind="question").filter(archived=False).count() == len(NOTES)
    assert frozen.nodes.filter(archived=False).count() == len(NOTES)
    assert not frozen.nodes.filter(kind="question").exists()
    for graph in (learning, frozen):  # --set changed both policies, once, before any question
        policy = graph.current_policy()
        assert (policy.revision, policy.learning_rate) == (2, 0.2)
        assert not graph.injections.filter(policy_revision__revision=1).exists()

    # Every call was question-only with its own session: 4 questions x 3 rounds per graph, and on the frozen twin
    # each question once more with hops 0 (the ablation), after round 0.
    assert AgentSession.objects.filter(graph=learning).count() == 12
    assert AgentSession.objects.filter(graph=frozen).count() == 16
    ablation = frozen.injections.filter(session__external_id__contains="-frozen-hops0-")
    assert ablation.count() == 4 and all(i.params["hops"] == 0 for i in ablation)
    # The baselines, the ablation and the ways in, per question; the summary per group (no category here: all).
    for q in report["questions"]:
        assert {"plain_recall5", "hybrid_recall5", "hops0_recall5", "hops0_ways"} <= set(q)
        assert len(q["ways"]["frozen"]) == 3 and all(w is None or isinstance(w, str) for w in q["ways"]["frozen"][0])
        assert q["hops0_ways"] and all(w is None for w in q["hops0_ways"])  # hops 0: nothing through an edge
    summary = report["summary"]
    assert list(summary) == ["all"] and summary["all"]["n"] == 4
    assert {"plain", "hybrid", "product", "hops0", "expansion", "product_vs_hybrid"} <= set(summary["all"]["frozen0"])
    assert summary["all"]["edges"]["items"] == sum(len(q["ways"]["frozen"][0]) for q in report["questions"])
    assert "cosine + BM25 top 5" in printed and "hops 0 (entry points only)" in printed

    # Feedback went to the learning graph's train sessions of rounds 0 and 1 only, and all of it was applied.
    run = report["config"]["run"]
    train_sessions = {f"eval-{run}-learning-r{r}-q{i}" for r in (0, 1) for i in report["train"]}
    reported = AgentSession.objects.filter(graph=learning, outcome__isnull=False)
    assert set(reported.values_list("external_id", flat=True)) == train_sessions
    assert UpdateBatch.objects.filter(graph=learning, kind="outcome", status="applied").count() == len(train_sessions)
    # Negative rate 1.0: every train session flagged one note, so each has a use event.
    used = set(UseEvent.objects.filter(graph=learning).values_list("session__external_id", flat=True))
    assert used == train_sessions
    test_ids = {f"eval-{run}-learning-r{r}-q{i}" for r in (0, 1, 2) for i in report["test"]}
    assert not UseEvent.objects.filter(graph=learning, session__external_id__in=test_ids).exists()
    assert not UpdateBatch.objects.filter(graph=learning, trigger_session__external_id__in=test_ids).exists()

    # The frozen twin got no feedback at all.
    assert not UseEvent.objects.filter(graph=frozen).exists()
    assert not UpdateBatch.objects.filter(graph=frozen, kind__in=["reinforce", "outcome"]).exists()
    assert not AgentSession.objects.filter(graph=frozen, outcome__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_refusals_are_clear(live_server, acme, alice, oscar, tiny):
    vault, questions = tiny
    token = create_token(oscar)  # an operator may not create graphs
    with pytest.raises(CommandError, match="admin role"):
        call_command(
            "evaluate_learning",
            str(vault),
            str(questions),
            url=live_server.url,
            token=token,
            org="acme",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert not Graph.objects.exists()
    alice_token = create_token(alice)
    with pytest.raises(CommandError, match=r"unknown policy names \['explorashun'\]"):
        call_command(
            "evaluate_learning",
            str(vault),
            str(questions),
            url=live_server.url,
            token=alice_token,
            org="acme",
            policy_set=["explorashun=0"],
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    with pytest.raises(CommandError, match="learning_rate"):
        call_command(
            "evaluate_learning",
            str(vault),
            str(questions),
            url=live_server.url,
            token=alice_token,
            org="acme",
            policy_set=["learning_rate=7"],
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    with pytest.raises(CommandError, match="--token is required"):
        call_command(
            "evaluate_learning", str(vault), str(questions), url=live_server.url, token="", stdout=io.StringIO()
        )


def test_scores_and_the_simulated_agent():
    assert scoring.score(["a", "x", "b", "y", "z", "c"], ["b", "c"]) == {"hit5": 1.0, "recall5": 0.5, "mrr5": 1 / 3}
    assert scoring.score(["x"], ["a"]) == {"hit5": 0.0, "recall5": 0.0, "mrr5": 0.0}
    many = [f"u{i}" for i in range(7)]
    assert scoring.score(many, many)["recall5"] == 1.0  # recall's denominator is capped at 5

    items = [{"rank": 2, "key": "b", "node": 2}, {"rank": 1, "key": "a", "node": 1}, {"rank": 3, "key": "c", "node": 3}]
    uses, outcome = agent.agent_reports(items, ["a", "z"], random.Random(0), negative_rate=0.0)
    assert uses == [{"node": 1, "signal": "explicit"}] and outcome == "rework"
    uses, outcome = agent.agent_reports(items, ["a", "c"], random.Random(0), negative_rate=1.0)
    assert uses == [
        {"node": 1, "signal": "explicit"},
        {"node": 3, "signal": "explicit"},
        {"node": 2, "signal": "negative"},
    ]
    assert outcome == "accepted"
    assert agent.agent_reports(items, ["z"], random.Random(0), negative_rate=0.0) == ([], "rejected")

    assert evaluation.split(4, 0.5, 3) == evaluation.split(4, 0.5, 3)
    train, test = evaluation.split(10, 0.5, 0)
    assert len(train) == 5 and sorted(train + test) == list(range(10))
    assert config.parse_settings(["learning_rate=0.2", "max_hops=2", "ceiling_mode=soft"]) == {
        "learning_rate": 0.2,
        "max_hops": 2,
        "ceiling_mode": "soft",
    }
    with pytest.raises(config.EvaluationError):
        config.parse_settings(["learning_rate"])
