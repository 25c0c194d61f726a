"""The report pipeline's SQL: the intake (a session and what its report checks, the outbox row) and the drain
(its lock, the claim, the rows it reads once per batch, the states it writes), each statement whole and named.

Why raw SQL: the intake and the drain are hot paths, measured (docs/decisions/0002-named-sql-in-the-drain.md):
the ORM's compilation of these statements (a correlated NOT EXISTS, a LATERAL pick of the pending outcome,
``bulk_update``'s CASE per column and row) cost more than running them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import connection

from graphadmin.models import Graph
from graphadmin.models.sql import columns, execute, fetch, fetch_all, try_advisory_lock
from graphadmin.models.sql import rows as model_rows
from graphadmin.runtime.locks import AdvisoryLock

from .. import rules
from ..models import AgentSession, PendingReport
from . import statement

# Which of the given node and edge ids are live (not archived) in the graph: one statement for a
# drained batch's reports (``feedback.report.stale_items``).
LIVE_TARGETS = statement("""
    SELECT 'node', n.id FROM {node} n
    WHERE n.graph_id = %(graph)s AND n.id = ANY(%(nodes)s::bigint[]) AND NOT n.archived
    UNION ALL
    SELECT 'edge', e.id FROM {edge} e
    WHERE e.graph_id = %(graph)s AND e.id = ANY(%(edges)s::bigint[]) AND NOT e.archived
""")


def live_targets(graph_id: int, nodes: set[int], edges: set[int]) -> tuple[set[int], set[int]]:
    """The live (not archived) ids among ``nodes`` and ``edges`` of the graph; no query when both are empty."""
    if not nodes and not edges:
        return set(), set()
    live: dict[str, set[int]] = {"node": set(), "edge": set()}
    for kind, pk in fetch_all(LIVE_TARGETS, {"graph": graph_id, "nodes": sorted(nodes), "edges": sorted(edges)}):
        live[kind].add(pk)
    return live["node"], live["edge"]


@dataclass(frozen=True, slots=True)
class ReportSession:
    """What a report on a session checks before anything else (``feedback.reports``), read in one query
    (``report_session``): the session, the (outcome, idempotency key) of an outcome report of it still
    pending in the outbox (None when there is none), and what the report's kind needs: for a use report
    the node and edge ids its injections gave the agent (``rules.surfaced``), for an outcome whether it
    has a selected candidate and whether it has an injection at all."""

    session: AgentSession
    pending: tuple[str, str] | None
    surfaced: tuple[set[int], set[int]] | None = None
    selected: bool | None = None
    injected: bool | None = None


def report_session(graph_id: int, external_id: str, kind: str) -> ReportSession | None:
    """The graph's session with that external id and what a report of ``kind`` checks (``ReportSession``);
    None when there is no such session. One query: the ORM's ``.first()`` and three more statements
    cost the intake more Python than the statements themselves."""
    row = fetch(REPORT_SESSION[kind], {"graph": graph_id, "external_id": external_id})
    if row is None:
        return None
    fields = AgentSession._meta.concrete_fields
    n = len(fields)
    session = AgentSession.from_db(connection.alias, [f.attname for f in fields], row[:n])
    pending = (row[n], row[n + 1]) if row[n] is not None else None
    if kind == "uses":
        rows = row[n + 2]
        # Django's connection reads json as text (its JSONField decodes it): decoded here.
        rows = (json.loads(rows) if isinstance(rows, str) else rows) or []
        return ReportSession(session, pending, surfaced=rules.surfaced((node, edge, path) for node, edge, path in rows))
    if kind == "outcome":
        return ReportSession(session, pending, selected=row[n + 2], injected=row[n + 3])
    return ReportSession(session, pending)


# A session by its external id, with its oldest outcome report still pending in the outbox and what
# a report of each kind needs besides (``report_session``).
_REPORT_SESSION = """
    SELECT {columns}, p.outcome, p.idempotency_key {needs}
    FROM {session} s
    LEFT JOIN LATERAL (
        SELECT r.payload ->> 'outcome' AS outcome, r.idempotency_key FROM {report} r
        WHERE r.graph_id = s.graph_id AND r.session_id = s.id AND r.kind = 'outcome' AND r.state = 'pending'
        ORDER BY r.id
        LIMIT 1
    ) p ON true
    WHERE s.graph_id = %(graph)s AND s.external_id = %(external_id)s
