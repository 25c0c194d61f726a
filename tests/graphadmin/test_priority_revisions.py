"""Priority sets versioned with the policy: an edge-type priority change (tune page, API, admin) is a policy
revision that records the set and keeps the note typed with it; it is listed, audited, previewed, restored,
marked on the learning chart and measured by "did it help"."""

from datetime import UTC, datetime, timedelta

from feedback import revisions
from feedback.queries import reads
from graphadmin import actions, audit, clock
from graphadmin.models import AuditEvent, EdgeType, PolicyRevision
from graphadmin.views import audit_summary
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare


def _types(graph):
    return {t.name: t for t in EdgeType.objects.filter(graph=graph)}


def _tune_post(graph, **over):
    current = graph.current_policy()
    data = {**current.numbers(), "note": "", **{f"priority_{t.pk}": t.priority for t in _types(graph).values()}}
    data.update(over)
    return data


def test_a_new_graph_records_its_priority_set_in_r1(rg):
    r1 = rg["graph"].current_policy()
    assert r1.revision == 1
    assert r1.priority_set() == {t.pk: t.priority for t in _types(rg["graph"]).values()}


def test_the_tune_page_writes_one_revision_with_the_priorities_and_the_note(client, rg, oscar):
    g = rg["graph"]
    depends = _types(g)["depends_on"]
    client.force_login(oscar)
    data = _tune_post(g, **{f"priority_{depends.pk}": 0.5, "note": "dependencies first"})
    response = client.post(f"/g/{g.pk}/tune/", data, follow=True)
    assert "Saved as r2: 0 policy value(s), 1 priority(ies)." in response.content.decode()
    r2 = g.current_policy()
    assert r2.revision == 2 and r2.note == "dependencies first"
    assert r2.priority_set()[depends.pk] == 0.5
    assert r2.numbers() == PolicyRevision.objects.get(graph=g, revision=1).numbers()
    event = AuditEvent.objects.get(action="policy.update")
    assert event.payload == {
        "revision": 2,
        "changes": {},
        "note": "dependencies first",
        "priorities": {"depends_on": {"before": 0.0, "after": 0.5}},
    }
    assert "priority depends_on 0 → 0.5" in audit_summary(event.payload)
    assert AuditEvent.objects.filter(action="edgetype.priority.update").count() == 1
    # Listed among the revisions with what changed.
    page = client.get(f"/g/{g.pk}/tune/").content.decode()
    assert "<code>priority depends_on</code>: 0.0 → 0.5" in page and "dependencies first" in page
    assert audit.verify(g.organization).ok


def test_an_api_priority_change_is_a_revision_with_a_note_and_the_policy_api_shows_the_set(api, acme_graph, oscar):
    et = EdgeType.objects.get(graph=acme_graph, name="depends_on")
    r = api(oscar).patch(f"/api/graphs/{acme_graph.pk}/edge-types/{et.pk}/", {"priority": 0.4}, format="json")
    assert r.status_code == 200, r.json()
    current = acme_graph.current_policy()
    assert current.revision == 2 and current.note == "priority of depends_on: 0 → 0.4"
    body = api(oscar).get(f"/api/graphs/{acme_graph.pk}/policy/").json()
    assert body["revision"] == 2 and body["priorities"]["depends_on"] == 0.4
    # The policy API changes priorities and numbers in one revision; an unknown type is a 400, nothing written.
    url = f"/api/graphs/{acme_graph.pk}/policy/"
    bad = api(oscar).patch(url, {"priorities": {"nope": 0.1}, "learning_rate": 0.2}, format="json")
    assert bad.status_code == 400 and "priorities" in bad.json()
    bad = api(oscar).patch(url, {"priorities": {"related": 3}}, format="json")
    assert bad.status_code == 400 and "priorities" in bad.json()
    many = {f"t{n}": 0.1 for n in range(201)}
    bad = api(oscar).patch(url, {"priorities": many}, format="json")
    assert bad.status_code == 400 and "At most 200" in str(bad.json()["priorities"])
    assert acme_graph.current_policy().revision == 2
    ok = api(oscar).patch(url, {"priorities": {"related": -0.5}, "learning_rate": 0.2, "note": "n"}, format="json")
    assert ok.status_code == 201, ok.json()
    assert ok.json()["revision"] == 3 and ok.json()["priorities"]["related"] == -0.5
    assert EdgeType.objects.get(graph=acme_graph, name="related").priority == -0.5


