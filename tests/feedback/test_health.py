"""Learning health (issue 39, item 2): each score component's share of candidates whose order it changes (and of
selected items it keeps selected), recomputed here from the candidate log row by row; the share reached through a
link; weights moved in 7 and 30 days; link types still at their default; a flag in plain words for each inert
part. The same figures in the API (every role of the organization; another's graph a 404), on the page (linked
from the overview) and in ``manage.py graph_health``."""

import io
import json

import pytest
from django.core.management import call_command

from feedback import actions, health
from feedback.models import InjectionCandidate
from graphadmin.models import Edge, EdgeType, Node
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare


@pytest.fixture
def history(rg, ada, oscar):
    """Three retrievals on ``rg`` (one from start node a, so links bring candidates), a use and an outcome, and a
    link type whose one link never moved."""
    g, nodes = rg["graph"], rg["nodes"]
    for n, kwargs in enumerate([{}, {"start_nodes": [nodes["a"].pk], "k": 1}, {}]):
        ctx = assemble_context(
            prepare(g, RetrievalRequest(session=f"s{n}", query="vector search in postgres", budget=4, **kwargs))
        )
        if n == 0:
            first = next(c for c in ctx.injection.candidates.all() if c.selected)
            actions.do_record_uses(
                ctx.injection.session, [actions.UseItem("node", first.node_id, "explicit")], actor=oscar
            )
            actions.do_apply_outcome(g, "s0", "accepted", actor=oscar)
    cites = EdgeType.objects.create(graph=g, name="cites", priority=0.0)
    spare = Node.objects.create(graph=g, key="spare", title="Spare", text="nothing")
    Edge.objects.create(graph=g, source=nodes["a"], target=spare, edge_type=cites)
    return rg


def _recomputed(graph) -> dict[str, tuple[int, int, int, int]]:
    """Per component (candidates, moved, selected, selected moved), from the log in Python: the reference."""
    by_injection: dict[int, list] = {}
    for c in InjectionCandidate.objects.filter(graph=graph):
        by_injection.setdefault(c.injection_id, []).append(c)
    out: dict[str, list[int]] = {}
    for cands in by_injection.values():
        n_selected = sum(c.selected for c in cands)

        def order(score, cands=cands):
            return [c.node_id for c in sorted(cands, key=lambda c: (-round(score(c), 12), c.hops, c.node_id))]

        base = order(lambda c: c.total)
        for name in health.COMPONENTS:
            if not all(name in c.components for c in cands):
                continue
            without = order(lambda c, name=name: c.total - c.components[name]["contribution"])
            row = out.setdefault(name, [0, 0, 0, 0])
            for c in cands:
                moved = base.index(c.node_id) != without.index(c.node_id)
                row[0] += 1
                row[1] += moved
                row[2] += c.selected
                row[3] += c.selected and base.index(c.node_id) < n_selected <= without.index(c.node_id)
    return {k: tuple(v) for k, v in out.items()}


def test_component_shares_match_the_log_recomputed(history):
    g = history["graph"]
    data = health.graph_health(g)
    assert data["injections"] == 3
    reference = _recomputed(g)
    assert reference, "the log has components"
    for c in data["components"]:
        if c["component"] not in reference:
            assert c["candidates"] == 0
            continue
        candidates, moved, selected, selected_moved = reference[c["component"]]
        assert c["candidates"] == candidates and c["selected"] == selected, c
        assert c["changed_order"] == pytest.approx(moved / candidates), c
        assert c["changed_selection"] == pytest.approx(selected_moved / selected), c
        assert c["inert"] == (moved == 0)
        if c["inert"]:
            assert any(
                f"({c['component']}) has changed no ranking in the last 3 retrievals" in f for f in data["flags"]
            )
    assert any(c["changed_order"] for c in data["components"])  # the question's similarity orders something


def test_reach_moved_weights_and_link_types(history):
    g = history["graph"]
    data = health.graph_health(g)
    log = list(InjectionCandidate.objects.filter(graph=g).values_list("features", "selected"))
    through = [f for f, _s in log if (f.get("path_hops") or 0) > 0]
    assert through, "the start node's retrieval reaches candidates along links"
    assert data["reach"]["through_edge"] == pytest.approx(len(through) / len(log))
    by_type = {r["edge_type"]: r["candidates"] for r in data["reach"]["by_edge_type"]}
    assert sum(by_type.values()) == len(through)
    assert by_type == {t: sum(1 for f in through if f["edge_type"] == t) for t in by_type}
    by_entry = {r["entry"]: r["candidates"] for r in data["reach"]["by_entry"]}
    assert by_entry["expansion"] == len(through) and sum(by_entry.values()) == len(log)
    moved = {(m["target"], m["field"]): m for m in data["weights_moved"]}
    node_fb = moved[("node", "feedback_weight")]
    assert node_fb["share_7d"] > 0 and node_fb["share_30d"] >= node_fb["share_7d"]
    assert {k["kind"] for k in node_fb["by_kind"]} >= {"outcome"}
    types = {t["edge_type"]: t for t in data["edge_types"]}
    assert types["cites"]["never_left_default"] and not types["related"]["never_left_default"]
    assert "The cites links' weights never left their default (0.5): 1 link(s)." in data["flags"]


def test_an_empty_graph_says_there_is_nothing_to_judge(acme_graph):
    data = health.graph_health(acme_graph)
    assert data["injections"] == 0 and data["flags"] == ["No retrieval is logged yet: nothing to judge learning by."]


@pytest.mark.parametrize("who", ["rita", "ana", "oscar", "alice"])
def test_every_role_reads_the_api(request, api, history, who):
    g = history["graph"].pk
    response = api(request.getfixturevalue(who)).get(f"/api/graphs/{g}/health/", {"n": 2})
    assert response.status_code == 200
    body = response.json()
    assert body["injections"] == 2 and body["window"]["n"] == 2
    assert {c["component"] for c in body["components"]} == set(health.COMPONENTS)


def test_the_api_refuses_another_organization_and_a_bad_n(api, history, mallory, rita):
    g = history["graph"].pk
    assert api(mallory).get(f"/api/graphs/{g}/health/").status_code == 404
    assert api(None).get(f"/api/graphs/{g}/health/").status_code in (401, 403)
    for bad in ("0", "abc", str(health.MAX_INJECTIONS + 1)):
        response = api(rita).get(f"/api/graphs/{g}/health/", {"n": bad})
        assert response.status_code == 400 and "n" in response.json(), bad


def test_the_page_is_linked_from_the_overview_and_shows_the_flags(client, history, rita, mallory):
    g = history["graph"].pk
    client.force_login(rita)
    overview = client.get(f"/g/{g}/").content.decode()
    assert f'href="/g/{g}/health/"' in overview
    page = client.get(f"/g/{g}/health/").content.decode()
    assert 'id="health-components"' in page and "The cites links&#x27; weights never left their default" in page
    assert "Expected a whole number" in client.get(f"/g/{g}/health/?n=x").content.decode()
    client.force_login(mallory)
    assert client.get(f"/g/{g}/health/").status_code == 404


def test_the_command_prints_the_same_figures(history):
    g = history["graph"]
    out = io.StringIO()
    call_command("graph_health", str(g.pk), "--json", stdout=out)
    body = json.loads(out.getvalue())
    assert body["flags"] == health.graph_health(g)["flags"]
    text = io.StringIO()
    call_command("graph_health", str(g.pk), stdout=text)
    assert "never left the default" in text.getvalue() and "changed order" in text.getvalue()
