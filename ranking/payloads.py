"""The answers' bodies: what a ranking result becomes as JSON, for the REST views (ranking.api) and the MCP tools
(ranking.mcp) alike. Both import this module; neither imports the other.

Each body is the one its response serializer documents (ranking.serializers); nothing here reads the database.
"""

from __future__ import annotations

from .context import ContextResult
from .retrieval import RankResult, SearchResult


def rank_payload(result: RankResult) -> dict:
    """The body of a rank answer (RankResponseSerializer)."""
    return {
        "policy_revision": result.policy_revision.revision,
        "considered": result.considered,
        "results": [
            {
                "rank": item.rank,
                "edge": item.edge.edge_id,
                "stable_id": item.scored.stable_id,
                "source": item.edge.source_id,
                "edge_type": item.edge.edge_type,
                "hops": item.edge.hops,
                "target": {
                    "id": item.edge.target_id,
                    "key": item.edge.target.key,
                    "title": item.edge.target.title,
                    "kind": item.edge.target.kind,
                    "tokens": item.edge.target.tokens,
                },
                "total": item.scored.total,
                "components": item.scored.components_dict(),
            }
            for item in result.items
        ],
    }


def search_payload(result: SearchResult, vectors_pending: int = 0) -> dict:
    """The body of a search answer (SearchResponseSerializer); ``vectors_pending``: graphadmin.readiness."""
    return {
        "policy_revision": result.policy_revision.revision,
        "vectors_pending": vectors_pending,
        "results": [
            {
                "rank": hit.rank,
                "node": hit.row.node_id,
                "stable_id": hit.scored.stable_id,
                "key": hit.row.key,
                "title": hit.row.title,
                "kind": hit.row.kind,
                "vector_score": hit.row.vector,
                "bm25": hit.bm25,
                "hops": hit.scored.candidate.hops,
                "entry": hit.entry,
                "path": list(hit.path),
                "total": hit.scored.total,
                "components": hit.scored.components_dict(),
            }
            for hit in result.items
        ],
    }


def context_payload(result: ContextResult, session_id: str) -> dict:
    """The body of a context answer (ContextResponseSerializer)."""
    inj = result.injection
    return {
        "injection": inj.pk,
        "session": session_id,
        "session_created": result.session_created,
        "mode": inj.mode,
        "policy_revision": inj.policy_revision.revision,
        "budget_unit": inj.budget_unit,
        "budget": inj.budget,
        "spent": inj.spent,
        "considered": result.considered,
        "vectors_pending": result.vectors_pending,
        "confidence": result.confidence,
        "abstained": result.abstained,
        "items": result.selected,
    }
