"""The session pages: the filterable list and one session's story in time order; tenancy and roles as elsewhere."""

from datetime import date

import pytest

from feedback import actions
from feedback.models import AgentSession
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare


@pytest.fixture
def story(rg, ana):
    """Session s-1: one injection for a question, a use report, an outcome; s-2: an injection only."""
    g, nodes = rg["graph"], rg["nodes"]
    ctx = assemble_context(prepare(g, RetrievalRequest(session="s-1", query="vector search in postgres", budget=2)))
    given = [c for c in ctx.injection.candidates.all() if c.selected]
    actions.do_record_uses(ctx.injection.session, [actions.UseItem("node", given[0].node_id, "explicit")], actor=ana)
    actions.do_apply_outcome(g, "s-1", "accepted", actor=ana)
    assemble_context(prepare(g, RetrievalRequest(session="s-2", query="graph decay periods", budget=2)))
    return {"graph": g, "injection": ctx.injection, "given": given, "nodes": nodes}


def test_session_page_tells_the_session_in_time_order(client, rita, story):
    client.force_login(rita)
    g = story["graph"]
    r = client.get(f"/g/{g.pk}/sessions/s-1/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "vector search in postgres" in html
    assert f"/g/{g.pk}/injections/{story['injection'].pk}/" in html
    assert story["given"][0].node.title in html
    kinds = [e["kind"] for e in r.context["events"]]
    assert kinds[0] == "injection" and "uses" in kinds and "outcome" in kinds
    assert kinds.count("batch") == 2  # the reinforce batch of the use report and the outcome batch
    times = [e["at"] for e in r.context["events"]]
    assert times == sorted(times)
    batches = [e for e in r.context["events"] if e["kind"] == "batch"]
    assert {b["batch"].kind for b in batches} == {"reinforce", "outcome"}
    assert all(b["changes"] for b in batches)
    for b in batches:
        assert f"/g/{g.pk}/batches/{b['batch'].pk}/" in html
    # Cut candidates are counted and the best are listed.
    inj = r.context["events"][0]
    assert inj["given"] and inj["n_cut"] == story["injection"].candidates.filter(selected=False).count()


def test_session_list_filters(client, rita, story):
    client.force_login(rita)
    g = story["graph"].pk
    listed = lambda query: [s.external_id for s in client.get(f"/g/{g}/sessions/{query}").context["page"]]  # noqa: E731
    assert sorted(listed("")) == ["s-1", "s-2"]
    assert listed("?outcome=accepted") == ["s-1"]
    assert listed("?outcome=none") == ["s-2"]
    assert listed("?q=DECAY") == ["s-2"]
    today = date.today().isoformat()
    assert sorted(listed(f"?since={today}&until={today}")) == ["s-1", "s-2"]
    assert listed("?until=2000-01-01") == []
    r = client.get(f"/g/{g}/sessions/?since=yesterday")
    assert r.status_code == 200 and "since: expected a date" in r.content.decode()
    assert len(r.context["page"].object_list) == 2  # the bad filter is named and not applied
    html = client.get(f"/g/{g}/sessions/").content.decode()
    assert f'href="/g/{g}/sessions/s-1/"' in html and "vector search in postgres" in html


def test_links_to_the_session(client, rita, story):
    client.force_login(rita)
    g = story["graph"]
    link = f'href="/g/{g.pk}/sessions/s-1/"'
    assert link in client.get(f"/g/{g.pk}/explain/").content.decode()
    batch = AgentSession.objects.get(graph=g, external_id="s-1").batches.first()
    assert link in client.get(f"/g/{g.pk}/batches/{batch.pk}/").content.decode()
    node = story["given"][0].node_id
    assert link in client.get(f"/g/{g.pk}/nodes/{node}/").content.decode()


def test_session_pages_tenancy(client, mallory, story, globex_graph):
    client.force_login(mallory)
    g = story["graph"].pk
    assert client.get(f"/g/{g}/sessions/").status_code == 404
    assert client.get(f"/g/{g}/sessions/s-1/").status_code == 404
    # Their own graph has no session s-1: 404, not another org's session.
    assert client.get(f"/g/{globex_graph.pk}/sessions/s-1/").status_code == 404


def test_session_pages_need_a_login(client, story):
    g = story["graph"].pk
    assert client.get(f"/g/{g}/sessions/").status_code == 302
    assert client.get(f"/g/{g}/sessions/s-1/").status_code == 302
