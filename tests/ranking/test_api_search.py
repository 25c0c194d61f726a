"""POST /api/graphs/{id}/search/: hybrid results with every factor, the raw vector score and stable ids."""

import math
from datetime import timedelta

import pytest
from django.utils import timezone

from graphadmin.embeddings import embed_texts
from graphadmin.models import Node, NodeStats

pytestmark = pytest.mark.django_db


def url(graph):
    return f"/api/graphs/{graph.pk}/search/"


def _by_key(body):
    return {x["key"]: x for x in body["results"]}


def test_search_returns_every_factor_and_the_raw_vector_score(rg, api, rita):
    r = api(rita).post(url(rg["graph"]), {"query": "ranking weights", "k": 10}, format="json")
    assert r.status_code == 200, r.content
    results = r.json()["results"]
    assert "x" not in {x["key"] for x in results}  # archived
    assert len(results) == 7
    for x in results:
        assert set(x["components"]) == {
            "vector",
            "lexical",
            "hop",
            "persona",
            "recency",
            "feedback",
            "path",
            "priority",
            "memory",
            "exploration",
            "graph",
        }
        assert x["components"]["vector"]["raw"] == x["vector_score"]
        assert x["stable_id"] == f"node:{x['node']}"
        assert math.fsum(c["contribution"] for c in x["components"].values()) == pytest.approx(x["total"])
        # No anchors: hops count the edges from the entry point (a vector hit is one: 0 hops, factor 1).
        if x["entry"] == "vector":
            assert x["hops"] == 0 and x["path"] == [] and x["components"]["hop"]["raw"] == 1.0
    assert [x["total"] for x in results] == sorted((x["total"] for x in results), reverse=True)


def test_anchors_give_proximity_undirected_and_bounded(rg, api, rita):
    n = rg["nodes"]
    body = (
        api(rita)
        .post(url(rg["graph"]), {"query": "ranking weights", "k": 10, "anchors": [n["e"].pk]}, format="json")
        .json()
    )
    hits = _by_key(body)
    # e's neighbours b and c point *to* e: reachable undirected. a is two hops, g one; d is three (beyond max_hops 2).
    assert hits["e"]["hops"] == 0 and hits["e"]["components"]["hop"]["raw"] == 1.0
    assert hits["b"]["hops"] == 1 and hits["b"]["components"]["hop"]["raw"] == pytest.approx(0.6)
    assert hits["a"]["hops"] == 2 and hits["a"]["components"]["hop"]["raw"] == pytest.approx(0.36)
    assert hits["d"]["hops"] is None and hits["d"]["components"]["hop"]["raw"] == 0.25
    assert hits["f"]["hops"] is None  # only through an archived edge


def test_persona_affinity_by_kind_or_tag(rg, api, rita):
    Node.objects.filter(pk=rg["nodes"]["c"].pk).update(kind="decision")
    Node.objects.filter(pk=rg["nodes"]["d"].pk).update(tags=["Research"])
    body = (
        api(rita)
        .post(
            url(rg["graph"]), {"query": "vector search", "persona": {"decision": 1.0, "research": -0.5}}, format="json"
        )
        .json()
    )
    hits = _by_key(body)
    assert hits["c"]["components"]["persona"] == {"raw": 1.0, "coefficient": 0.1, "contribution": 0.1}
    assert hits["d"]["components"]["persona"]["contribution"] == pytest.approx(-0.05)
    assert hits["b"]["components"]["persona"]["contribution"] == 0.0


def test_recency_uses_the_last_use_or_update(rg, api, rita):
    old = timezone.now() - timedelta(days=60)
    Node.objects.filter(graph=rg["graph"]).update(updated_at=old)
    NodeStats.objects.create(node=rg["nodes"]["b"], graph=rg["graph"], last_used_at=timezone.now())
    hits = _by_key(api(rita).post(url(rg["graph"]), {"query": "ranking weights"}, format="json").json())
    assert hits["b"]["components"]["recency"]["raw"] == pytest.approx(1.0, abs=1e-3)
    assert hits["e"]["components"]["recency"]["raw"] == pytest.approx(0.25, abs=1e-3)


def test_a_vector_query(rg, api, rita):
    vec = embed_texts(["HNSW indexes give good recall"])[0]
    body = api(rita).post(url(rg["graph"]), {"vector": vec, "k": 1}, format="json").json()
    assert [x["key"] for x in body["results"]] == ["d"]


@pytest.mark.parametrize(
    "payload,field",
    [
        ({}, "query"),
        ({"query": "the and of"}, "query"),  # stopwords only: no direction
        ({"query": "x", "k": 201}, "k"),
        ({"query": "x", "persona": {"a": 2}}, "persona"),
        ({"vector": [1.0] * 10}, "vector"),
        ({"query": "x", "anchors": [987654]}, "anchors"),
    ],
)
def test_bad_search_input_is_a_400_naming_the_field(rg, api, rita, payload, field):
    r = api(rita).post(url(rg["graph"]), payload, format="json")
    assert r.status_code == 400 and field in r.json(), r.content


def test_search_tenancy_and_query_count(rg, api, rita, mallory, django_assert_max_num_queries):
    assert api(mallory).post(url(rg["graph"]), {"query": "ranking"}, format="json").status_code == 404
    client = api(rita)
    # savepoint/release, graph, role, the graph's embedding models, policy, anchor check, entry points (settings, nodes,
    # triplets), node facts, expansion, distances, similar retrievals (settings, counts)
    with django_assert_max_num_queries(16):
        r = client.post(url(rg["graph"]), {"query": "ranking", "anchors": [rg["nodes"]["a"].pk]}, format="json")
    assert r.status_code == 200


def test_hops_zero_searches_entry_points_only_and_hits_carry_bm25(rg, api, rita):
    client = api(rita)
    ask = {"query": "vector search in postgres", "k": 10}
    # Search takes every node of this small graph as a vector entry point: e and g, without a vector and
    # without the query's words, can only be reached along edges (c -> e -> g).
    Node.objects.filter(pk__in=[rg["nodes"]["e"].pk, rg["nodes"]["g"].pk]).update(embedding=None)
    default = {x["key"]: x for x in client.post(url(rg["graph"]), ask, format="json").json()["results"]}
    zero = {x["key"]: x for x in client.post(url(rg["graph"]), {**ask, "hops": 0}, format="json").json()["results"]}
    assert default["e"]["entry"] == "expansion" and default["e"]["path"]
    assert zero and "e" not in zero and "g" not in zero and all(x["entry"] != "expansion" for x in zero.values())
    full = client.post(url(rg["graph"]), ask, format="json").json()["results"]
    assert all(isinstance(x["bm25"], float) and x["bm25"] >= 0 for x in full)
    # The raw BM25 before fusion: a note has a lexical raw (whichever fusion the policy picks) exactly when it has
    # the query's words, and the ranking by bm25 is the lexical side's.
    assert max(x["bm25"] for x in full) > 0
    for x in full:
        assert (x["bm25"] > 0) == (x["components"]["lexical"]["raw"] > 0)
    by_bm25 = sorted((x for x in full if x["bm25"] > 0), key=lambda x: -x["bm25"])
    raws = [x["components"]["lexical"]["raw"] for x in by_bm25]
    assert raws == sorted(raws, reverse=True)
    bad = client.post(url(rg["graph"]), {**ask, "hops": -1}, format="json")
    assert bad.status_code == 400 and "hops" in bad.json()
