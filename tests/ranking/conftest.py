"""A small ranked graph in acme_graph, with embeddings from the configured embedder.

    a -> b (related, w .9)   a -> c (depends_on, w .6)   a -> d (derived_from, w .3)
    b -> e (related, w .5)   c -> e (related, w .4)      e -> g (related, w .5)
    a -> x (related, w .8; x archived)                   a -> f (related, w .7; the edge archived)
"""

import pytest

from graphadmin.embeddings import embed_texts
from graphadmin.models import Edge, EdgeType, Node

TEXTS = {
    "a": ("Architecture", "The service stores agent memory as a graph in PostgreSQL."),
    "b": ("Ranking", "Edges are ranked by weight, semantic proximity and edge type priority."),
    "c": ("Postgres decision", "We chose PostgreSQL with pgvector for vector search."),
    "d": ("Vector databases", "HNSW indexes give good recall for vector search."),
    "e": ("Feedback", "Reinforcement and decay move the edge weights."),
    "g": ("Decay task", "A periodic Celery task decays weights of edges not traversed."),
    "x": ("Old note", "An archived note about ranking."),
    "f": ("Other", "A note reached only through an archived edge about ranking."),
}
EDGES = [
    ("a", "b", "related", 0.9),
    ("a", "c", "depends_on", 0.6),
    ("a", "d", "derived_from", 0.3),
    ("b", "e", "related", 0.5),
    ("c", "e", "related", 0.4),
    ("e", "g", "related", 0.5),
    ("a", "x", "related", 0.8),
    ("a", "f", "related", 0.7),
]


@pytest.fixture
def rg(acme_graph):
    """The ranked graph: a dict with the nodes by key, the edges by 'a>b' and the graph."""
    vectors = embed_texts([f"{t}\n{x}" for t, x in TEXTS.values()])
    nodes = {}
    for (key, (title, text)), vec in zip(TEXTS.items(), vectors):
        nodes[key] = Node.objects.create(graph=acme_graph, key=key, title=title, text=text, embedding=vec, archived=key == "x")
    types = {t.name: t for t in EdgeType.objects.filter(graph=acme_graph)}
    edges = {}
    for s, t, kind, w in EDGES:
        edges[f"{s}>{t}"] = Edge.objects.create(
            graph=acme_graph, source=nodes[s], target=nodes[t], edge_type=types[kind], weight=w, archived=(s, t) == ("a", "f")
        )
    return {"graph": acme_graph, "nodes": nodes, "edges": edges, "types": types}
