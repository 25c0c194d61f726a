"""Every graph-core endpoint: another organization's user gets 404, a reviewer's write gets 403."""

import pytest

from graphadmin.models import AuditEvent, Edge, EdgeType, Graph, Node, PolicyRevision


def _urls(graph, nodes):
    g = graph.pk
    edge = Edge.objects.filter(graph=graph).first()
    etype = EdgeType.objects.filter(graph=graph).first()
    return {
        "graph": f"/api/graphs/{g}/",
        "nodes": f"/api/graphs/{g}/nodes/",
        "node": f"/api/graphs/{g}/nodes/{nodes['a'].pk}/",
        "edges": f"/api/graphs/{g}/edges/",
        "edge": f"/api/graphs/{g}/edges/{edge.pk}/",
        "edge_types": f"/api/graphs/{g}/edge-types/",
        "edge_type": f"/api/graphs/{g}/edge-types/{etype.pk}/",
        "policy": f"/api/graphs/{g}/policy/",
        "revisions": f"/api/graphs/{g}/policy/revisions/",
    }


def test_outsider_gets_404_on_every_read(api, acme_graph, small_graph, mallory):
    client = api(mallory)
    for name, url in _urls(acme_graph, small_graph).items():
        assert client.get(url).status_code == 404, name
    assert client.get("/api/audit/verify/?organization=acme").status_code == 404
    assert client.get("/api/graphs/").json()["results"] == []


def test_outsider_gets_404_on_every_write(api, acme_graph, small_graph, mallory):
    client = api(mallory)
    urls = _urls(acme_graph, small_graph)
    assert client.post(urls["nodes"], {"key": "x", "title": "X"}, format="json").status_code == 404
    assert client.patch(urls["node"], {"title": "pwned"}, format="json").status_code == 404
    assert client.delete(urls["edge"]).status_code == 404
    assert client.patch(urls["edge_type"], {"priority": 0.9}, format="json").status_code == 404
    assert client.patch(urls["policy"], {"learning_rate": 0.2}, format="json").status_code == 404
    assert client.delete(urls["graph"]).status_code == 404
    assert Node.objects.get(pk=small_graph["a"].pk).title == "A"
    assert PolicyRevision.objects.filter(graph=acme_graph).count() == 1


def test_members_of_every_role_read(api, acme_graph, small_graph, rita, ana, oscar, alice):
    for user in (rita, ana, oscar, alice):
        client = api(user)
        for name, url in _urls(acme_graph, small_graph).items():
            assert client.get(url).status_code == 200, (user.username, name)


