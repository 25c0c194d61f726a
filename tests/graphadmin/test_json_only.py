"""Request bodies are JSON everywhere but the vault import (issue 15 item 9: file parts were accepted on
every endpoint): a form or multipart body is a 415 and writes nothing."""

import pytest

from graphadmin.models import EdgeType, Node, PolicyRevision


@pytest.mark.parametrize("fmt", ["multipart", None])
def test_form_bodies_are_refused(api, acme_graph, small_graph, alice, fmt):
    client = api(alice)
    g = acme_graph.pk
    posts = {
        f"/api/graphs/{g}/nodes/": {"key": "z", "title": "Z"},
        f"/api/graphs/{g}/edge-types/": {"name": "cites"},
        f"/api/graphs/{g}/context/": {"session": "s", "query": "q"},
        f"/api/graphs/{g}/sessions/s/outcome/": {"outcome": "accepted"},
    }
    before = (Node.objects.count(), EdgeType.objects.count(), PolicyRevision.objects.count())
    for path, body in posts.items():
        if fmt == "multipart":
            response = client.post(path, body, format="multipart")
        else:
            response = client.post(path, "key=z&title=Z", content_type="application/x-www-form-urlencoded")
        assert response.status_code == 415, (path, response.content)
    response = client.patch(f"/api/graphs/{g}/policy/", {"learning_rate": 0.2}, format="multipart")
    assert response.status_code == 415
    assert (Node.objects.count(), EdgeType.objects.count(), PolicyRevision.objects.count()) == before


def test_json_still_works(api, acme_graph, alice):
    response = api(alice).post(f"/api/graphs/{acme_graph.pk}/nodes/", {"key": "z", "title": "Z"}, format="json")
    assert response.status_code == 201


def test_schema_offers_only_json_except_the_import(api, alice):
    schema = api(alice).get("/api/schema/", {"format": "json"}).json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if "requestBody" not in operation:
                continue
            kinds = set(operation["requestBody"]["content"])
            expected = {"multipart/form-data"} if path.endswith("/import/") else {"application/json"}
            assert kinds == expected, (method, path, kinds)
