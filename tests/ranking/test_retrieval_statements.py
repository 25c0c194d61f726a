"""Retrieval in two statements (issue 27, item 2): ENTRY_SQL gives what the per-side statements give,
EXPAND_SQL what the expansion, node-rows and BM25 statements give, and a retrieval runs those two.

On the ranked graph ``rg`` (hashing embedder: exact, model-free similarities), with triplet embeddings
and a question node holding evidence on an ``answered`` edge.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench import reference_sql as ref
from feedback.rules import ANSWERED, QUESTION_KIND
from graphadmin.embeddings import embed_texts
from graphadmin.models import Edge, EdgeType, Node
from graphadmin_client import RetrievalRequest
from ranking import queries as sql
from ranking.retrieval import policy_of, prepare, query_vector, retrieve

pytestmark = pytest.mark.django_db

QUESTION = "vector search ranking in PostgreSQL"


@pytest.fixture
def eg(rg):
    """``rg`` with every edge's triplet embedded, a question node on the query's vector with evidence
    (answered, weight 0.8) on note g, and a neutral answered edge (no evidence) to note d."""
    graph, nodes = rg["graph"], rg["nodes"]
    for e in Edge.objects.filter(graph=graph).select_related("source", "target", "edge_type"):
        e.triplet_embedding = embed_texts([f"{e.source.title} -> {e.edge_type.name} -> {e.target.title}"])[0]
        e.save(update_fields=["triplet_embedding"])
    q = embed_texts([QUESTION])[0]
    question = Node.objects.create(graph=graph, key="q1", title=QUESTION, kind=QUESTION_KIND, embedding=q)
    answered, _ = EdgeType.objects.get_or_create(graph=graph, name=ANSWERED)
    Edge.objects.create(graph=graph, source=question, target=nodes["g"], edge_type=answered, weight=0.8)
    Edge.objects.create(graph=graph, source=question, target=nodes["d"], edge_type=answered, weight=0.5)
    return {**rg, "q": q, "question": question}


def _entry(eg, **kw):
    args = {
        "text": QUESTION,
        "config": "english",
        "k": 50,
        "k_triplets": 50,
        "lexical": True,
        "evidence": True,
        "model": "",
        "starts": [eg["nodes"]["e"].pk],
    }
    return sql.retrieval_entry(eg["graph"].pk, eg["q"], **{**args, **kw})


def test_one_entry_statement_gives_what_the_per_side_statements_give(eg, django_assert_num_queries):
    graph, q = eg["graph"], eg["q"]
    start = eg["nodes"]["e"].pk
    with django_assert_num_queries(1):
        entry = _entry(eg)
    nodes, triplets = ref.entry_points(graph.pk, q, 50, 50)
    assert entry.hits == [r.node_id for r in nodes]
    assert [t.edge_id for t in entry.triplets] == [t.edge_id for t in triplets]
    assert entry.triplets == triplets
    lexical = ref.lexical_hits(graph.pk, QUESTION, "english", 50)
    assert [n for n, _ in entry.lexical] == [n for n, _ in lexical]
    assert dict(entry.lexical) == pytest.approx(dict(lexical))
    assert entry.lexical  # the question's words are in the notes
    assert entry.evidence == ref.question_evidence(graph.pk, q, "")
    assert [(e.question_id, e.node_id, e.weight) for e in entry.evidence] == [
        (eg["question"].pk, eg["nodes"]["g"].pk, 0.8)
    ]
    named = {r.node_id for r in nodes} | {n for n, _ in entry.lexical} | {start}
    named |= {end for t in triplets for end in (t.source_id, t.target_id)}
    by_id = {r.node_id: r for r in ref.node_rows(graph.pk, named, q)}
    assert set(entry.rows) == set(by_id)  # the archived note x is named by no side
    assert entry.rows == by_id  # the same facts, the same similarity to the query
    scored = dict(ref.lexical_hits(graph.pk, QUESTION, "english", len(named), named))
    assert entry.bm25 == pytest.approx(scored)


def test_sides_turned_off_read_nothing_and_an_unknown_start_has_no_row(eg, globex_graph):
    other = Node.objects.create(graph=globex_graph, key="z", title="Z")
    entry = _entry(eg, lexical=False, evidence=False, starts=[other.pk, eg["nodes"]["x"].pk])
    assert entry.lexical == [] and entry.bm25 == {} and entry.evidence == []
    assert entry.hits and other.pk not in entry.rows and eg["nodes"]["x"].pk not in entry.rows
    no_vector = sql.retrieval_entry(
        eg["graph"].pk,
        None,
        text=QUESTION,
        config="english",
        k=50,
        k_triplets=50,
        lexical=True,
        evidence=True,
        model="",
    )
    assert no_vector.hits == [] and no_vector.triplets == [] and no_vector.evidence == []
    assert no_vector.lexical and all(r.vector is None for r in no_vector.rows.values())


def test_one_expand_statement_gives_the_expansion_the_extra_rows_and_their_bm25(eg, django_assert_num_queries):
    graph, q, nodes = eg["graph"], eg["q"], eg["nodes"]
    starts, extra = [nodes["a"].pk], [nodes["g"].pk, nodes["x"].pk]
    with django_assert_num_queries(1):
        edges, rows, bm25 = sql.expand(
            graph.pk, starts, q, 2, 10, extra=extra, text=QUESTION, config="english", lexical=True
        )
    # Expansion walks links both ways: the reference walks each level's links and backlinks in a statement
    # each (bench.reference_sql.expansion), with the same direction, degrees and reached nodes' facts.
    reference = ref.expansion(graph.pk, starts, q, 2, 10)
    assert edges == reference
    assert [(e.degrees, e.target) for e in edges] == [(e.degrees, e.target) for e in reference]
    assert any(e.reverse for e in edges)  # e.g. a <- b, walked from b
    assert eg["question"].pk not in {e.target_id for e in edges}  # d's backlink from the question: not walked
    assert set(rows) == {nodes["g"].pk}  # x is archived
    assert rows[nodes["g"].pk] == ref.node_rows(graph.pk, [nodes["g"].pk], q)[0]
    reached = {e.target_id for e in edges} | set(extra)
    assert bm25 == pytest.approx(dict(ref.lexical_hits(graph.pk, QUESTION, "english", len(reached), reached)))
    assert bm25  # some reached note has the question's words
    _, _, none = sql.expand(graph.pk, starts, q, 2, 10, extra=extra, text=QUESTION, config="english", lexical=False)
    assert none == {}


def test_a_retrieval_runs_two_statements(eg):
    graph = eg["graph"]
    policy = policy_of(graph)
    qvec = query_vector(QUESTION, eg["q"], graph)
    with CaptureQueriesContext(connection) as ctx:
        result = retrieve(
            prepare(graph, RetrievalRequest(query=QUESTION, vector=eg["q"], k=50), policy=policy, qvec=qvec)
        )
    assert len(ctx.captured_queries) == 2, [c["sql"][:80] for c in ctx.captured_queries]
    assert result.items
    entries = {c.entry for c in result.items}
    assert {"vector", "expansion"} <= entries or {"vector", "triplet"} <= entries


def test_the_planner_can_serve_every_vector_side_from_its_hnsw_index(eg):
    with connection.cursor() as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_sort = off")
        cur.execute(
            "EXPLAIN " + sql.ENTRY_SQL,
            {
                "graph": eg["graph"].pk,
                "query": sql.vector_literal(eg["q"]),
                "vector": True,
                "k": 50,
                "k_triplets": 50,
                "question": QUESTION_KIND,
                "lexical": True,
                "text": QUESTION,
                "config": "english",
                "k1": sql.BM25_K1,
                "b": sql.BM25_B,
                "evidence": True,
                "model": "",
                "n": sql.SIMILAR_QUESTIONS,
                "answered": ANSWERED,
                "min_similarity": 0.5,
                "starts": [],
            },
        )
        plan = " ".join(r[0] for r in cur.fetchall())
    for index in ("node_embedding_hnsw", "edge_triplet_hnsw", "node_question_hnsw"):
        assert index in plan
