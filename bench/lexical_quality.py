"""Entry-point quality on a vault with questions: recall@5 of each lexical ranking and of each fusion.

    .venv/bin/python -m bench.lexical_quality GRAPH_ID demo/questions.json

Reads a graph already imported (e.g. the demo graph of ``make run``) and a questions file
(``{"questions": [{"q": ..., "useful": [note key, ...]}]}``), and prints, for the entry points
alone (no expansion, no learned components), recall@5 (useful notes in the top 5 / min(5, useful),
averaged; feedback.harness.scoring's definition) and hit@5 (a useful note in the top 5):

* ``ts_rank``: PostgreSQL's ts_rank over to_tsvector(title, aliases, text), the question's lexemes OR-ed;
* ``bm25``: bench.reference_sql.lexical_hits (Okapi BM25, per-graph IDF, as the retrieval computes it);
* ``cosine``: the node embeddings' cosine to the embedded question (top 50 by HNSW);
* ``weighted``: coef_vector * cosine + coef_lexical * bm25 / max bm25 (scoring.fuse_entry, rrf_k 0);
* ``weighted_ts``: the same with ts_rank in BM25's place;
* ``rrf``: reciprocal-rank fusion of the same two lists (rrf_k 60), weighted the same.

Writes nothing. Measures in docs/history/performance-lexical.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TS_RANK_SQL = """
SELECT n.id, ts_rank(to_tsvector(%(cfg)s::regconfig, graphadmin_node_document(n.title, n.aliases, n.text)),
                     to_tsquery(%(cfg)s::regconfig, %(q)s))
FROM graphadmin_node n
WHERE n.graph_id = %(g)s AND NOT n.archived
  AND to_tsvector(%(cfg)s::regconfig, graphadmin_node_document(n.title, n.aliases, n.text))
      @@ to_tsquery(%(cfg)s::regconfig, %(q)s)
ORDER BY ts_rank(to_tsvector(%(cfg)s::regconfig, graphadmin_node_document(n.title, n.aliases, n.text)),
                 to_tsquery(%(cfg)s::regconfig, %(q)s)) DESC, n.id
LIMIT %(k)s
"""


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graph", type=int)
    parser.add_argument("questions")
    parser.add_argument("--k", type=int, default=50, help="Depth of each side (default 50).")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")
    import django

    django.setup()
    from django.db import connection

    from bench import reference_sql as ref
    from graphadmin.embeddings import embed_query
    from graphadmin.models import Graph, Node
    from ranking import scoring

    graph = Graph.objects.get(pk=args.graph)
    cfg = graph.text_search_config
    policy = scoring.Policy.from_mapping(graph.current_policy().numbers())
    keys = dict(Node.objects.filter(graph=graph).values_list("id", "key"))
    questions = json.loads(Path(args.questions).read_text())["questions"]
    names = ("ts_rank", "bm25", "cosine", "weighted", "weighted_ts", "rrf")
    hits, recall = dict.fromkeys(names, 0), dict.fromkeys(names, 0.0)

    def top5(scores: dict) -> list[int]:
        return sorted(scores, key=lambda n: (-scores[n], n))[:5]

    for question in questions:
        useful = set(question["useful"])
        with connection.cursor() as cur:
            cur.execute("SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s))", [cfg, question["q"]])
            lexemes = cur.fetchone()[0]
            ts = []
            if lexemes:
                query = " | ".join("'" + lx.replace("'", "''") + "'" for lx in lexemes)
                cur.execute(TS_RANK_SQL, {"g": graph.pk, "cfg": cfg, "q": query, "k": args.k})
                ts = [(r[0], float(r[1])) for r in cur.fetchall()]
        bm25 = dict(ref.lexical_hits(graph.pk, question["q"], cfg, args.k))
        vector = {r.node_id: r.vector for r in ref.vector_candidates(graph.pk, embed_query(question["q"]), args.k)}
        rankings = {
            "ts_rank": [n for n, _ in ts[:5]],
            "bm25": top5(bm25),
            "cosine": top5({n: v or 0.0 for n, v in vector.items()}),
        }
        for name, lexical, rrf_k in (("weighted", bm25, 0), ("weighted_ts", dict(ts), 0), ("rrf", bm25, 60)):
            fused = scoring.fuse_entry(vector, lexical, rrf_k)
            rankings[name] = top5(
                {n: policy.coef_vector * v + policy.coef_lexical * lx for n, (v, lx) in fused.items()}
            )
        for name, ranked in rankings.items():
            found = useful & {keys[n] for n in ranked}
            hits[name] += bool(found)
            recall[name] += len(found) / min(5, len(useful))
    print(f"graph {graph.pk} ({len(keys)} nodes, text_search_config {cfg}), {len(questions)} questions, depth {args.k}")
    for name in names:
        print(f"  {name:11s} recall@5 {recall[name] / len(questions):.3f}   hit@5 {hits[name] / len(questions):.3f}")


if __name__ == "__main__":
    main()
