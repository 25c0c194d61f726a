"""The ranking service: the pipeline's stages behind one import, for the API, the dashboard and the MCP tools.

The stages live in their own modules, each around the one request object
(``graphadmin_client.RetrievalRequest``, built by ranking.serializers from the JSON):

* ranking.retrieval: entry points, best-first expansion and node scores (``retrieve``, ``search``),
  and the traversal view (``rank``); reads only.
* ranking.context: the budget and the log (``assemble_context``); the one stage that writes.
* ranking.explain: an injection's candidates, paths and components; why rank i beat rank j.
* ranking.whatif: the injection log replayed under a draft policy.

Bad input raises ``RankingInputError`` with a dict of field -> messages, which the API turns into a
400; nothing is written before every check has passed.
"""

from __future__ import annotations

from .context import ContextResult, assemble_context
from .explain import candidate_dict, compare, explain, path_text, walk_start
from .retrieval import (
    ENTRY_ORDER,
    EXPANSION_FANOUT,
    EXPANSION_SEEDS,
    MAX_BUDGET_ITEMS,
    MAX_BUDGET_TOKENS,
    MAX_EXCLUDE,
    MAX_EXPANDED,
    MAX_HOPS,
    MAX_QUERY_CHARS,
    MAX_RANK_K,
    MAX_SEARCH_K,
    MAX_START_NODES,
    TRIPLET_K,
    Candidate,
    RankedEdge,
    RankingInputError,
    RankResult,
    SearchResult,
    check_nodes,
    policy_of,
    query_model,
    query_vector,
    rank,
    retrieve,
    search,
)
from .whatif import MAX_WHATIF_INJECTIONS, MAX_WHATIF_PRIORITIES, MAX_WHATIF_SESSIONS, USED_SIGNALS, whatif

__all__ = [
    "ENTRY_ORDER",
    "EXPANSION_FANOUT",
    "EXPANSION_SEEDS",
    "MAX_BUDGET_ITEMS",
    "MAX_BUDGET_TOKENS",
    "MAX_EXCLUDE",
    "MAX_EXPANDED",
    "MAX_HOPS",
    "MAX_QUERY_CHARS",
    "MAX_RANK_K",
    "MAX_SEARCH_K",
    "MAX_START_NODES",
    "MAX_WHATIF_INJECTIONS",
    "MAX_WHATIF_PRIORITIES",
    "MAX_WHATIF_SESSIONS",
    "TRIPLET_K",
    "USED_SIGNALS",
    "Candidate",
    "ContextResult",
    "RankResult",
    "RankedEdge",
    "RankingInputError",
    "SearchResult",
    "assemble_context",
    "candidate_dict",
    "check_nodes",
    "compare",
    "explain",
    "path_text",
    "walk_start",
    "policy_of",
    "query_model",
    "query_vector",
    "rank",
    "retrieve",
    "search",
    "whatif",
]
