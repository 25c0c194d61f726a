"""Explain: every candidate of a logged injection with how it entered, its path and every component;
and why one rank beat another. Reads the log only.
"""

from __future__ import annotations

from feedback.models import ContextInjection, InjectionCandidate
from graphadmin.models import Edge, Node

from . import queries as sql
from . import scoring
from .retrieval import RankingInputError


def candidate_dict(
    c: InjectionCandidate, edges: dict | None = None, titles: dict | None = None, taught: dict | None = None
) -> dict:
    """A logged candidate as the explain endpoint shows it: how it entered, its path, every factor, and
    ``learned_from``: the past sessions whose evidence lifted or lowered it (``taught``: answered edge id ->
    its applied changes, ``queries.evidence_sessions``).

    ``edges`` (edge id -> (source id, type, target id)) and ``titles`` (node id -> title) give the path
    in words, ``A -derived_from-> B -depends_on-> C``; without them ``path_text`` is empty.
    """
    f = c.features
    path = f.get("path") or ([c.edge_id] if c.edge_id else [])
    entry = f.get("entry") or ("expansion" if c.edge_id else "vector")
    return {
        "rank": c.rank,
        "selected": c.selected,
        "node": c.node_id,
        "edge": c.edge_id,
        "hops": f.get("hops", c.hops),
        "entry": entry,
        "path": path,
        "path_text": path_text(path, c.node_id, edges or {}, titles or {}, entry),
        "cut": f.get("cut", ""),
        "tokens": c.tokens,
        "total": c.total,
        "features": f,
        "components": c.components,
        "learned_from": learned_from(f.get("evidence") or (), taught or {}),
    }


def learned_from(evidence, taught: dict) -> list[dict]:
    """The past sessions behind a candidate's ``memory``: for each similar question's answered edge
    (``[question, similarity, weight, edge]``), the sessions whose batches (still applied) moved it,
    with the evidence and whether it lifted (weight up) or lowered the candidate."""
    rows = []
    for question, similarity, _weight, edge in evidence:
        for change in taught.get(edge, ()):
            rows.append(
                {
                    "session": change["session"],
                    "batch": change["batch"],
                    "question": question,
                    "question_text": change["question"],
                    "similarity": similarity,
                    "evidence": change["event"],
                    "effect": "lifted" if change["after"] > change["before"] else "lowered",
                }
            )
    return rows


def path_text(path, node_id: int, edges: dict, titles: dict, entry: str = "expansion") -> str:
    """A path of edge ids in words: ``A -type-> B <-type- C`` (empty when the node entered without an edge).

    Expansion walks links both ways, so a path is read from where it started (``walk_start``): a link walked
    as written shows ``-type->``, a backlink ``<-type-``. A triplet hit's path is its link, as written."""
    if not path or any(e not in edges for e in path):
        return ""
    at = walk_start(path, node_id, edges, entry)
    parts = [titles.get(at, str(at))]
    for e in path:
        source, etype, target = edges[e]
        if source == at:
            parts.append(f"-{etype}-> {titles.get(target, str(target))}")
            at = target
        else:
            parts.append(f"<-{etype}- {titles.get(source, str(source))}")
            at = source
    return " ".join(parts)


def walk_start(path, node_id: int, edges: dict, entry: str = "expansion") -> int:
    """The node a path (edge ids, each in ``edges`` as (source id, type, target id)) started from: followed
    back from ``node_id``, link by link, whichever way each was walked; a triplet hit's (not walked) is its
    link's source."""
    if entry != "expansion":
        return edges[path[0]][0]
    at = node_id
    for e in reversed(path):
        source, _etype, target = edges[e]
        at = source if at == target else target
    return at


def _path_words(graph_id: int, cands) -> tuple[dict, dict]:
    """The edges on the candidates' paths and the titles of their ends, in two queries."""
    ids = {e for c in cands for e in (c.features.get("path") or ([c.edge_id] if c.edge_id else []))}
    if not ids:
        return {}, {}
    edges = {
        e["id"]: (e["source_id"], e["edge_type__name"], e["target_id"])
        for e in Edge.objects.filter(graph_id=graph_id, pk__in=ids).values(
            "id", "source_id", "target_id", "edge_type__name"
        )
    }
    nodes = {n for s, _t, d in edges.values() for n in (s, d)}
    titles = dict(Node.objects.filter(graph_id=graph_id, pk__in=nodes).values_list("id", "title"))
    return edges, titles


def explain(injection: ContextInjection, i: int | None = None, j: int | None = None) -> dict:
    """Every candidate of an injection with how it entered, its path and components; with ranks i and j,
    why i beat j."""
    cands = list(injection.candidates.order_by("rank"))
    edges, titles = _path_words(injection.graph_id, cands)
    taught = sql.evidence_sessions(injection.graph_id, {e[3] for c in cands for e in c.features.get("evidence") or ()})
    result = {
        "injection": injection.pk,
        "session": injection.session.external_id,
        "query": injection.query,
        "mode": injection.mode,
        "policy_revision": injection.policy_revision.revision,
        "budget_unit": injection.budget_unit,
        "budget": injection.budget,
        "spent": injection.spent,
        "confidence": (injection.params or {}).get("confidence"),
        "abstained": bool((injection.params or {}).get("abstained")),
        "created_at": injection.created_at,
        "candidates": [candidate_dict(c, edges, titles, taught) for c in cands],
    }
    result["comparison"] = compare(result["candidates"], i, j)
    return result


def compare(candidates: list[dict], i: int | None, j: int | None) -> dict | None:
    """Why rank i beat rank j, from ``explain``'s candidate dicts; None when neither rank is given."""
    if i is None and j is None:
        return None
    if i is None or j is None:
        raise RankingInputError({"i" if i is None else "j": ["Give both i and j to compare two ranks."]})
    by_rank = {c["rank"]: c for c in candidates}
    for name, value in (("i", i), ("j", j)):
        if value not in by_rank:
            raise RankingInputError({name: [f"No candidate at rank {value} (this injection has {len(candidates)})."]})
    ci, cj = by_rank[i], by_rank[j]
    return {
        "i": i,
        "j": j,
        "total_i": ci["total"],
        "total_j": cj["total"],
        "difference": ci["total"] - cj["total"],
        "components": scoring.explain_pair(ci["components"], cj["components"]),
    }