def test_anonymous_and_bad_tokens_are_challenged(api, acme_graph):
    response = api().get(f"/api/graphs/{acme_graph.pk}/")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    bad = api().get(f"/api/graphs/{acme_graph.pk}/", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert bad.status_code == 401


@pytest.mark.parametrize("user_fixture", ["rita", "ana"])
def test_reader_roles_get_403_on_writes(request, api, acme_graph, small_graph, user_fixture):
    client = api(request.getfixturevalue(user_fixture))
    urls = _urls(acme_graph, small_graph)
    before = (Node.objects.count(), Edge.objects.count(), AuditEvent.objects.count())
    assert client.post(urls["nodes"], {"key": "x", "title": "X"}, format="json").status_code == 403
    assert client.patch(urls["node"], {"title": "changed"}, format="json").status_code == 403
    assert client.delete(urls["node"]).status_code == 403
    edge_body = {"source": small_graph["c"].pk, "target": small_graph["a"].pk, "edge_type": "related"}
    assert client.post(urls["edges"], edge_body, format="json").status_code == 403
    assert client.patch(urls["edge_type"], {"priority": 0.9}, format="json").status_code == 403
    assert client.post(urls["edge_types"], {"name": "cites"}, format="json").status_code == 403
    assert client.patch(urls["policy"], {"learning_rate": 0.2}, format="json").status_code == 403
    assert client.put(urls["policy"], {"learning_rate": 0.2}, format="json").status_code == 403
    assert client.patch(urls["graph"], {"name": "x"}, format="json").status_code == 403
    assert client.delete(urls["graph"]).status_code == 403
    assert (
        client.post("/api/graphs/", {"organization": "acme", "slug": "g2", "name": "G2"}, format="json").status_code
        == 403
    )
    assert (Node.objects.count(), Edge.objects.count(), AuditEvent.objects.count()) == before
    assert not Node.objects.filter(archived=True).exists()


def test_operator_writes_graph_contents_but_not_graphs(api, acme_graph, small_graph, oscar):
    client = api(oscar)
    urls = _urls(acme_graph, small_graph)
    assert client.post(urls["nodes"], {"key": "d", "title": "D"}, format="json").status_code == 201
    assert client.delete(urls["node"]).status_code == 204
    assert Node.objects.get(pk=small_graph["a"].pk).archived  # archived, not deleted
    assert (
        client.post("/api/graphs/", {"organization": "acme", "slug": "g2", "name": "G2"}, format="json").status_code
        == 403
    )


def test_admin_creates_graph_with_policy_types_and_audit(api, acme, alice):
    response = api(alice).post("/api/graphs/", {"organization": "acme", "slug": "g2", "name": "G2"}, format="json")
    assert response.status_code == 201, response.json()
    graph = Graph.objects.get(pk=response.json()["id"])
    assert graph.current_policy().revision == 1
    assert set(EdgeType.objects.filter(graph=graph).values_list("name", flat=True)) >= {
        "related",
        "derived_from",
        "depends_on",
    }
    assert AuditEvent.objects.filter(organization=acme, action="graph.create").count() == 1


def test_admin_cannot_create_graph_in_foreign_org(api, acme, globex, alice):
    response = api(alice).post("/api/graphs/", {"organization": "globex", "slug": "g", "name": "G"}, format="json")
    assert response.status_code == 400 and "organization" in response.json()
    assert not Graph.objects.filter(organization=globex).exists()


def test_list_endpoints_have_bounded_queries(api, acme_graph, small_graph, rita, django_assert_max_num_queries):
    client = api(rita)
    for url in (f"/api/graphs/{acme_graph.pk}/nodes/", f"/api/graphs/{acme_graph.pk}/edges/", "/api/graphs/"):
        with django_assert_max_num_queries(6):
            assert client.get(url).status_code == 200


# Every role x act cell (graphadmin.tenancy): the table, then each cell through the API or a page.
# "report_own" is a report on a session the user owns; "report_other" on the agent ada's session.
MATRIX = {
    #               read   retrieve context report_own report_other analyze tune  operate administer
    "agent": (False, True, True, True, False, False, False, False, False),
    "reviewer": (True, True, False, False, False, False, False, False, False),
    "analyst": (True, True, False, False, False, True, False, False, False),
    "operator": (True, True, True, True, True, True, True, True, False),
    "admin": (True, True, True, True, True, True, True, True, True),
}
ACTS = ("read", "retrieve", "context", "report_own", "report_other", "analyze", "tune", "operate", "administer")
CAST = {"agent": "abe", "reviewer": "rita", "analyst": "ana", "operator": "oscar", "admin": "alice"}


def test_the_table_gives_each_role_its_acts():
    from graphadmin.models import ROLES
    from graphadmin.tenancy import allows, may_act_on_session

    assert set(MATRIX) == set(ROLES)
    for role, cells in MATRIX.items():
        expected = dict(zip(ACTS, cells, strict=True))
        for act in ("read", "retrieve", "context", "analyze", "tune", "operate", "administer"):
            assert allows(role, act) is expected[act], (role, act)
        assert may_act_on_session(role, 7, 7) is expected["report_own"], role
        assert may_act_on_session(role, 7, 8) is expected["report_other"], role
        assert may_act_on_session(role, 7, None) is (expected["report_other"]), role  # sessions without owner
    assert not allows(None, "read") and not may_act_on_session(None, 7, 7)


def _cell(client, act, graph, nodes, own_session) -> int:
    g = graph.pk
    if act == "read":
        return client.get(f"/api/graphs/{g}/nodes/").status_code
    if act == "retrieve":
        return client.post(f"/api/graphs/{g}/search/", {"query": "note a"}, format="json").status_code
    if act == "context":
        return client.post(
            f"/api/graphs/{g}/context/", {"session": "new", "query": "note a"}, format="json"
        ).status_code
    if act in ("report_own", "report_other"):
        session = own_session if act == "report_own" else "ada-s"
        return client.post(f"/api/graphs/{g}/sessions/{session}/outcome/", {"outcome": "accepted"}, format="json")
    if act == "analyze":
        return client.get(f"/g/{g}/impact/").status_code
    if act == "tune":
        return client.patch(f"/api/graphs/{g}/policy/", {"learning_rate": 0.2}, format="json").status_code
    if act == "operate":
        return client.post(f"/api/graphs/{g}/normalize/").status_code
    return client.patch(f"/api/graphs/{g}/", {"description": "changed"}, format="json").status_code


@pytest.mark.parametrize("role", list(MATRIX))
@pytest.mark.parametrize("act", ACTS)
def test_every_role_and_act_through_the_api(request, settings, api, acme_graph, small_graph, ada, role, act):
    from tests.feedback.conftest import make_session

    settings.EMBEDDER = "graphadmin.embeddings.HashingEmbedder"
    user = request.getfixturevalue(CAST[role])
    n = small_graph
    make_session(acme_graph, "ada-s", [(n["b"], None, True)], ada)
    make_session(acme_graph, "own-s", [(n["b"], None, True)], user)
    client = api(user)
    client.force_login(user)  # the dashboard page of ``analyze``
    answer = _cell(client, act, acme_graph, n, "own-s")
    status = answer if isinstance(answer, int) else answer.status_code
    allowed = dict(zip(ACTS, MATRIX[role], strict=True))[act]
    assert (status < 400) is allowed, (role, act, status)
    if not allowed:
        assert status == 403, (role, act, status)


def test_an_agent_reads_no_page_and_no_other_record(api, client, acme_graph, small_graph, abe):
    """The service account lists its graphs (to address them) and nothing else of the organization."""
    agent = api(abe)
    assert [g["id"] for g in agent.get("/api/graphs/").json()["results"]] == [acme_graph.pk]
    assert agent.get(f"/api/graphs/{acme_graph.pk}/edges/").status_code == 403
    assert agent.get(f"/api/graphs/{acme_graph.pk}/metrics/").status_code == 403
    assert agent.get("/api/audit/").json()["results"] == []
    assert agent.get("/api/audit/verify/?organization=acme").status_code == 404
    client.force_login(abe)
    assert client.get(f"/g/{acme_graph.pk}/").status_code == 403
    assert "Acme memory" not in client.get("/").content.decode()