"""
# A use report: the session's selected candidates, node, edge and path, as one JSON array.
_USES_NEED = """,
    (SELECT json_agg(json_build_array(c.node_id, c.edge_id, c.features -> 'path'))
     FROM {candidate} c JOIN {injection} i ON i.id = c.injection_id
     WHERE c.graph_id = s.graph_id AND i.graph_id = s.graph_id AND i.session_id = s.id AND c.selected)
"""
# An outcome: whether the session has a selected candidate, and whether it has an injection.
_OUTCOME_NEEDS = """,
    EXISTS (
        SELECT 1 FROM {candidate} c JOIN {injection} i ON i.id = c.injection_id
        WHERE c.graph_id = s.graph_id AND i.graph_id = s.graph_id AND i.session_id = s.id AND c.selected
    ),
    EXISTS (SELECT 1 FROM {injection} i WHERE i.graph_id = s.graph_id AND i.session_id = s.id)
"""
REPORT_SESSION = {
    kind: statement(_REPORT_SESSION, columns=columns(AgentSession, "s"), needs=needs)
    for kind, needs in (("uses", _USES_NEED), ("outcome", _OUTCOME_NEEDS), ("response", ""))
}


def live_nodes(graph_id: int, ids) -> set[int]:
    """The ids among ``ids`` that are live (not archived) nodes of the graph; one query (named, as the
    intake's other reads: building the ORM's query cost more Python than running it)."""
    return {row[0] for row in fetch_all(LIVE_NODES, {"graph": graph_id, "ids": list(ids)})}


# The live nodes of the graph among the given ids (``live_nodes``).
LIVE_NODES = statement("""
    SELECT n.id FROM {node} n WHERE n.graph_id = %(graph)s AND n.id = ANY(%(ids)s::bigint[]) AND NOT n.archived
""")


def live_edges(graph_id: int, ids, triplets) -> list[tuple[int, int, int, str]]:
    """(id, source, target, type name) of the live edges of the graph named by id (``ids``) or by
    (source, target, type name) (``triplets``); one query, where the ORM's OR of one Q per triplet joined
    the edge types for every edge and cost more Python than the statement."""
    triplets = list(triplets)
    params = {
        "graph": graph_id,
        "ids": list(ids),
        "sources": [t[0] for t in triplets],
        "targets": [t[1] for t in triplets],
        "types": [t[2] for t in triplets],
    }
    return fetch_all(LIVE_EDGES, params)


# Live edges of the graph by id, and by (source, target, type name): each branch through its index.
LIVE_EDGES = statement("""
    SELECT e.id, e.source_id, e.target_id, t.name
    FROM {edge} e JOIN {edge_type} t ON t.id = e.edge_type_id
    WHERE e.graph_id = %(graph)s AND e.id = ANY(%(ids)s::bigint[]) AND NOT e.archived
    UNION
    SELECT e.id, e.source_id, e.target_id, t.name
    FROM unnest(%(sources)s::bigint[], %(targets)s::bigint[], %(types)s::text[]) AS k(source, target, type)
    JOIN {edge_type} t ON t.graph_id = %(graph)s AND t.name = k.type
    JOIN {edge} e ON e.graph_id = %(graph)s AND e.source_id = k.source AND e.target_id = k.target
                 AND e.edge_type_id = t.id AND NOT e.archived
