"""The ranking app's SQL (ranking.queries): expansion, fan-out cap, cosine, archived rows, query counts,
HNSW top-k, anchor distances."""

import math
import random
from collections import deque

import pytest
from django.db import connection

from bench import reference_sql as ref
from graphadmin import actions
from graphadmin.embeddings import embed_texts
from graphadmin.models import Edge, EdgeType, Node
from ranking import queries as sql

pytestmark = pytest.mark.django_db


def _cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _tokens(text: str) -> int:
    """The budget's token estimate as docs/ranking.md states it: ceil(characters / 4), at least 1."""
    return max(1, math.ceil(len(text) / 4))


def _pairs(rows, rg):
    names = {n.pk: k for k, n in rg["nodes"].items()}
    return {(names[r.source_id], names[r.target_id], r.hops) for r in rows}


def test_one_hop_skips_archived_nodes_and_edges(rg, django_assert_num_queries):
    a = rg["nodes"]["a"]
    with django_assert_num_queries(1):
        rows = sql.edge_candidates(rg["graph"].pk, [a.pk], None, hops=1, fanout_cap=50)
    assert _pairs(rows, rg) == {("a", "b", 1), ("a", "c", 1), ("a", "d", 1)}


def test_two_hops_expand_each_node_once_at_its_shortest_depth(rg, django_assert_num_queries):
    a = rg["nodes"]["a"]
    with django_assert_num_queries(1):
        rows = sql.edge_candidates(rg["graph"].pk, [a.pk], None, hops=2, fanout_cap=50)
    assert _pairs(rows, rg) == {("a", "b", 1), ("a", "c", 1), ("a", "d", 1), ("b", "e", 2), ("c", "e", 2)}
    rows3 = sql.edge_candidates(rg["graph"].pk, [a.pk], None, hops=3, fanout_cap=50)
    assert _pairs(rows3, rg) - _pairs(rows, rg) == {("e", "g", 3)}
    assert len({r.edge_id for r in rows3}) == len(rows3)


def test_fanout_cap_keeps_the_heaviest_edges_per_node(rg):
    a = rg["nodes"]["a"]
    rows = sql.edge_candidates(rg["graph"].pk, [a.pk], None, hops=2, fanout_cap=1)
    # a keeps only a>b (0.9; a>x 0.8 is archived-target and a>f's edge archived), b keeps b>e.
    assert _pairs(rows, rg) == {("a", "b", 1), ("b", "e", 2)}


def test_similarity_is_pgvector_cosine_and_tokens_match_the_estimate(rg):
    a = rg["nodes"]["a"]
    q = embed_texts(["ranking by weight"])[0]
    rows = sql.edge_candidates(rg["graph"].pk, [a.pk], q, hops=2, fanout_cap=50)
    for r in rows:
        node = Node.objects.get(pk=r.target_id)
        assert r.similarity == pytest.approx(_cosine(list(node.embedding), q), abs=1e-6)
        assert r.target.tokens == _tokens(node.title + "\n" + node.text)
    # No query: no similarity (scored as 0).
    assert all(r.similarity is None for r in sql.edge_candidates(rg["graph"].pk, [a.pk], None, 1, 50))


def test_tokens_are_a_quarter_of_the_characters_at_least_one(acme_graph):
    """A node's tokens (the budget's unit) as the retrieval statements compute them: ceil(characters / 4) of its
    title, a newline and its text, at least 1 (the empty note: its newline alone)."""
    texts = {"empty": ("", ""), "four": ("abc", ""), "five": ("abcd", ""), "four-hundred": ("x" * 199, "x" * 200)}
    nodes = {k: Node.objects.create(graph=acme_graph, key=k, title=t, text=x) for k, (t, x) in texts.items()}
    entry = sql.retrieval_entry(
        acme_graph.pk,
        None,
        text="",
        config=acme_graph.text_search_config,
        k=1,
        k_triplets=1,
        lexical=False,
        evidence=False,
        model="",
        starts=[n.pk for n in nodes.values()],
    )
    assert {k: entry.rows[n.pk].tokens for k, n in nodes.items()} == {
        "empty": 1,
        "four": 1,
        "five": 2,
        "four-hundred": 100,
    }


def test_target_without_embedding_has_no_similarity(rg):
    rg["nodes"]["b"].embedding = None
    rg["nodes"]["b"].save()
    rows = sql.edge_candidates(rg["graph"].pk, [rg["nodes"]["a"].pk], embed_texts(["ranking"])[0], 1, 50)
    by_target = {r.target_id: r for r in rows}
    assert by_target[rg["nodes"]["b"].pk].similarity is None


def test_another_graphs_nodes_are_unknown(rg, globex_graph):
    other = Node.objects.create(graph=globex_graph, key="z", title="Z")
    a = rg["nodes"]["a"]
    assert sql.unknown_nodes(rg["graph"].pk, [a.pk, other.pk, 999999]) == [other.pk, 999999]
    assert sql.unknown_nodes(rg["graph"].pk, [rg["nodes"]["x"].pk]) == [rg["nodes"]["x"].pk]  # archived
    assert sql.edge_candidates(rg["graph"].pk, [other.pk], None, 2, 50) == []


