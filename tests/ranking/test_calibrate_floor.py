"""The abstention floor calibrated from a graph's own logged answers: manage.py calibrate_floor and the tune page
(ranking.calibration), through the core's policy write (a new audited revision); tenancy and roles."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from feedback import actions as feedback_actions
from feedback.models import AgentSession
from feedback.rules import UseItem, floor_at_recall
from graphadmin import actions
from graphadmin.models import AuditEvent, PolicyRevision
from ranking import calibration

pytestmark = pytest.mark.django_db

QUESTIONS = [
    "ranking weights of edges",
    "edge type priority",
    "vector search with pgvector",
    "decay of edge weights",
    "agent memory in PostgreSQL",
    "HNSW recall for vector search",
    "reinforcement moves weights",
    "Celery task decays weights",
]
OFF_TOPIC = ["banana bread recipe", "capital of australia", "how to knit a scarf"]


def _ask(client, graph, query, session):
    r = client.post(f"/api/graphs/{graph.pk}/context/", {"session": session, "query": query}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


@pytest.fixture
def logged(rg, api, ada):
    """24 answers used (explicit use of their first item, session accepted) and 3 off-topic answers rejected with
    nothing used; their confidences (positives, negatives)."""
    graph, client = rg["graph"], api(ada)
    positives, negatives = [], []
    for i in range(24):
        sid = f"used-{i}"
        body = _ask(client, graph, QUESTIONS[i % len(QUESTIONS)], sid)
        session = AgentSession.objects.get(graph=graph, external_id=sid)
        item = UseItem("node", body["items"][0]["node"], "explicit", body["injection"])
        feedback_actions.do_record_uses(session, [item], actor=ada)
        feedback_actions.do_apply_outcome(graph, sid, "accepted", actor=ada)
        positives.append(body["confidence"])
    for i, query in enumerate(OFF_TOPIC):
        body = _ask(client, graph, query, f"off-{i}")
        assert feedback_actions.do_apply_outcome(graph, f"off-{i}", "rejected", actor=ada).status == "applied"
        negatives.append(body["confidence"])
    _ask(client, graph, "an answer nobody reported on", "open")  # unlabelled: left out
    return positives, negatives


def test_samples_split_the_logged_answers(rg, logged):
    positives, negatives = logged
    found = calibration.samples(rg["graph"])
    assert sorted(found.positives) == sorted(positives) and sorted(found.negatives) == sorted(negatives)
    assert calibration.samples(rg["graph"], model="another-model").positives == []  # per embedder


def test_the_command_writes_the_calibrated_floor_as_an_audited_revision(rg, logged):
    positives, negatives = logged
    expected = floor_at_recall(positives, negatives, 0.9)
    out = StringIO()
    call_command("calibrate_floor", "--graph", rg["graph"].slug, "--org", "acme", "--target-recall", "0.9", stdout=out)
    current = rg["graph"].current_policy()
    assert current.revision == 2 and current.abstain_floor == expected.floor > 0
    assert current.note.startswith(f"calibrate_floor: {expected.floor} keeps")
    assert "Written as policy revision r2" in out.getvalue()
    event = AuditEvent.objects.filter(action="policy.update").latest("seq")
    assert event.actor == "command:calibrate_floor"
    assert event.payload["changes"] == {"abstain_floor": {"before": 0.0, "after": expected.floor}}
    # Again: answers logged under the floor do not count (they are censored), so the floor stays.
    call_command("calibrate_floor", "--graph", rg["graph"].slug, "--target-recall", "0.9", stdout=StringIO())
    assert rg["graph"].current_policy().revision == 2


def test_dry_run_and_refusals_write_nothing(rg, logged):
    out = StringIO()
    call_command("calibrate_floor", "--graph", rg["graph"].slug, "--dry-run", stdout=out)
    assert "Dry run: nothing written." in out.getvalue()
    with pytest.raises(CommandError, match="target_recall"):
        call_command("calibrate_floor", "--graph", rg["graph"].slug, "--target-recall", "1.5", stdout=StringIO())
    assert PolicyRevision.objects.filter(graph=rg["graph"]).count() == 1


def test_too_few_useful_answers_is_refused_naming_sessions(rg, api, ada):
    _ask(api(ada), rg["graph"], QUESTIONS[0], "lonely")
    with pytest.raises(CommandError, match="sessions: Only 0 logged answer"):
        call_command("calibrate_floor", "--graph", rg["graph"].slug, stdout=StringIO())
    assert PolicyRevision.objects.filter(graph=rg["graph"]).count() == 1


def test_the_tune_page_calibrates_for_operators_only(client, rg, logged, oscar, rita, mallory):
    positives, negatives = logged
    graph = rg["graph"]
    url = f"/g/{graph.pk}/tune/calibrate/"
    client.force_login(oscar)
    page = client.get(f"/g/{graph.pk}/tune/").content.decode()
    assert 'id="calibrate-form"' in page and 'name="abstain_floor"' in page
    bad = client.post(url, {"target_recall": "lots"}, follow=True)
    assert "Abstention floor not calibrated: target_recall" in bad.content.decode()
    assert graph.current_policy().revision == 1
    response = client.post(url, {"target_recall": "0.95"}, follow=True)
    floor = floor_at_recall(positives, negatives, 0.95).floor
    assert f"Abstention floor calibrated and saved as r2: floor {floor}" in response.content.decode()
    assert graph.current_policy().abstain_floor == floor
    assert AuditEvent.objects.filter(action="policy.update").latest("seq").actor == "user:oscar"
    for user, status in ((rita, 403), (mallory, 404)):
        client.force_login(user)
        assert client.post(url, {"target_recall": "0.5"}).status_code == status
    assert graph.current_policy().revision == 2


def test_a_floor_set_by_hand_is_validated_like_every_number(rg, oscar):
    with pytest.raises(Exception):  # noqa: B017 - the database's check constraint refuses it too
        actions.do_set_policy(rg["graph"], {"abstain_floor": 1.5}, actor=oscar)