""")


def insert_report(row: dict) -> None:
    """Store one outbox row (``feedback.outbox.record``); a key already stored stores nothing. Named
    rather than ``bulk_create(ignore_conflicts=True)``, whose query building cost more than the INSERT."""
    execute(INSERT_REPORT, row)


# One PendingReport, every column given (the model's defaults come from Python, not the database);
# ON CONFLICT DO NOTHING: a client's retry with the same idempotency key is the first row's.
INSERT_REPORT = statement("""
    INSERT INTO {report} (graph_id, session_id, kind, payload, idempotency_key, user_id, state, created_at,
                          not_before, applied_at, attempts, last_error, result)
    VALUES (%(graph)s, %(session)s, %(kind)s, %(payload)s::jsonb, %(key)s, %(user)s, 'pending', %(now)s,
            %(now)s, NULL, 0, '', '{{}}'::jsonb)
    ON CONFLICT DO NOTHING
""")


# --------------------------------------------------------------------------------------------------
# The report outbox (feedback.outbox)


def try_drain_lock(graph_id: int) -> bool:
    """Whether this transaction now holds the graph's drain lock (``feedback.outbox.drain``): one
    drainer per graph at a time, so a graph's reports apply in the order they were accepted, and a
    second drainer returns at once instead of queueing behind the first (``AdvisoryLock.DRAIN``)."""
    return try_advisory_lock(AdvisoryLock.DRAIN, graph_id)


# Whether a transaction holds the graph's drain lock now (``feedback.reports``: a report committed while
# a drainer runs is seen by it, so it needs no poke of its own).
DRAIN_RUNNING = statement(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = %(lock_class)s AND objid = %(graph)s AND objsubid = 2)"
)


def drain_running(graph_id: int) -> bool:
    """Whether a drainer holds the graph's drain lock at this moment (``try_drain_lock``).

    A report committed before this check returned true is applied by that drainer: it claims in a new
    snapshot after each batch, and looks once more after releasing the lock before it leaves."""
    return fetch(DRAIN_RUNNING, {"lock_class": int(AdvisoryLock.DRAIN), "graph": graph_id})[0]


# The new state of each report of a drained batch, in one statement: Django's bulk_update builds a
# CASE per column and row, which cost a fifth of a drain's CPU; arrays unnested cost one bound list
# per column.
MARK_REPORTS = statement("""
    UPDATE {report} AS r
    SET state = v.state, applied_at = v.applied_at, attempts = v.attempts, last_error = v.last_error,
        not_before = v.not_before, result = v.result::jsonb
    FROM unnest(%(ids)s::bigint[], %(states)s::text[], %(applied_at)s::timestamptz[], %(attempts)s::smallint[],
                %(errors)s::text[], %(not_before)s::timestamptz[], %(results)s::text[])
         AS v(id, state, applied_at, attempts, last_error, not_before, result)
    WHERE r.graph_id = %(graph)s AND r.id = v.id
""")


def mark_reports(graph_id: int, rows) -> None:
    """Write the state, times, attempts, error and result of each drained PendingReport (``rows``)."""
    rows = list(rows)
    execute(
        MARK_REPORTS,
        {
            "graph": graph_id,
            "ids": [r.pk for r in rows],
            "states": [r.state for r in rows],
            "applied_at": [r.applied_at for r in rows],
            "attempts": [r.attempts for r in rows],
            "errors": [r.last_error for r in rows],
            "not_before": [r.not_before for r in rows],
            "results": [json.dumps(r.result) for r in rows],
        },
    )


# The graph's pending reports that may be applied now, oldest first, at most %(limit)s, each locked
# (``FOR UPDATE SKIP LOCKED``: a row another drainer's transaction holds is left to it): past their
# backoff, and not behind an earlier row of their session still waiting out its own. Every column of
# the row, in the model's order (``claim_reports``). Plain SQL: the drain runs it for every batch, and
# the ORM's compilation of the same query (a correlated NOT EXISTS) cost more than running it
# (docs/decisions/0002-named-sql-in-the-drain.md).
CLAIM_REPORTS = statement(
    """
    SELECT {columns} FROM {report} r
    WHERE r.graph_id = %(graph)s AND r.state = 'pending' AND r.not_before <= %(now)s
      AND NOT EXISTS (SELECT 1 FROM {report} e
                      WHERE e.graph_id = %(graph)s AND e.session_id = r.session_id AND e.state = 'pending'
                        AND e.id < r.id AND e.not_before > %(now)s)
    ORDER BY r.id
    LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
    """,
    columns=columns(PendingReport, "r"),
)

# Whether the graph has a report CLAIM_REPORTS would take now (without locking anything).
REPORTS_CLAIMABLE = statement("""
    SELECT EXISTS (
        SELECT 1 FROM {report} r
        WHERE r.graph_id = %(graph)s AND r.state = 'pending' AND r.not_before <= %(now)s
          AND NOT EXISTS (SELECT 1 FROM {report} e
                          WHERE e.graph_id = %(graph)s AND e.session_id = r.session_id AND e.state = 'pending'
                            AND e.id < r.id AND e.not_before > %(now)s))
