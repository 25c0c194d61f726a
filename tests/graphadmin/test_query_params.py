"""Query parameters parsed with int() or as dates answer a 400 naming the parameter (API) or a message on
the page (dashboard), never a 500 (issue 15 item 11: '²'.isdigit() is true and int('²') raises)."""

import pytest

from feedback.models import AgentSession, ContextInjection


@pytest.fixture
def injection(acme_graph, small_graph):
    session = AgentSession.objects.create(graph=acme_graph, external_id="s1")
    return ContextInjection.objects.create(
        graph=acme_graph, session=session, policy_revision=acme_graph.current_policy(), query="q"
    )


@pytest.mark.parametrize("value", ["²", "abc", "-1", "99999999999999999999999"])
def test_batches_api_graph_parameter(api, acme_graph, alice, value):
    response = api(alice).get("/api/batches/", {"graph": value})
    assert response.status_code == 400 and "graph" in response.json(), response.content


@pytest.mark.parametrize("value", ["²", "x"])
def test_explain_api_ranks(api, alice, injection, value):
    response = api(alice).get(f"/api/injections/{injection.pk}/explain/", {"i": value})
    assert response.status_code == 400 and "i" in response.json()


def test_explain_list_node_filter(client, acme_graph, injection, alice):
    client.force_login(alice)
    for value in ("²", "12345678901234567890123", "a"):
        assert client.get(f"/g/{acme_graph.pk}/explain/", {"node": value}).status_code == 200


@pytest.mark.parametrize("page", ["explain", "batches", "sessions"])
def test_dashboard_bad_date_is_a_message(client, acme_graph, injection, alice, page):
    client.force_login(alice)
    response = client.get(f"/g/{acme_graph.pk}/{page}/", {"since": "notadate", "until": "2026-13-45"})
    assert response.status_code == 200
    text = response.content.decode()
    assert "since" in text and "YYYY-MM-DD" in text and "not applied" in text


def test_injection_page_bad_rank_is_a_message(client, acme_graph, injection, alice):
    client.force_login(alice)
    response = client.get(f"/g/{acme_graph.pk}/injections/{injection.pk}/", {"i": "²", "j": "1"})
    assert response.status_code == 200
    assert "whole number" in response.content.decode()


@pytest.mark.parametrize("value", ["²", "abc", "9" * 30])
def test_graph_json_bad_number_is_a_400(client, acme_graph, small_graph, alice, value):
    client.force_login(alice)
    response = client.get(f"/g/{acme_graph.pk}/nodes/{small_graph['a'].pk}/graph.json", {"hops": value})
    assert response.status_code == 400 and "hops" in response.json()


@pytest.mark.parametrize(
    "path, params",
    [
        ("/api/audit/", {"action": "a\x00b"}),
        ("/api/batches/", {"session": "\x00"}),
        ("/api/graphs/", {"x\x00": "1"}),
    ],
)
def test_nul_in_a_query_parameter_is_a_400(api, acme_graph, alice, path, params):
    response = api(alice).get(path, params)
    assert response.status_code == 400 and "NUL" in str(response.json()), response.content


def test_nul_in_a_dashboard_filter_is_a_400(client, acme_graph, alice):
    client.force_login(alice)
    response = client.get(f"/g/{acme_graph.pk}/explain/", {"session": "s\x00"})
    assert response.status_code == 400 and b"session" in response.content


def test_nul_in_an_edge_type_name_is_a_400(api, acme_graph, small_graph, oscar):
    body = {"source": small_graph["a"].pk, "target": small_graph["c"].pk, "edge_type": "rel\x00ated"}
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/edges/", body, format="json")
    assert response.status_code == 400 and "edge_type" in response.json(), response.content