def test_hnsw_returns_k_rows_beyond_pgvectors_default_ef_search(acme_graph, django_assert_max_num_queries):
    rnd = random.Random(7)
    dim = len(embed_texts(["x"])[0])
    vectors = [[rnd.gauss(0, 1) for _ in range(dim)] for _ in range(300)]
    Node.objects.bulk_create(
        Node(graph=acme_graph, key=f"n{i}", title=f"n{i}", embedding=v, archived=i % 10 == 0)
        for i, v in enumerate(vectors)
    )
    q = [rnd.gauss(0, 1) for _ in range(dim)]
    with connection.cursor() as cur:
        # Force the HNSW index even on this small table, as on a large one.
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_sort = off")
        cur.execute(
            "EXPLAIN " + ref.NODE_HITS_SQL,
            {"graph": acme_graph.pk, "query": sql.vector_literal(q), "k": 60, "question": sql.QUESTION_KIND},
        )
        assert "node_embedding_hnsw" in " ".join(r[0] for r in cur.fetchall())
        # Every connection carries the search settings (graphadmin.settings, issue 27: no statement sets them).
        cur.execute("SHOW hnsw.ef_search")
        assert cur.fetchone()[0] == str(sql.EF_SEARCH_MIN)
        cur.execute("SHOW hnsw.iterative_scan")
        assert cur.fetchone()[0] == "relaxed_order"
        # pgvector's default ef_search (40) gives fewer rows than asked for: the reason for the setting.
        cur.execute("SET LOCAL hnsw.ef_search = 40")
        cur.execute("SET LOCAL hnsw.iterative_scan = off")
        cur.execute(
            ref.NODE_HITS_SQL,
            {"graph": acme_graph.pk, "query": sql.vector_literal(q), "k": 60, "question": sql.QUESTION_KIND},
        )
        assert len(cur.fetchall()) < 60
    with django_assert_max_num_queries(4):  # savepoint, settings, the search, release
        rows = ref.vector_candidates(acme_graph.pk, q, 60)
    assert len(rows) == 60
    active = [(i, v) for i, v in enumerate(vectors) if i % 10]
    exact = sorted(active, key=lambda iv: -_cosine(iv[1], q))[:60]
    exact_keys = {f"n{i}" for i, _ in exact}
    assert len(exact_keys & {r.key for r in rows}) / 60 >= 0.95
    assert all(int(r.key[1:]) % 10 for r in rows)  # archived never appear
    assert rows[0].vector == pytest.approx(_cosine(exact[0][1], q), abs=1e-5)


def _bfs(adj, anchors, max_hops):
    dist = {a: 0 for a in anchors}
    queue = deque(anchors)
    while queue:
        u = queue.popleft()
        if dist[u] == max_hops:
            continue
        for v in adj.get(u, ()):
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return dist


@pytest.mark.parametrize("max_hops", [1, 2, 3])
def test_anchor_distances_match_an_undirected_bfs(acme_graph, max_hops):
    rnd = random.Random(max_hops)
    nodes = Node.objects.bulk_create(Node(graph=acme_graph, key=f"n{i}", title=f"n{i}") for i in range(40))
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    pairs = {(rnd.randrange(40), rnd.randrange(40)) for _ in range(45)}
    pairs = {(s, t) for s, t in pairs if s != t}
    edges = Edge.objects.bulk_create(
        Edge(graph=acme_graph, source=nodes[s], target=nodes[t], edge_type=related, archived=(s + t) % 9 == 0)
        for s, t in pairs
    )
    adj = {}
    for e in edges:
        if not e.archived:
            adj.setdefault(e.source_id, set()).add(e.target_id)
            adj.setdefault(e.target_id, set()).add(e.source_id)
    anchors = [nodes[0].pk, nodes[1].pk]
    cands = [n.pk for n in nodes]
    got = sql.anchor_distances(acme_graph.pk, anchors, cands, max_hops)
    expected = _bfs(adj, anchors, max_hops)
    assert got == {c: expected.get(c) for c in cands}


def test_anchor_distances_do_not_pass_through_archived_nodes(rg):
    n = rg["nodes"]
    # Only path a - x - (new) y goes through the archived x.
    y = Node.objects.create(graph=rg["graph"], key="y", title="Y")
    Edge.objects.create(graph=rg["graph"], source=n["x"], target=y, edge_type=rg["types"]["related"])
    got = sql.anchor_distances(rg["graph"].pk, [n["a"].pk], [y.pk, n["e"].pk, n["f"].pk], 2)
    assert got == {y.pk: None, n["e"].pk: 2, n["f"].pk: None}


def test_fanout_cap_comes_from_the_policy(rg, alice, api, rita):
    actions.do_set_policy(rg["graph"], {"fanout_cap": 1}, actor=alice)
    r = api(rita).post(f"/api/graphs/{rg['graph'].pk}/rank/", {"start_nodes": [rg["nodes"]["a"].pk]}, format="json")
    assert r.status_code == 200
    assert [x["target"]["key"] for x in r.json()["results"]] == ["b", "e"]