""")


def claim_reports(graph_id: int, now: datetime, limit: int) -> list[PendingReport]:
    """Lock and return up to ``limit`` of the graph's claimable reports (CLAIM_REPORTS), oldest first."""
    fields = PendingReport._meta.concrete_fields
    names = [f.attname for f in fields]
    rows = []
    for values in fetch_all(CLAIM_REPORTS, {"graph": graph_id, "now": now, "limit": limit}):
        row = PendingReport.from_db(connection.alias, names, list(values))
        # Django's connection reads jsonb as text (its JSONField decodes it): decoded here.
        for name in ("payload", "result"):
            value = getattr(row, name)
            if isinstance(value, str):
                setattr(row, name, json.loads(value))
        rows.append(row)
    return rows


def reports_claimable(graph_id: int, now: datetime) -> bool:
    """Whether ``claim_reports`` would find a report of the graph now (REPORTS_CLAIMABLE)."""
    return fetch(REPORTS_CLAIMABLE, {"graph": graph_id, "now": now})[0]


# The graph a drain applies reports to (``drain_graph``), the sessions and users of a drained batch
# (``drain_sessions``, ``drain_users``): plain SQL, read once per drain and per batch, where the ORM's compilation of
# the same queries cost more than running them.
DRAIN_GRAPH = statement("SELECT {columns} FROM {graph} g WHERE g.id = %(graph)s", columns=columns(Graph, "g"))
DRAIN_SESSIONS = statement(
    "SELECT {columns} FROM {session} s WHERE s.graph_id = %(graph)s AND s.id = ANY(%(sessions)s::bigint[])",
    columns=columns(AgentSession, "s"),
)


DRAIN_USERS = statement(
    "SELECT {columns} FROM {user} u WHERE u.id = ANY(%(users)s::bigint[])",
    columns=columns(get_user_model(), "u"),
)


def drain_users(ids: set[int]) -> dict:
    """The users among ``ids`` by id (DRAIN_USERS: the reporters a drained batch names as actors); no
    query for none."""
    if not ids:
        return {}
    return {u.pk: u for u in model_rows(get_user_model(), DRAIN_USERS, {"users": sorted(ids)})}


def drain_graph(graph_id: int) -> Graph | None:
    """The graph (DRAIN_GRAPH), or None when it is gone."""
    found = model_rows(Graph, DRAIN_GRAPH, {"graph": graph_id})
    return found[0] if found else None


def drain_sessions(graph: Graph, ids: set[int]) -> dict[int, AgentSession]:
    """The graph's sessions among ``ids`` by id (DRAIN_SESSIONS), each holding ``graph`` itself."""
    sessions = {}
    for session in model_rows(AgentSession, DRAIN_SESSIONS, {"graph": graph.pk, "sessions": sorted(ids)}):
        session.graph = graph  # one graph object for the batch
        sessions[session.pk] = session
    return sessions
