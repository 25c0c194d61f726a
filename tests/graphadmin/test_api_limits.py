"""Every list endpoint has a documented maximum for ?limit= (API_MAX_PAGE_SIZE): above it, or not a whole
number, the answer is a 400 naming the parameter (issue 15 item 9: ?limit=100000000 returned every node)."""

import pytest
from django.conf import settings

from graphadmin.models import Node

LISTS = [
    "/api/graphs/",
    "/api/graphs/{g}/nodes/",
    "/api/graphs/{g}/edges/",
    "/api/graphs/{g}/edge-types/",
    "/api/graphs/{g}/policy/revisions/",
    "/api/audit/",
    "/api/batches/",
]


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("limit", [str(settings.API_MAX_PAGE_SIZE + 1), "100000000", "abc", "²", "0", "-5"])
def test_limit_out_of_bounds_is_a_400(api, acme_graph, small_graph, alice, path, limit):
    response = api(alice).get(path.format(g=acme_graph.pk), {"limit": limit})
    assert response.status_code == 400, response.content
    assert "limit" in response.json()


@pytest.mark.parametrize("offset", ["-1", "abc", str(2**63), "9" * 5000])
def test_offset_out_of_bounds_is_a_400(api, acme_graph, small_graph, alice, offset):
    response = api(alice).get(f"/api/graphs/{acme_graph.pk}/nodes/", {"offset": offset})
    assert response.status_code == 400 and "offset" in response.json(), response.content


def test_limit_at_the_maximum_pages(api, acme_graph, alice):
    Node.objects.bulk_create(
        Node(graph=acme_graph, key=f"n{i}", title=f"N{i}") for i in range(settings.API_MAX_PAGE_SIZE + 5)
    )
    response = api(alice).get(f"/api/graphs/{acme_graph.pk}/nodes/", {"limit": settings.API_MAX_PAGE_SIZE})
    assert response.status_code == 200
    body = response.json()
    assert len(body["results"]) == settings.API_MAX_PAGE_SIZE and body["next"]
    assert len(api(alice).get(f"/api/graphs/{acme_graph.pk}/nodes/").json()["results"]) == settings.API_PAGE_SIZE


def test_schema_documents_the_bounds(api, alice):
    schema = api(alice).get("/api/schema/", {"format": "json"}).json()
    params = {p["name"]: p["schema"] for p in schema["paths"]["/api/graphs/{graph_pk}/nodes/"]["get"]["parameters"]}
    assert params["limit"]["maximum"] == settings.API_MAX_PAGE_SIZE and params["limit"]["minimum"] == 1
    assert params["offset"]["minimum"] == 0
    # JSON only: no format-suffix twins of every path.
    assert not [p for p in schema["paths"] if "{format}" in p]