def test_the_same_priority_again_writes_no_revision(api, acme_graph, oscar):
    et = EdgeType.objects.get(graph=acme_graph, name="depends_on")
    r = api(oscar).patch(f"/api/graphs/{acme_graph.pk}/edge-types/{et.pk}/", {"priority": 0.0}, format="json")
    assert r.status_code == 200
    assert acme_graph.current_policy().revision == 1
    assert not AuditEvent.objects.filter(action__in=["policy.update", "edgetype.priority.update"]).exists()


def test_restoring_a_revision_restores_its_priority_set(client, rg, oscar):
    g = rg["graph"]
    types = _types(g)
    assemble_context(prepare(g, RetrievalRequest(session="w", query="vector search in postgres", budget=2)))
    actions.do_set_policy(
        g,
        {"coef_priority": 1.0},
        actor=oscar,
        note="priorities matter",
        priorities={types["depends_on"]: 0.8, types["related"]: -0.3},
    )
    client.force_login(oscar)
    preview = client.get(f"/g/{g.pk}/tune/revisions/1/preview/", HTTP_HX_REQUEST="true")
    assert preview.context["priority_changes"] == {"depends_on": (0.8, 0.0), "related": (-0.3, 0.0)}
    assert preview.context["result"]["aggregate"]["injections"] == 1
    assert "priority of edge type <code>depends_on</code>" in preview.content.decode()
    assert PolicyRevision.objects.filter(graph=g).count() == 2  # the preview writes nothing
    response = client.post(f"/g/{g.pk}/tune/revisions/1/restore/", {"note": "back to flat"}, follow=True)
    assert "Restored r1 as r3: 1 value(s) and 2 priority(ies) changed (back to flat)." in response.content.decode()
    assert {n: t.priority for n, t in _types(g).items() if n in ("depends_on", "related")} == {
        "depends_on": 0.0,
        "related": 0.0,
    }
    r3 = g.current_policy()
    assert r3.revision == 3 and r3.coef_priority == 0.15 and r3.note == "back to flat"
    assert r3.priority_set() == PolicyRevision.objects.get(graph=g, revision=1).priority_set()
    event = AuditEvent.objects.filter(action="policy.update").order_by("-seq").first()
    assert event.payload["priorities"] == {
        "depends_on": {"before": 0.8, "after": 0.0},
        "related": {"before": -0.3, "after": 0.0},
    }
    # Restoring r2 brings its set back.
    client.post(f"/g/{g.pk}/tune/revisions/2/restore/")
    assert _types(g)["depends_on"].priority == 0.8 and g.current_policy().revision == 4


def test_a_revision_without_a_recorded_set_restores_numbers_only(client, rg, oscar):
    g = rg["graph"]
    PolicyRevision.objects.filter(graph=g, revision=1).update(priorities=None)  # as before this change
    types = _types(g)
    actions.do_set_policy(g, {"learning_rate": 0.3}, actor=oscar, priorities={types["depends_on"]: 0.6})
    client.force_login(oscar)
    preview = client.get(f"/g/{g.pk}/tune/revisions/1/preview/", HTTP_HX_REQUEST="true").content.decode()
    assert "Its priorities were not recorded" in preview
    response = client.post(f"/g/{g.pk}/tune/revisions/1/restore/", follow=True)
    assert "its priorities were not recorded, so they stay" in response.content.decode()
    assert _types(g)["depends_on"].priority == 0.6 and g.current_policy().learning_rate == 0.1


def test_a_priority_revision_is_marked_on_the_learning_chart_and_measured(rg, oscar):
    g = rg["graph"]
    depends = _types(g)["depends_on"]
    when = datetime.now(UTC)
    with clock.using(clock.SimulatedClock(when)):
        actions.do_update_edge_type(depends, actor=oscar, priority=0.5, note="dependencies first")
    marks = reads.learning_marks(g, when - timedelta(days=1), when + timedelta(days=1))
    assert [(m[0], m[2], m[3]) for m in marks] == [("policy", 2, "dependencies first")]
    effects = revisions.revision_effects(g)
    assert [row["revision"].revision for row in effects] == [2, 1]
    assert effects[0]["revision"].priority_set()[depends.pk] == 0.5
