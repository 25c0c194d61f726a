"""The feedback engine's SQL: each statement whole and named, and the reads the write path makes.

Why raw SQL: every weight write changes a set of rows *and* writes their history from the UPDATE's
RETURNING, in id order and in one round trip; the ORM has no UPDATE ... RETURNING, no data-modifying
CTE and no ``FOR UPDATE`` ordered by id over a join. Rules for every statement here:

- values are bound parameters (``%(name)s``), never pasted into the text;
- table names come from the models' ``_meta.db_table`` through ``psycopg.sql.Identifier``, and so
  does a column chosen among several (``set_weight``, ``rollback_restore``: from a fixed mapping);
- every table is filtered by ``graph_id`` (the sharding key, DESIGN.md "Scale").

Lock order, everywhere: the session row, then edges by id, then nodes by id, then the
organization's audit advisory lock (``graphadmin.audit``). A statement that changes edges and nodes
locks the nodes only after the edges' history is written: its node step reads the edge step's count
(``(SELECT n FROM edge_count) >= 0``, always true), which orders the two within the statement.

Lock mode: ``FOR NO KEY UPDATE``, never ``FOR UPDATE``. No weight is a key, and the weaker mode still
queues every other writer of the row, but it does not conflict with the ``KEY SHARE`` locks that
foreign-key checks take. Those checks are deferred to COMMIT, where a context call's candidate log
and counters take them on nodes and edges in rank order, not id order: with ``FOR UPDATE`` a
reinforcement holding Y and waiting for X crossed a COMMIT holding X and waiting for Y, a deadlock
(tests/ranking/test_context_beside_reinforcement.py). Plain UPDATEs of weights take the same mode.

History shapes (``feedback.models``): ``WeightChange`` rows for scattered, small batches;
``WeightChangeBlock`` arrays (one per event and span of ``BLOCK_SPAN`` ids) for the bulk writes over
id ranges. A bulk UPDATE walks the primary key (the caller turns sequential and bitmap scans off for
its transaction, ``SESSION_SETTINGS``), so its ids come out in order without a sort step, and
``RETURNING old.*, new.*`` (PostgreSQL 18, the minimum: ``graphadmin.runtime.checks``) gives the value it
replaced with no separate locking pass.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import connection
from psycopg import sql

from graphadmin.models import AuditEvent, Edge, EdgeStats, EdgeType, Graph, Node, PolicyRevision
from graphadmin.runtime.locks import AdvisoryLock

from . import rules
from .models import (
    AgentSession,
    ContextInjection,
    InjectionCandidate,
    PendingReport,
    UpdateBatch,
    UseEvent,
    WeightChange,
    WeightChangeBlock,
    WeightHistory,
)

BLOCK_SPAN = 10000  # ids covered by one history block at most (one edge's history reads one block per batch)
CONFLICT_SAMPLE = 100  # conflicts listed by id in a rollback batch's details (all are counted)


def _table(model) -> sql.Identifier:
    return sql.Identifier(model._meta.db_table)


TABLES = {
    "graphs": _table(Graph),
    "edge": _table(Edge),
    "node": _table(Node),
    "edge_type": _table(EdgeType),
    "edge_stats": _table(EdgeStats),
    "policy": _table(PolicyRevision),
    "session": _table(AgentSession),
    "injection": _table(ContextInjection),
    "candidate": _table(InjectionCandidate),
    "use_event": _table(UseEvent),
    "batch": _table(UpdateBatch),
    "change": _table(WeightChange),
    "block": _table(WeightChangeBlock),
    "history": _table(WeightHistory),
    "report": _table(PendingReport),
}

# The weights a write may change: (target, field) -> (table, the history's target column).
WEIGHTS = {
    ("edge", "weight"): (TABLES["edge"], sql.Identifier(WeightChange._meta.get_field("edge").column)),
    ("edge", "feedback_weight"): (TABLES["edge"], sql.Identifier(WeightChange._meta.get_field("edge").column)),
    ("node", "feedback_weight"): (TABLES["node"], sql.Identifier(WeightChange._meta.get_field("node").column)),
}


def _statement(text: str, **identifiers: sql.Composable) -> sql.Composed:
    """``text`` with the table identifiers (``{edge}``, ``{change}``, ...) and any others filled in."""
    return sql.SQL(text).format(**TABLES, **identifiers)


def _weight(target: str, field: str) -> tuple[sql.Identifier, sql.Identifier, sql.Identifier]:
    """(table, column, history target column) of a weight, refusing any other (target, field)."""
    if (target, field) not in WEIGHTS:
        raise ValueError(f"no weight {target}.{field}")
    table, target_column = WEIGHTS[(target, field)]
    return table, sql.Identifier(field), target_column


def _batch_columns(computed: dict[str, str] | None = None, *, with_id: bool = True) -> dict[str, sql.Composable]:
    """The column list and VALUES list of an UpdateBatch row, from the model: ``%(b_<column>)s``
    for each column (``ledger.batch_params`` binds them), or the SQL in ``computed`` for a column
    known only inside the statement."""
    computed = computed or {}
    fields = [f for f in UpdateBatch._meta.concrete_fields if with_id or not f.primary_key]
    return {
        "batch_columns": sql.SQL(", ").join(sql.Identifier(f.column) for f in fields),
        "batch_values": sql.SQL(", ").join(
            sql.SQL(computed[f.column]) if f.column in computed else sql.Placeholder(f"b_{f.column}") for f in fields
        ),
    }


# --------------------------------------------------------------------------------------------------
# Transaction settings and batches

# For the rest of the transaction: plan row scans through indexes (a bulk UPDATE's primary-key scan
# then locks rows in id order), and, when ``async_commit`` (a chunk's own transaction, never a
# caller's), do not wait for the commit's WAL flush.
SESSION_SETTINGS = sql.SQL("""
    SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
           set_config('synchronous_commit',
                      CASE WHEN %(async_commit)s::boolean THEN 'off' ELSE current_setting('synchronous_commit') END,
                      true)
""")

# Insert a batch unless its idempotency key is taken (committed, or in a concurrent transaction that
# then commits): one statement, no savepoint. Returns its id, or no row.
INSERT_BATCH_ONCE = _statement(
    """
    INSERT INTO {batch} ({batch_columns}) VALUES ({batch_values})
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING id
    """,
    **_batch_columns(with_id=False),
)


# --------------------------------------------------------------------------------------------------
# Use reports: reinforcement

# Reinforce the reported edges (``weight``) then nodes (``feedback_weight``), each moving up,
# ``w + lr * (1 - w)``, or down when flagged negative, ``w - negative_rate * w`` (``rules.reinforce``,
# ``rules.weaken``), with one WeightChange per change naming its use event. Inputs: three aligned
# arrays per target (ids, signals, use event ids; empty for none). Each step locks its rows in id
# order and reads ``before`` after the lock, so no concurrent report's change is lost. Returns (edge
# changes, node changes, ids of the locked edges then nodes that are archived): a note forgotten after
# the caller checked its items is seen here, under the lock, and the caller refuses the report (its
# transaction rolls back) instead of moving a forgotten note's weight.
REINFORCE = _statement("""
    WITH edge_locked AS MATERIALIZED (
        SELECT i.id, i.signal, i.use_event_id, t.weight AS before, t.archived
        FROM {edge} t
        JOIN unnest(%(edge_ids)s::bigint[], %(edge_signals)s::text[], %(edge_events)s::bigint[])
             AS i(id, signal, use_event_id) ON i.id = t.id
        WHERE t.graph_id = %(graph)s
        ORDER BY t.id FOR NO KEY UPDATE OF t
    ),
    edge_new AS (
        SELECT id, before, signal, use_event_id,
               CASE WHEN signal = 'negative' THEN before - %(negative_rate)s::double precision * before
                    ELSE before + %(learning_rate)s::double precision * (1 - before) END AS after
        FROM edge_locked
    ),
    edge_updated AS (
        UPDATE {edge} t SET weight = n.after FROM edge_new n
        WHERE t.id = n.id AND t.graph_id = %(graph)s AND n.after IS DISTINCT FROM n.before
        RETURNING t.id, n.before, n.after, n.signal, n.use_event_id
    ),
    edge_history AS (
        INSERT INTO {change} (batch_id, graph_id, edge_id, field, before, after, event, use_event_id, created_at)
        SELECT %(batch)s, %(graph)s, u.id, 'weight', u.before, u.after, u.signal, u.use_event_id, %(now)s
        FROM edge_updated u
        RETURNING 1
    ),
    edge_count AS (SELECT count(*) AS n FROM edge_history),
    node_locked AS MATERIALIZED (
        SELECT i.id, i.signal, i.use_event_id, t.feedback_weight AS before, t.archived
        FROM {node} t
        JOIN unnest(%(node_ids)s::bigint[], %(node_signals)s::text[], %(node_events)s::bigint[])
             AS i(id, signal, use_event_id) ON i.id = t.id
        WHERE t.graph_id = %(graph)s AND (SELECT n FROM edge_count) >= 0
        ORDER BY t.id FOR NO KEY UPDATE OF t
    ),
    node_new AS (
        SELECT id, before, signal, use_event_id,
               CASE WHEN signal = 'negative' THEN before - %(negative_rate)s::double precision * before
                    ELSE before + %(learning_rate)s::double precision * (1 - before) END AS after
        FROM node_locked
    ),
    node_updated AS (
        UPDATE {node} t SET feedback_weight = n.after FROM node_new n
        WHERE t.id = n.id AND t.graph_id = %(graph)s AND n.after IS DISTINCT FROM n.before
        RETURNING t.id, n.before, n.after, n.signal, n.use_event_id
    ),
    node_history AS (
        INSERT INTO {change} (batch_id, graph_id, node_id, field, before, after, event, use_event_id, created_at)
        SELECT %(batch)s, %(graph)s, u.id, 'feedback_weight', u.before, u.after, u.signal, u.use_event_id, %(now)s
        FROM node_updated u
        RETURNING 1
    )
    SELECT (SELECT n FROM edge_count), (SELECT count(*) FROM node_history),
           ARRAY(SELECT id FROM edge_locked WHERE archived ORDER BY id),
           ARRAY(SELECT id FROM node_locked WHERE archived ORDER BY id)
""")


# --------------------------------------------------------------------------------------------------
# Outcome EMA

# Lock the session row (it serialises every outcome report of the session) and read, in the same
# statement, what an outcome report needs: the session's id and outcome; whether the locked row is
# the one the statement's snapshot saw (``xmin`` unchanged: if not, we waited for another report
# that committed, the facts below may miss its batch, and the caller runs the statement again);
# the batch of this very report if it is a retry (``key``); the session's last outcome batch;
# whether it has an injection and a selected candidate; a reserved id for the new batch; and from
# the current policy its revision, EMA alpha and the outcome's score. The last two columns set the
# transaction's index-only scans for the write that follows (``OUTCOME_WRITE``). No row: unknown
# session.
LOCK_SESSION_FOR_OUTCOME = _statement("""
    SELECT s.id, s.outcome, s.xmin = (SELECT o.xmin FROM {session} o WHERE o.id = s.id AND o.graph_id = %(graph)s),
           (SELECT b.id FROM {batch} b WHERE b.graph_id = %(graph)s AND b.idempotency_key = %(key)s),
           (SELECT b.id FROM {batch} b
            WHERE b.graph_id = %(graph)s AND b.trigger_session_id = s.id AND b.kind = 'outcome'
            ORDER BY b.id DESC LIMIT 1),
           EXISTS (SELECT 1 FROM {injection} j WHERE j.graph_id = %(graph)s AND j.session_id = s.id),
           EXISTS (SELECT 1 FROM {candidate} c JOIN {injection} j ON j.id = c.injection_id AND j.graph_id = %(graph)s
                   WHERE j.session_id = s.id AND c.graph_id = %(graph)s AND c.selected),
           nextval(pg_get_serial_sequence(%(batch_table)s, 'id')),
           p.revision, p.ema_alpha,
           CASE %(outcome)s::text WHEN 'accepted' THEN p.outcome_accepted WHEN 'rework' THEN p.outcome_rework
                                  WHEN 'rejected' THEN p.outcome_rejected END,
           set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)
    FROM {session} s
    CROSS JOIN (SELECT * FROM {policy} WHERE graph_id = %(graph)s ORDER BY revision DESC LIMIT 1) p
    WHERE s.graph_id = %(graph)s AND s.external_id = %(external_id)s
    FOR NO KEY UPDATE OF s
""")

# The outcome's writes, in one statement: the EMA ``alpha * score + (1 - alpha) * w`` (``rules.ema``)
# on ``feedback_weight`` of every edge on a selected candidate's path (logs older than the pipeline
# have no path: their one edge), then of every selected node, with one WeightChange each; the
# session's outcome; and the batch row (its id reserved by LOCK_SESSION_FOR_OUTCOME) with its counts,
# finish time and duration (Python's time before the statement, ``elapsed_ms``, plus the statement's
# own, each on one clock). No locking pass: each UPDATE locks as it goes, in id order (a primary-key
# scan over the sorted id array), re-reads a row another writer changed meanwhile, and RETURNING
# old.* gives the value it replaced. History rows may precede the batch row in the statement: their
# foreign key is checked at commit. Returns (edge changes, node changes, finished_at, duration_ms).
OUTCOME_WRITE = _statement(
    """
    WITH edge_updated AS (
        UPDATE {edge} t
        SET feedback_weight = %(alpha)s::double precision * %(score)s::double precision
                              + (1 - %(alpha)s::double precision) * t.feedback_weight
        WHERE t.graph_id = %(graph)s
          AND t.id = ANY(ARRAY(
              SELECT p.e::bigint
              FROM {candidate} c JOIN {injection} j ON j.id = c.injection_id AND j.graph_id = %(graph)s
              CROSS JOIN LATERAL jsonb_array_elements_text(coalesce(c.features -> 'path', jsonb_build_array(c.edge_id)))
                   AS p(e)
              WHERE j.session_id = %(session)s AND c.graph_id = %(graph)s AND c.selected AND p.e IS NOT NULL))
          AND %(alpha)s::double precision * %(score)s::double precision
              + (1 - %(alpha)s::double precision) * t.feedback_weight IS DISTINCT FROM t.feedback_weight
        RETURNING t.id, old.feedback_weight AS before, new.feedback_weight AS after
    ),
    edge_history AS (
        INSERT INTO {change} (batch_id, graph_id, edge_id, field, before, after, event, use_event_id, created_at)
        SELECT %(batch)s, %(graph)s, u.id, 'feedback_weight', u.before, u.after, %(outcome)s, NULL, %(now)s
        FROM edge_updated u
        RETURNING 1
    ),
    edge_count AS (SELECT count(*) AS n FROM edge_history),
    node_updated AS (
        UPDATE {node} t
        SET feedback_weight = %(alpha)s::double precision * %(score)s::double precision
                              + (1 - %(alpha)s::double precision) * t.feedback_weight
        WHERE t.graph_id = %(graph)s
          AND t.id = ANY(ARRAY(
              SELECT c.node_id FROM {candidate} c JOIN {injection} j ON j.id = c.injection_id AND j.graph_id = %(graph)s
              WHERE j.session_id = %(session)s AND c.graph_id = %(graph)s AND c.selected))
          AND (SELECT n FROM edge_count) >= 0
          AND %(alpha)s::double precision * %(score)s::double precision
              + (1 - %(alpha)s::double precision) * t.feedback_weight IS DISTINCT FROM t.feedback_weight
        RETURNING t.id, old.feedback_weight AS before, new.feedback_weight AS after
    ),
    node_history AS (
        INSERT INTO {change} (batch_id, graph_id, node_id, field, before, after, event, use_event_id, created_at)
        SELECT %(batch)s, %(graph)s, u.id, 'feedback_weight', u.before, u.after, %(outcome)s, NULL, %(now)s
        FROM node_updated u
        RETURNING 1
    ),
    node_count AS (SELECT count(*) AS n FROM node_history),
    session_outcome AS (
        UPDATE {session} SET outcome = %(outcome)s, outcome_at = %(now)s WHERE id = %(session)s AND graph_id = %(graph)s
    ),
    batch_row AS (
        INSERT INTO {batch} ({batch_columns}) VALUES ({batch_values})
        RETURNING finished_at, duration_ms
    )
    SELECT (SELECT n FROM edge_count), (SELECT n FROM node_count),
           (SELECT finished_at FROM batch_row), (SELECT duration_ms FROM batch_row)
    """,
    **_batch_columns(
        {
            "edge_updates": "(SELECT n FROM edge_count)",
            "node_updates": "(SELECT n FROM node_count)",
            "finished_at": "%(b_started_at)s + (%(elapsed_ms)s + 1000 * extract(epoch FROM clock_timestamp()"
            " - statement_timestamp())) * interval '1 millisecond'",
            "duration_ms": "round((%(elapsed_ms)s + 1000 * extract(epoch FROM clock_timestamp()"
            " - statement_timestamp()))::numeric, 3)",
        }
    ),
)


# --------------------------------------------------------------------------------------------------
# Decay and normalize: chunks over id ranges

# The ids ranges k (ids in [k * size, (k + 1) * size)) that hold live edges of the graph. Edge ids
# come from one sequence shared by all graphs, so a graph's ids can be spread out; only the ranges
# that hold its edges are visited. Found by skipping through the (graph, id) index: one probe per
# range, not a scan of the graph's edges.
CHUNK_RANGES = _statement("""
    WITH RECURSIVE k(n) AS (
        SELECT (SELECT min(id) FROM {edge} WHERE graph_id = %(graph)s AND NOT archived) / %(size)s
        UNION ALL
        SELECT (SELECT min(id) FROM {edge} WHERE graph_id = %(graph)s AND NOT archived
                AND id >= (k.n + 1) * %(size)s) / %(size)s
        FROM k WHERE k.n IS NOT NULL
    )
    SELECT n FROM k WHERE n IS NOT NULL
""")

# Decay one chunk: the edges of the graph with ids in [lo, hi) that are live, above the floor,
# older than the cutoff and not traversed since it move to ``greatest(floor, w * rate)``
# (``rules.decayed``); the ``answered`` edges (types %(toward_neutral)s), whose weight is evidence
# around neutral, fade toward 0.5 instead (``rules.decayed_evidence``), with one block per span of
# BLOCK_SPAN ids. The rows are visited through the primary key in id order, the order every other
# writer locks in (SESSION_SETTINGS turned sequential and bitmap scans off), and the graph condition
# is written so no index can serve it
# (``graph_id + 0``; otherwise, on a graph holding most of the table, the planner scans the whole
# graph_id index and filters the range). Returns the changes written.
DECAY_RANGE = _statement("""
    WITH updated AS (
        UPDATE {edge} e SET weight = CASE
                WHEN e.edge_type_id = ANY(%(toward_neutral)s::bigint[])
                THEN 0.5 + (e.weight - 0.5) * %(rate)s::double precision
                ELSE greatest(%(floor)s::double precision, e.weight * %(rate)s::double precision)
            END
        WHERE e.id >= %(lo)s AND e.id < %(hi)s AND e.graph_id + 0 = %(graph)s
          AND NOT e.archived AND e.created_at < %(cutoff)s
          AND (e.weight > %(floor)s OR e.edge_type_id = ANY(%(toward_neutral)s::bigint[]))
          AND NOT EXISTS (
              SELECT 1 FROM {edge_stats} s
              WHERE s.edge_id = e.id AND s.graph_id + 0 = %(graph)s AND s.last_traversed_at >= %(cutoff)s
          )
          AND CASE WHEN e.edge_type_id = ANY(%(toward_neutral)s::bigint[])
                   THEN 0.5 + (e.weight - 0.5) * %(rate)s::double precision
                   ELSE greatest(%(floor)s::double precision, e.weight * %(rate)s::double precision)
              END IS DISTINCT FROM e.weight
        RETURNING e.id, old.weight AS before, new.weight AS after
    ),
    history AS (
        INSERT INTO {block} (batch_id, graph_id, target, field, event, created_at,
                             id_min, id_max, size, ids, before, after)
        SELECT %(batch)s, %(graph)s, 'edge', 'weight', 'decay', %(now)s, min(u.id), max(u.id), count(*),
               array_agg(u.id), array_agg(u.before), array_agg(u.after)
        FROM updated u GROUP BY u.id / %(block_span)s
        RETURNING size
    )
    SELECT coalesce(sum(size), 0) FROM history
""")

# Normalize one chunk: the graph's live edges with ids in [lo, hi) move to ``least(1.0, w * factor)``
# (``rules.normalized``; an edge reinforced between chunks is capped at 1.0), with one block per span
# of BLOCK_SPAN ids. Same scan as DECAY_RANGE. Returns the changes written.
NORMALIZE_RANGE = _statement("""
    WITH updated AS (
        UPDATE {edge} e SET weight = least(1.0, e.weight * %(factor)s::double precision)
        WHERE e.id >= %(lo)s AND e.id < %(hi)s AND e.graph_id + 0 = %(graph)s AND NOT e.archived
          AND NOT (e.edge_type_id = ANY(%(evidence_types)s::bigint[]))
          AND least(1.0, e.weight * %(factor)s::double precision) IS DISTINCT FROM e.weight
        RETURNING e.id, old.weight AS before, new.weight AS after
    ),
    history AS (
        INSERT INTO {block} (batch_id, graph_id, target, field, event, created_at,
                             id_min, id_max, size, ids, before, after)
        SELECT %(batch)s, %(graph)s, 'edge', 'weight', 'normalize', %(now)s, min(u.id), max(u.id), count(*),
               array_agg(u.id), array_agg(u.before), array_agg(u.after)
        FROM updated u GROUP BY u.id / %(block_span)s
        RETURNING size
    )
    SELECT coalesce(sum(size), 0) FROM history
""")

# What DECAY_RANGE would change over the whole graph, without writing: how many edges, and the
# first ``limit`` with their weight before and after.
_DECAY_DUE = """
    FROM {edge} e
    WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.created_at < %(cutoff)s
      AND (e.weight > %(floor)s OR (e.edge_type_id = ANY(%(toward_neutral)s::bigint[]) AND e.weight <> 0.5))
      AND NOT EXISTS (
          SELECT 1 FROM {edge_stats} s
          WHERE s.edge_id = e.id AND s.graph_id = %(graph)s AND s.last_traversed_at >= %(cutoff)s
      )
"""
DECAY_PREVIEW_COUNT = _statement("SELECT count(*) {due}", due=_statement(_DECAY_DUE))
DECAY_PREVIEW_SAMPLE = _statement(
    "SELECT e.id, e.weight, CASE WHEN e.edge_type_id = ANY(%(toward_neutral)s::bigint[])"
    " THEN 0.5 + (e.weight - 0.5) * %(rate)s ELSE greatest(%(floor)s, e.weight * %(rate)s) END"
    " {due} ORDER BY e.id LIMIT %(limit)s",
    due=_statement(_DECAY_DUE),
)

# The largest weight among the graph's live edges (the normalize factor is its inverse), evidence
# edges (types %(evidence_types)s: ``answered``, whose weight is evidence, not reinforcement) apart.
MAX_EDGE_WEIGHT = _statement(
    "SELECT max(weight) FROM {edge} WHERE graph_id = %(graph)s AND NOT archived"
    " AND NOT (edge_type_id = ANY(%(evidence_types)s::bigint[]))"
)


# --------------------------------------------------------------------------------------------------
# Manual set and rollback: one (target, field) per statement

# A write made of several statements (a manual set, a rollback: one per target and field) takes its
# row locks first, in the one order every writer uses: all its edges in id order, then all its
# nodes. Otherwise its edge-weight statement could hold a high edge while its feedback-weight
# statement waits for a low one that a concurrent outcome (which locks in id order) already holds.
_LOCK_ROWS = """
    SELECT t.id FROM {table} t
    WHERE t.graph_id = %(graph)s AND t.id = ANY(%(ids)s::bigint[])
    ORDER BY t.id FOR NO KEY UPDATE OF t
"""
_LOCK_BATCH_ROWS = """
    SELECT t.id FROM {table} t
    WHERE t.graph_id = %(graph)s AND t.id IN (
        SELECT w.{target_column} FROM {history} w
        WHERE w.graph_id = %(graph)s AND w.batch_id = %(rolled_back)s AND w.{target_column} IS NOT NULL)
    ORDER BY t.id FOR NO KEY UPDATE OF t
"""
LOCK_ROWS = {kind: _statement(_LOCK_ROWS, table=TABLES[kind]) for kind in ("edge", "node")}
LOCK_BATCH_ROWS = {
    kind: _statement(_LOCK_BATCH_ROWS, table=TABLES[kind], target_column=WEIGHTS[(kind, "feedback_weight")][1])
    for kind in ("edge", "node")
}


def lock_rows(graph_id: int, edge_ids, node_ids) -> None:
    """Lock the given edges, then the given nodes, each in id order (``LOCK_ROWS``)."""
    with connection.cursor() as cur:
        for kind, ids in (("edge", edge_ids), ("node", node_ids)):
            if ids:
                cur.execute(LOCK_ROWS[kind], {"graph": graph_id, "ids": sorted(set(ids))})


def lock_batch_rows(graph_id: int, batch_id: int) -> None:
    """Lock every edge, then every node, whose weights the batch changed, in id order (``LOCK_BATCH_ROWS``)."""
    with connection.cursor() as cur:
        for kind in ("edge", "node"):
            cur.execute(LOCK_BATCH_ROWS[kind], {"graph": graph_id, "rolled_back": batch_id})


def set_weight(target: str, field: str) -> sql.Composed:
    """Set ``field`` of the listed nodes or edges to the given values (``ids``, ``values``: aligned
    arrays), with one WeightChange per change (event ``manual``). Locks the rows in id order and
    reads ``before`` after the lock. Returns the changes written.

    One statement per (target, field): an edge's weight and feedback weight set in one call are two
    statements, since one statement may not update a row twice.
    """
    table, column, target_column = _weight(target, field)
    return _statement(
        """
        WITH locked AS MATERIALIZED (
            SELECT i.id, i.value, t.{column} AS before
            FROM {table} t JOIN unnest(%(ids)s::bigint[], %(values)s::double precision[]) AS i(id, value) ON i.id = t.id
            WHERE t.graph_id = %(graph)s
            ORDER BY t.id FOR NO KEY UPDATE OF t
        ),
        updated AS (
            UPDATE {table} t SET {column} = l.value FROM locked l
            WHERE t.id = l.id AND t.graph_id = %(graph)s AND l.value IS DISTINCT FROM l.before
            RETURNING t.id, l.before, l.value AS after
        ),
        history AS (
            INSERT INTO {change} (batch_id, graph_id, {target_column}, field, before, after, event, use_event_id,
                                  created_at)
            SELECT %(batch)s, %(graph)s, u.id, %(field)s, u.before, u.after, 'manual', NULL, %(now)s FROM updated u
            RETURNING 1
        )
        SELECT count(*) FROM history
        """,
        table=table,
        column=column,
        target_column=target_column,
    )


# The rows a rollback of batch %(rolled_back)s restores for one weight, (id, restore, expected), less those the
# partial rollback %(finishing)s already wrote: one fragment, so ``rollback_restore`` and ``rollback_preview`` agree.
RESTORE_ROWS = """(SELECT w.{target_column} AS id, w.before AS restore, w.after AS expected FROM {history} w
    WHERE w.graph_id = %(graph)s AND w.batch_id = %(rolled_back)s AND w.field = %(field)s
      AND w.{target_column} IS NOT NULL
      AND (%(finishing)s::bigint IS NULL OR NOT EXISTS (
           SELECT 1 FROM {history} r
           WHERE r.graph_id = %(graph)s AND r.batch_id = %(finishing)s AND r.field = %(field)s
             AND r.{target_column} = w.{target_column})))"""


def rollback_restore(target: str, field: str) -> sql.Composed:
    """Restore ``field`` of every node or edge batch ``rolled_back`` changed to its ``before`` value.

    A row is restored only where its current value still equals the batch's ``after``; the others
    are conflicts: counted, the first CONFLICT_SAMPLE ids listed, and left alone unless ``force``
    (then overwritten, with event ``rollback_forced``). The history has the shape of the batch's:
    rows, or blocks when ``blocks`` (one of the two INSERTs writes, the other's WHERE is false).
    Locks the rows in id order and reads the current value after the lock. Returns (changes
    written, conflicts, sample of conflicting ids). With ``finishing`` (a partial rollback's batch id,
    else NULL), only the rows that rollback did not write: the remaining ones, which ``force`` then
    overwrites (``actions.do_finish_rollback``).
    """
    table, column, target_column = _weight(target, field)
    return _statement(
        """
        WITH locked AS MATERIALIZED (
            SELECT h.restore, h.expected, t.id, t.{column} AS before
            FROM {table} t
            JOIN {restore_rows} h ON h.id = t.id
            WHERE t.graph_id = %(graph)s
            ORDER BY t.id FOR NO KEY UPDATE OF t
        ),
        decided AS (
            SELECT id, before, before IS NOT DISTINCT FROM expected AS matches,
                   CASE WHEN before IS NOT DISTINCT FROM expected OR %(force)s::boolean THEN restore ELSE before END
                       AS after
            FROM locked
        ),
        updated AS (
            UPDATE {table} t SET {column} = d.after FROM decided d
            WHERE t.id = d.id AND t.graph_id = %(graph)s AND d.after IS DISTINCT FROM d.before
            RETURNING t.id, d.before, d.after, CASE WHEN d.matches THEN 'rollback' ELSE 'rollback_forced' END AS event
        ),
        history_rows AS (
            INSERT INTO {change} (batch_id, graph_id, {target_column}, field, before, after, event, use_event_id,
                                  created_at)
            SELECT %(batch)s, %(graph)s, u.id, %(field)s, u.before, u.after, u.event, NULL, %(now)s
            FROM updated u WHERE NOT %(blocks)s::boolean
            RETURNING 1 AS size
        ),
        history_blocks AS (
            INSERT INTO {block} (batch_id, graph_id, target, field, event, created_at,
                             id_min, id_max, size, ids, before, after)
            SELECT %(batch)s, %(graph)s, %(target)s, %(field)s, u.event, %(now)s, min(u.id), max(u.id), count(*),
                   array_agg(u.id), array_agg(u.before), array_agg(u.after)
            FROM updated u WHERE %(blocks)s::boolean GROUP BY u.event, u.id / %(block_span)s
            RETURNING size
        )
        SELECT (SELECT coalesce(sum(size), 0) FROM history_rows) + (SELECT coalesce(sum(size), 0) FROM history_blocks),
               (SELECT count(*) FROM decided WHERE NOT matches),
               (SELECT coalesce(array_agg(id ORDER BY id), ARRAY[]::bigint[])
                FROM (SELECT id FROM decided WHERE NOT matches ORDER BY id LIMIT %(conflict_sample)s) first)
        """,
        table=table,
        column=column,
        target_column=target_column,
        restore_rows=_statement(RESTORE_ROWS, target_column=target_column),
    )


def rollback_preview(target: str, field: str) -> sql.Composed:
    """What ``rollback_restore`` would do now, without a lock or a write: (values it would restore,
    conflicts, conflicts a forced rollback would overwrite, sample of conflicting ids).

    The same rows and the same rule as ``rollback_restore`` (a row is restored where its current
    value still equals the batch's ``after``, and written only where that changes it), so the preview
    and the rollback that follows report the same counts when nothing is written in between. Takes
    the same ``finishing`` parameter. A plain read; the rollback itself re-reads under its locks.
    """
    table, column, target_column = _weight(target, field)
    return _statement(
        """
        WITH decided AS (
            SELECT t.id, t.{column} AS now, h.restore, t.{column} IS NOT DISTINCT FROM h.expected AS matches
            FROM {table} t
            JOIN {restore_rows} h ON h.id = t.id
            WHERE t.graph_id = %(graph)s
        )
        SELECT count(*) FILTER (WHERE matches AND restore IS DISTINCT FROM now),
               count(*) FILTER (WHERE NOT matches),
               count(*) FILTER (WHERE NOT matches AND restore IS DISTINCT FROM now),
               (SELECT coalesce(array_agg(id ORDER BY id), ARRAY[]::bigint[])
                FROM (SELECT id FROM decided WHERE NOT matches ORDER BY id LIMIT %(conflict_sample)s) first)
        FROM decided
        """,
        table=table,
        column=column,
        restore_rows=_statement(RESTORE_ROWS, target_column=target_column),
    )


# --------------------------------------------------------------------------------------------------
# Links the graph learns: co_used edges

# Pairs (a < b) of nodes used in the session that are used together in at least ``threshold``
# accepted sessions of the graph and that no edge links (either way, any type; an archived co_used
# edge counts, so a rolled-back link stays undone). "Used": an explicit or implicit use event on the
# node itself (path credit is not a use). A self-join of the session's uses with the graph's,
# grouped by pair, that the ORM would write as several queries; every table filtered by graph_id.
CO_USED_PAIRS = _statement("""
    WITH mine AS (
        SELECT DISTINCT u.node_id FROM {use_event} u
        WHERE u.graph_id = %(graph)s AND u.session_id = %(session)s AND u.node_id IS NOT NULL
          AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
    ),
    pairs AS (SELECT a.node_id AS a, b.node_id AS b FROM mine a JOIN mine b ON a.node_id < b.node_id),
    together AS (
        SELECT p.a, p.b, count(DISTINCT ua.session_id) AS n
        FROM pairs p
        JOIN {use_event} ua ON ua.graph_id = %(graph)s AND ua.node_id = p.a
             AND ua.signal IN ('explicit', 'implicit') AND ua.source <> 'path'
        JOIN {use_event} ub ON ub.graph_id = %(graph)s AND ub.node_id = p.b AND ub.session_id = ua.session_id
             AND ub.signal IN ('explicit', 'implicit') AND ub.source <> 'path'
        JOIN {session} s ON s.id = ua.session_id AND s.graph_id = %(graph)s AND s.outcome = 'accepted'
        GROUP BY p.a, p.b
        HAVING count(DISTINCT ua.session_id) >= %(threshold)s
    )
    SELECT t.a, t.b, t.n FROM together t
    WHERE NOT EXISTS (
        SELECT 1 FROM {edge} e
        JOIN {edge_type} et ON et.id = e.edge_type_id AND et.graph_id = %(graph)s
        WHERE e.graph_id = %(graph)s
          AND ((e.source_id = t.a AND e.target_id = t.b) OR (e.source_id = t.b AND e.target_id = t.a))
          AND (NOT e.archived OR et.name = %(co_used)s)
    )
    ORDER BY t.a, t.b
""")

# Create the learned edges (aligned arrays of sources, targets and triplet vectors in pgvector's
# text form, NULL for none), weight and feedback weight neutral; an edge that already exists
# (a concurrent link of another session) is skipped. Returns the ids created.
INSERT_LINKS = _statement("""
    INSERT INTO {edge} (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight,
                        triplet_embedding, embedding_model, archived, created_at, updated_at)
    SELECT %(graph)s, x.s, x.t, %(type)s, 0.5, 0.5, x.v::vector,
           CASE WHEN x.v IS NULL THEN '' ELSE %(model)s END, false, now(), now()
    FROM unnest(%(sources)s::bigint[], %(targets)s::bigint[], %(vectors)s::text[]) AS x(s, t, v)
    ON CONFLICT (source_id, target_id, edge_type_id) DO NOTHING
    RETURNING id
""")


# --------------------------------------------------------------------------------------------------
# Question-conditional evidence: question nodes and their ``answered`` edges (rules.answered_after)

# The graph's nearest question node to a query vector of model %(model)s (through the partial HNSW
# index over question nodes, ``node_question_hnsw``), with its cosine similarity; no row: none yet.
NEAREST_QUESTION = _statement("""
    SELECT n.id, 1 - (n.embedding <=> %(query)s::vector) AS similarity
    FROM {node} n
    WHERE n.graph_id = %(graph)s AND n.kind = %(kind)s AND NOT n.archived AND n.embedding IS NOT NULL
      AND n.embedding_model = %(model)s
    ORDER BY n.embedding <=> %(query)s::vector
    LIMIT 1
""")

# Pairs of reported questions, for the graph's evidence similarity (rules.evidence_similarity): the
# %(limit)s latest question nodes with a reported use (an ``answered`` edge of type %(type)s at weight
# %(used)s, rules.USED_WEIGHT), each with its %(near)s nearest such questions (cosine), and whether the two
# share a used note. Each pair once. Named SQL: the nearest-neighbour walk and the set test are one pass in the
# database (the ORM has neither the vector distance in a lateral join nor the correlated EXISTS).
QUESTION_PAIRS = _statement("""
    WITH asked AS MATERIALIZED (
        SELECT n.id, n.embedding
        FROM {node} n
        WHERE n.graph_id = %(graph)s AND n.kind = %(kind)s AND NOT n.archived AND n.embedding IS NOT NULL
          AND EXISTS (SELECT 1 FROM {edge} e WHERE e.graph_id = %(graph)s AND e.source_id = n.id
                      AND e.edge_type_id = %(type)s AND NOT e.archived AND e.weight >= %(used)s)
        ORDER BY n.id DESC
        LIMIT %(limit)s
    ),
    pairs AS (
        SELECT DISTINCT LEAST(a.id, b.id) AS a, GREATEST(a.id, b.id) AS b, b.similarity
        FROM asked a
        CROSS JOIN LATERAL (
            SELECT o.id, 1 - (o.embedding <=> a.embedding) AS similarity
            FROM asked o WHERE o.id <> a.id
            ORDER BY o.embedding <=> a.embedding
            LIMIT %(near)s
        ) b
    )
    SELECT p.similarity,
           EXISTS (SELECT 1 FROM {edge} x JOIN {edge} y ON y.target_id = x.target_id
                   WHERE x.graph_id = %(graph)s AND y.graph_id = %(graph)s
                     AND x.source_id = p.a AND y.source_id = p.b
                     AND x.edge_type_id = %(type)s AND y.edge_type_id = %(type)s
                     AND NOT x.archived AND NOT y.archived AND x.weight >= %(used)s AND y.weight >= %(used)s) AS agree
    FROM pairs p
""")

# The graph's evidence similarity (rules.evidence_similarity), NULL when there is none yet.
SET_EVIDENCE_SIMILARITY = _statement("""
    UPDATE {graphs} SET evidence_similarity = %(similarity)s
    WHERE id = %(graph)s AND evidence_similarity IS DISTINCT FROM %(similarity)s
""")

# The ``answered`` edges (type %(type)s) from question to note for the aligned arrays, neutral (0.5:
# no evidence yet, so creating one changes no ranking), with no triplet embedding (they are found
# from their question, never as entry points). Existing edges are kept as they are.
INSERT_ANSWERED = _statement("""
    INSERT INTO {edge} (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight,
                        triplet_embedding, embedding_model, archived, created_at, updated_at)
    SELECT %(graph)s, x.q, x.n, %(type)s, 0.5, 0.5, NULL, '', false, %(now)s, %(now)s
    FROM unnest(%(questions)s::bigint[], %(nodes)s::bigint[]) AS x(q, n)
    ORDER BY x.q, x.n
    ON CONFLICT (source_id, target_id, edge_type_id) DO NOTHING
""")

# Move the ``answered`` edges' weight by the evidence (``rules.answered_after``: used 1, flagged 0,
# not_used halfway to 0, shown_accepted halfway to 1), one WeightChange each (event: the evidence),
# in batch %(batch)s. Rows locked in id order, ``before`` read after the lock. Returns the changes.
TEACH = _statement("""
    WITH locked AS MATERIALIZED (
        SELECT t.id, x.evidence, t.weight AS before
        FROM {edge} t
        JOIN unnest(%(questions)s::bigint[], %(nodes)s::bigint[], %(evidence)s::text[]) AS x(q, n, evidence)
          ON t.source_id = x.q AND t.target_id = x.n AND t.edge_type_id = %(type)s
        WHERE t.graph_id = %(graph)s
        ORDER BY t.id FOR NO KEY UPDATE OF t
    ),
    new AS (
        SELECT id, evidence, before,
               CASE evidence WHEN 'used' THEN 1.0::double precision
                             WHEN 'flagged' THEN 0.0::double precision
                             WHEN 'not_used' THEN before / 2
                             WHEN 'shown_accepted' THEN before + (1 - before) / 2 END AS after
        FROM locked
    ),
    updated AS (
        UPDATE {edge} t SET weight = n.after FROM new n
        WHERE t.id = n.id AND t.graph_id = %(graph)s AND n.after IS DISTINCT FROM n.before
        RETURNING t.id, n.before, n.after, n.evidence
    ),
    history AS (
        INSERT INTO {change} (batch_id, graph_id, edge_id, field, before, after, event, use_event_id, created_at)
        SELECT %(batch)s, %(graph)s, u.id, 'weight', u.before, u.after, u.evidence, NULL, %(now)s FROM updated u
        RETURNING 1
    )
    SELECT count(*) FROM history
""")


# A session's selected candidates by injection, the nodes its reports used or flagged (not path
# credit), and its injections' questions (those with a query vector): what its question evidence
# reads and teaches, in one statement (``session_shown``).
SESSION_SHOWN = _statement("""
    SELECT 'shown', c.injection_id, c.node_id, NULL::real[], NULL::text, NULL::text
    FROM {candidate} c JOIN {injection} i ON i.id = c.injection_id
    WHERE c.graph_id = %(graph)s AND i.graph_id = %(graph)s AND i.session_id = %(session)s AND c.selected
    UNION ALL
    SELECT CASE WHEN u.signal = 'negative' THEN 'flagged' ELSE 'used' END, NULL, u.node_id, NULL, NULL, NULL
    FROM {use_event} u
    WHERE u.graph_id = %(graph)s AND u.session_id = %(session)s AND u.node_id IS NOT NULL AND u.source <> 'path'
    UNION ALL
    SELECT 'query', i.id, NULL, i.query_embedding::real[], i.query_model::text, i.query::text
    FROM {injection} i
    WHERE i.graph_id = %(graph)s AND i.session_id = %(session)s AND i.query_embedding IS NOT NULL
""")


@dataclass(frozen=True, slots=True)
class Shown:
    """What a session was shown and reported, for its question evidence (``session_shown``).

    ``shown``: injection id -> selected node ids; ``used``: node ids reported used (explicit or
    implicit, not path credit); ``flagged``: node ids flagged negative; ``asked``: injection id ->
    (query vector, its model, query text) for the injections with a query vector.
    """

    shown: dict[int, set[int]]
    used: set[int]
    flagged: set[int]
    asked: dict[int, tuple]


def session_shown(session: AgentSession) -> Shown:
    """What a session was shown, reported and asked (one statement, SESSION_SHOWN)."""
    found = Shown({}, set(), set(), {})
    params = {"graph": session.graph_id, "session": session.pk}
    for what, injection_id, node_id, vector, model, query in fetch_all(SESSION_SHOWN, params):
        if what == "shown":
            found.shown.setdefault(injection_id, set()).add(node_id)
        elif what == "query":
            found.asked[injection_id] = (vector, model, query)
        else:
            (found.flagged if what == "flagged" else found.used).add(node_id)
    return found


# --------------------------------------------------------------------------------------------------
# One target's history


# The changes of one node or edge (``{target_column}``: ``node_id`` or ``edge_id``), newest first, as
# rows of the view ``feedback_weighthistory`` (model WeightHistory, the same columns). Not a filter on
# the view: the view unnests each block whole, and a block holds up to BLOCK_SPAN changes, so on an
# edge decayed a hundred times the view takes about twenty times longer
# (docs/history/performance-first-build.md, "One target's history"). Here rows come from the (graph,
# target, time) index; a block is read only when its id bounds hold the target, and only at the
# target's position (``array_position``). ``only_field``: the field or NULL
# for both; ``latest``: at most that many (NULL: all).
def _history_of(target_column: sql.Identifier) -> sql.Composed:
    return _statement(
        """
        SELECT * FROM (
            SELECT 'c' || w.id AS key, w.id AS change_id, NULL::bigint AS block_id, w.id AS seq, w.batch_id,
                   w.graph_id, w.node_id, w.edge_id, w.field, w.before, w.after, w.event, w.use_event_id,
                   w.created_at, %(target)s::bigint AS span_min, %(target)s::bigint AS span_max
            FROM {change} w
            WHERE w.graph_id = %(graph)s AND w.{target_column} = %(target)s
              AND (%(only_field)s::text IS NULL OR w.field = %(only_field)s)
            UNION ALL
            SELECT 'b' || b.id || '.' || p, NULL::bigint, b.id, p::bigint, b.batch_id, b.graph_id,
                   CASE WHEN b.target = 'node' THEN %(target)s::bigint END,
                   CASE WHEN b.target = 'edge' THEN %(target)s::bigint END,
                   b.field, b.before[p], b.after[p], b.event, NULL::bigint, b.created_at, b.id_min, b.id_max
            FROM {block} b
            CROSS JOIN LATERAL array_position(b.ids, %(target)s::bigint) AS p
            WHERE b.graph_id = %(graph)s AND b.target = %(kind)s AND b.id_min <= %(target)s AND b.id_max >= %(target)s
              AND p IS NOT NULL AND (%(only_field)s::text IS NULL OR b.field = %(only_field)s)
        ) h
        ORDER BY created_at DESC, change_id DESC NULLS LAST, block_id DESC, seq DESC
        LIMIT %(latest)s
        """,
        target_column=target_column,
    )


HISTORY_OF = {kind: _history_of(column) for (kind, _field), (_table, column) in WEIGHTS.items()}


def history_of(graph, kind: str, target_id: int, *, field: str | None = None, latest: int | None = None):
    """The changes of one node or edge, newest first (at most ``latest``), as WeightHistory rows with
    their batches prefetched (``HISTORY_OF``)."""
    if kind not in HISTORY_OF:
        raise ValueError(f"kind must be one of {tuple(HISTORY_OF)}")
    params = {
        "graph": getattr(graph, "pk", graph),
        "kind": kind,
        "target": target_id,
        "only_field": field,
        "latest": latest or None,
    }
    connection.ensure_connection()
    return WeightHistory.objects.raw(HISTORY_OF[kind].as_string(connection.connection), params).prefetch_related(
        "batch"
    )


def _batches_not_audited_once() -> sql.Composed:
    return sql.SQL(
        """
        SELECT b.id, b.kind, count(e.id) AS events
        FROM {batch} b
        LEFT JOIN {event} e
          ON e.organization_id = %(organization)s AND e.action = ANY(%(actions)s::text[])
         AND e.payload ? 'batch' AND jsonb_typeof(e.payload -> 'batch') = 'number'
         AND (e.payload ->> 'batch')::bigint = b.id
        WHERE b.graph_id IN (SELECT g.id FROM {graph} g WHERE g.organization_id = %(organization)s)
        GROUP BY b.id, b.kind
        HAVING count(e.id) <> 1
        ORDER BY b.id
        LIMIT %(limit)s
        """
    ).format(batch=_table(UpdateBatch), event=_table(AuditEvent), graph=_table(Graph))


# Every UpdateBatch of an organization's graphs whose audit events (by the batch id in the payload) are not
# exactly one: none (written past the write path) or several (a duplicated event). Raw SQL: the ORM cannot
# join on a key inside a JSON payload cast to bigint. A hash join over the organization's events.
BATCHES_NOT_AUDITED_ONCE = _batches_not_audited_once()


# --------------------------------------------------------------------------------------------------
# Reads of the write path


# Each named statement's text, composed once per process: psycopg composes a ``sql.Composed`` again on
# every execution (its identifiers quoted, its parts joined), then parses the placeholders of the text,
# which it caches for a str. Keyed by the statement object's id, kept alive beside its text.
_TEXTS: dict[int, tuple[sql.Composable, str]] = {}


def _text(statement) -> str:
    if not isinstance(statement, sql.Composable):
        return statement
    hit = _TEXTS.get(id(statement))
    if hit is None or hit[0] is not statement:
        hit = _TEXTS[id(statement)] = (statement, statement.as_string(None))
    return hit[1]


def fetch(statement: sql.Composed, params: dict) -> tuple | None:
    """Run one statement; its first row."""
    with connection.cursor() as cur:
        cur.execute(_text(statement), params)
        return cur.fetchone()


def execute(statement: sql.Composed, params: dict) -> None:
    """Run one statement that returns no rows."""
    with connection.cursor() as cur:
        cur.execute(_text(statement), params)


def fetch_all(statement: sql.Composed, params: dict) -> list[tuple]:
    """Run one statement; all its rows."""
    with connection.cursor() as cur:
        cur.execute(_text(statement), params)
        return cur.fetchall()


def chunk_ranges(graph: Graph, chunk_size: int) -> list[int]:
    """The k of the id ranges ``[k * chunk_size, (k + 1) * chunk_size)`` holding live edges of the graph."""
    return [row[0] for row in fetch_all(CHUNK_RANGES, {"graph": graph.pk, "size": chunk_size})]


def evidence_types(graph: Graph) -> list[int]:
    """The graph's ``answered`` edge type, if any (0 or 1 id): its edges hold evidence around neutral, so
    decay fades them toward 0.5 and normalize leaves them alone."""
    return list(EdgeType.objects.filter(graph=graph, name=rules.ANSWERED).values_list("pk", flat=True))


def max_edge_weight(graph: Graph) -> float | None:
    """The largest weight among the graph's live edges, evidence edges apart (None for no edge)."""
    return fetch(MAX_EDGE_WEIGHT, {"graph": graph.pk, "evidence_types": evidence_types(graph)})[0]


def decay_period(graph: Graph, now: datetime | None = None, *, policy=None) -> tuple[int, datetime, datetime]:
    """``rules.decay_period`` at ``now`` (default: the current time) for the graph's policy."""
    days = (policy or graph.current_policy()).decay_period_days
    return rules.decay_period(now or datetime.now(UTC), days)


def decay_preview(graph: Graph, *, now: datetime | None = None, limit: int = 20) -> dict:
    """What ``actions.do_decay`` would change now, without writing: the count and the first ``limit`` edges."""
    policy = graph.current_policy()
    period, _start, cutoff = decay_period(graph, now, policy=policy)
    rate, floor = policy.decay_rate, policy.weight_floor
    params = {
        "graph": graph.pk,
        "cutoff": cutoff,
        "floor": floor,
        "rate": rate,
        "limit": limit,
        "toward_neutral": evidence_types(graph),
    }
    (total,) = fetch(DECAY_PREVIEW_COUNT, params)
    sample = fetch_all(DECAY_PREVIEW_SAMPLE, params)
    applied = UpdateBatch.objects.filter(idempotency_key__startswith=f"decay:{graph.pk}:{period}:").count()
    return {
        "period": period,
        "cutoff": cutoff.isoformat(),
        "rate": rate,
        "floor": floor,
        "edges": total,
        "sample": [{"edge": i, "before": b, "after": a} for i, b, a in sample],
        "chunks_already_applied": applied,
    }


def unknown_target(graph: Graph, items: list[rules.UseItem]) -> tuple[int, str, int] | None:
    """The first item that is not a live node or edge of this graph, as (index, kind, id); None when
    all are (another graph's ids read as unknown). One query per kind reported."""
    for kind, model in (("node", Node), ("edge", Edge)):
        wanted = {i.id for i in items if i.kind == kind}
        if not wanted:
            continue
        found = set(model.objects.filter(graph=graph, archived=False, pk__in=wanted).values_list("pk", flat=True))
        missing = sorted(wanted - found)
        if missing:
            index = next(n for n, i in enumerate(items) if i.kind == kind and i.id == missing[0])
            return index, kind, missing[0]
    return None


# Which of the given node and edge ids are live (not archived) in the graph: one statement for a
# drained batch's reports (``feedback.report.stale_items``).
LIVE_TARGETS = _statement("""
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


def credit_targets(
    session: AgentSession, items: list[rules.UseItem]
) -> tuple[list[rules.UseItem], set[tuple[str, int]]]:
    """What a use report of ``items`` credits, in one statement (PATH_AND_CREDITED): the edges it
    credits besides its items (``rules.credit_paths``, from the session's selected candidates of the
    reported nodes), and the (kind, id) of every node and edge already credited (or flagged) in the
    session, which are skipped."""
    nodes = [i.id for i in items if i.kind == "node"]
    candidates, credited = [], set()
    for what, node, injection, edge, features in fetch_all(
        PATH_AND_CREDITED, {"graph": session.graph_id, "session": session.pk, "nodes": nodes}
    ):
        if what == "candidate":
            # Django's connection reads jsonb as text (its JSONField decodes it): decoded here.
            candidates.append((node, injection, edge, json.loads(features) if isinstance(features, str) else features))
        else:
            credited.add(("node", node) if node else ("edge", edge))
    return (rules.credit_paths(items, candidates) if nodes else []), credited


# The session's selected candidates of the given nodes (``credit_targets``: the paths that surfaced
# them), then the nodes and edges the session's use events already credited.
PATH_AND_CREDITED = _statement("""
    SELECT 'candidate', c.node_id, c.injection_id, c.edge_id, c.features
    FROM {candidate} c JOIN {injection} i ON i.id = c.injection_id
    WHERE c.graph_id = %(graph)s AND i.graph_id = %(graph)s AND i.session_id = %(session)s AND c.selected
      AND c.node_id = ANY(%(nodes)s::bigint[])
    UNION ALL
    SELECT 'credited', u.node_id, NULL, u.edge_id, NULL
    FROM {use_event} u
    WHERE u.graph_id = %(graph)s AND u.session_id = %(session)s
""")


def _session_columns() -> sql.Composed:
    return sql.SQL(", ").join(
        sql.SQL("s.{}").format(sql.Identifier(f.column)) for f in AgentSession._meta.concrete_fields
    )


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
    kind: _statement(_REPORT_SESSION, columns=_session_columns(), needs=_statement(needs))
    for kind, needs in (("uses", _USES_NEED), ("outcome", _OUTCOME_NEEDS), ("response", ""))
}


def live_nodes(graph_id: int, ids) -> set[int]:
    """The ids among ``ids`` that are live (not archived) nodes of the graph; one query (named, as the
    intake's other reads: building the ORM's query cost more Python than running it)."""
    return {row[0] for row in fetch_all(LIVE_NODES, {"graph": graph_id, "ids": list(ids)})}


# The live nodes of the graph among the given ids (``live_nodes``).
LIVE_NODES = _statement("""
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
LIVE_EDGES = _statement("""
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
INSERT_REPORT = _statement("""
    INSERT INTO {report} (graph_id, session_id, kind, payload, idempotency_key, user_id, state, created_at,
                          not_before, applied_at, attempts, last_error, result)
    VALUES (%(graph)s, %(session)s, %(kind)s, %(payload)s::jsonb, %(key)s, %(user)s, 'pending', %(now)s,
            %(now)s, NULL, 0, '', '{{}}'::jsonb)
    ON CONFLICT DO NOTHING
""")


# Lock a session's row (``FOR NO KEY UPDATE``): the first step of every write on its reports.
LOCK_SESSION = _statement("""
    SELECT s.id FROM {session} s WHERE s.graph_id = %(graph)s AND s.id = %(session)s FOR NO KEY UPDATE OF s
""")

# The id of the graph's batch with this idempotency key, if any.
BATCH_BY_KEY = _statement("""
    SELECT b.id FROM {batch} b WHERE b.graph_id = %(graph)s AND b.idempotency_key = %(key)s
""")

# Use events, one per aligned array element; their ids in that order.
INSERT_USE_EVENTS = _statement("""
    INSERT INTO {use_event} (graph_id, session_id, injection_id, node_id, edge_id, signal, source, created_at)
    SELECT %(graph)s, %(session)s, x.injection, x.node, x.edge, x.signal, x.source, %(now)s
    FROM unnest(%(injections)s::bigint[], %(nodes)s::bigint[], %(edges)s::bigint[], %(signals)s::text[],
                %(sources)s::text[]) WITH ORDINALITY AS x(injection, node, edge, signal, source, n)
    ORDER BY x.n
    RETURNING id
""")

# A finished batch's counts, details and timings (``ledger.finish``).
FINISH_BATCH = _statement("""
    UPDATE {batch} SET node_updates = %(node_updates)s, edge_updates = %(edge_updates)s, conflicts = %(conflicts)s,
        details = %(details)s, finished_at = %(finished_at)s, duration_ms = %(duration_ms)s
    WHERE graph_id = %(graph)s AND id = %(id)s
""")


def selected_candidates(session: AgentSession) -> list[dict]:
    """The session's selected candidates, one per node (its latest injection), with title and text:
    what implicit-use detection reads (``rules.detect_implicit``)."""
    rows = (
        InjectionCandidate.objects.filter(
            graph_id=session.graph_id, injection__session=session, injection__graph_id=session.graph_id, selected=True
        )
        .order_by("node_id", "-injection_id")
        .distinct("node_id")
        .values("node_id", "edge_id", "injection_id", "node__title", "node__text")
    )
    return [
        {
            "node_id": r["node_id"],
            "edge_id": r["edge_id"],
            "injection_id": r["injection_id"],
            "title": r["node__title"],
            "text": r["node__text"],
        }
        for r in rows
    ]


def co_used_pairs(session: AgentSession, threshold: int, co_used: str = "co_used") -> list[tuple[int, int, int]]:
    """(a, b, sessions) for the pairs of CO_USED_PAIRS: nodes of ``session`` used together in at least
    ``threshold`` accepted sessions and not linked yet."""
    params = {"graph": session.graph_id, "session": session.pk, "threshold": threshold, "co_used": co_used}
    return [tuple(r) for r in fetch_all(CO_USED_PAIRS, params)]


# --------------------------------------------------------------------------------------------------
# Learning at a glance (the overview): per week, from the ledgers

# Per UTC week (Monday first) of the sessions whose first injection falls in it (within [since, until)): how
# many, how many used at least one of their top ``k`` ranked selected candidates (an explicit or implicit
# use event on that node or on the edge that reached it; path credit is not a use, as in the daily
# rollup), how many had an outcome reported, and their mean outcome score. A score is the outcome's
# number in the policy revision in effect when it was reported (the number its outcome EMA used; the
# first revision for an outcome stamped before any, as an import's clock may leave it). Raw
# SQL: a per-session EXISTS over candidates and use events and a LATERAL pick of the revision in effect,
# which the ORM would write as one query per week; every table filtered by graph_id. The EXISTS starts
# from the session's own use events (index on session_id), not from the candidates' nodes: a popular
# node has use events in thousands of sessions, a session has a handful.
WEEKLY_LEARNING = _statement("""
    WITH first_seen AS (
        SELECT j.session_id, min(j.created_at) AS at FROM {injection} j
        WHERE j.graph_id = %(graph)s AND j.created_at >= %(since)s AND j.created_at < %(until)s
          AND NOT EXISTS (
              SELECT 1 FROM {injection} j0
              WHERE j0.graph_id = %(graph)s AND j0.session_id = j.session_id AND j0.created_at < %(since)s
          )
        GROUP BY j.session_id
    ),
    cohort AS (
        SELECT f.session_id, date_trunc('week', f.at AT TIME ZONE 'UTC')::date AS week, s.outcome, s.outcome_at,
               EXISTS (
                   SELECT 1 FROM {use_event} u
                   WHERE u.session_id = f.session_id AND u.graph_id = %(graph)s
                     AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
                     AND EXISTS (
                         SELECT 1 FROM {injection} j JOIN {candidate} c ON c.injection_id = j.id
                         WHERE j.session_id = f.session_id AND j.graph_id = %(graph)s AND c.graph_id = %(graph)s
                           AND c.selected AND c.rank <= %(k)s AND (c.node_id = u.node_id OR c.edge_id = u.edge_id)
                     )
               ) AS used
        FROM first_seen f JOIN {session} s ON s.id = f.session_id AND s.graph_id = %(graph)s
        WHERE %(owners)s::bigint[] IS NULL OR s.owner_id = ANY(%(owners)s::bigint[])
              OR (%(unowned)s AND s.owner_id IS NULL)
    )
    SELECT c.week, count(*) AS sessions, count(*) FILTER (WHERE c.used) AS used,
           count(c.outcome) AS outcomes, avg(score.value) AS mean_score
    FROM cohort c
    LEFT JOIN LATERAL (
        SELECT CASE c.outcome WHEN 'accepted' THEN p.outcome_accepted WHEN 'rework' THEN p.outcome_rework
                              WHEN 'rejected' THEN p.outcome_rejected END AS value
        FROM {policy} p
        WHERE p.graph_id = %(graph)s AND (p.created_at <= c.outcome_at OR p.revision = 1)
        ORDER BY p.revision DESC LIMIT 1
    ) score ON c.outcome IS NOT NULL
    GROUP BY c.week ORDER BY c.week
""")

# The marks on the weekly axis, in time order: each policy revision after the first written in
# [since, until) (kind ``policy``: its number and note), and each decay run (kind ``decay``): one
# period's chunk batches (``do_decay`` writes one batch per chunk, keyed by the period), at its first
# batch's time, with the edges it changed and whether every batch of it was rolled back since. One
# statement for both (a UNION the ORM has no readable form for), each part filtered by graph_id.
LEARNING_MARKS = _statement("""
    SELECT 'policy' AS kind, p.created_at AS at, p.revision::bigint AS number, p.note AS note,
           0::bigint AS edges, false AS rolled_back
    FROM {policy} p
    WHERE p.graph_id = %(graph)s AND p.revision > 1 AND p.created_at >= %(since)s AND p.created_at < %(until)s
    UNION ALL
    SELECT 'decay', min(b.started_at), (b.details ->> 'period')::bigint, '', sum(b.edge_updates)::bigint,
           bool_and(b.status <> 'applied')
    FROM {batch} b
    WHERE b.graph_id = %(graph)s AND b.kind = 'decay' AND b.started_at >= %(since)s AND b.started_at < %(until)s
    GROUP BY (b.details ->> 'period')::bigint
    ORDER BY at, kind
""")

# The overview's counts of one graph's sessions, injections and batches, in one round trip.
GRAPH_COUNTS = _statement("""
    SELECT (SELECT count(*) FROM {session} WHERE graph_id = %(graph)s),
           (SELECT count(*) FROM {injection} WHERE graph_id = %(graph)s),
           (SELECT count(*) FROM {batch} WHERE graph_id = %(graph)s)
""")


def weekly_learning(
    graph, since: datetime, until: datetime, k: int, owners: list[int] | None = None, unowned: bool = False
) -> list[tuple]:
    """Rows of WEEKLY_LEARNING: (week start, sessions, used, outcomes, mean outcome score or None), over the
    sessions of ``owners`` (user ids; None: every session) and, with ``unowned``, those without an owner."""
    params = {"graph": getattr(graph, "pk", graph), "since": since, "until": until, "k": k}
    params.update(owners=owners, unowned=unowned)
    return fetch_all(WEEKLY_LEARNING, params)


# One row per session whose first injection falls in [since, until): where the first item it used was ranked,
# for the rank-dependent measures of feedback.analysis (mean reciprocal rank of the first used item, the share
# of sessions whose top item was used) and the per-session CSV. "Used" is what WEEKLY_LEARNING counts (an
# explicit or implicit use, not path credit) of a candidate the session was given (selected); the rank is the
# candidate log's, the best over the session's injections. The outcome is scored by the policy revision in
# effect when it was reported, as in WEEKLY_LEARNING; the revision is the one the first injection ran under.
# A statement of its own: a per-session minimum over a join of three ledgers, with the two laterals.
# Its ranks MATERIALIZED: docs/decisions/0010-session-ranks-materialized.md
SESSION_RANKS = _statement("""
    WITH first_seen AS MATERIALIZED (
        SELECT j.session_id, min(j.created_at) AS at FROM {injection} j
        WHERE j.graph_id = %(graph)s
        GROUP BY j.session_id
        HAVING min(j.created_at) >= %(since)s AND min(j.created_at) < %(until)s
    ),
    -- Computed once for all the sessions (MATERIALIZED): inlined, a planner without statistics (a graph
    -- just filled) ran it once per session over every first_seen row, seconds instead of milliseconds.
    ranks AS MATERIALIZED (
        SELECT j.session_id, min(c.rank) AS first_used_rank
        FROM {injection} j
        JOIN {candidate} c ON c.injection_id = j.id AND c.graph_id = %(graph)s AND c.selected
        WHERE j.graph_id = %(graph)s AND j.session_id IN (SELECT session_id FROM first_seen)
          AND EXISTS (
              SELECT 1 FROM {use_event} u
              WHERE u.session_id = j.session_id AND u.graph_id = %(graph)s
                AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
                AND (c.node_id = u.node_id OR c.edge_id = u.edge_id)
          )
        GROUP BY j.session_id
    )
    SELECT s.id, s.external_id, s.owner_id, f.at, s.outcome, score.value, rev.revision, r.first_used_rank
    FROM first_seen f
    JOIN {session} s ON s.id = f.session_id AND s.graph_id = %(graph)s
    LEFT JOIN ranks r ON r.session_id = f.session_id
    LEFT JOIN LATERAL (
        SELECT p.revision FROM {injection} j JOIN {policy} p ON p.id = j.policy_revision_id
        WHERE j.session_id = f.session_id AND j.graph_id = %(graph)s
        ORDER BY j.created_at, j.id LIMIT 1
    ) rev ON true
    LEFT JOIN LATERAL (
        SELECT CASE s.outcome WHEN 'accepted' THEN p.outcome_accepted WHEN 'rework' THEN p.outcome_rework
                              WHEN 'rejected' THEN p.outcome_rejected END AS value
        FROM {policy} p
        WHERE p.graph_id = %(graph)s AND (p.created_at <= s.outcome_at OR p.revision = 1)
        ORDER BY p.revision DESC LIMIT 1
    ) score ON s.outcome IS NOT NULL
    WHERE %(owners)s::bigint[] IS NULL OR s.owner_id = ANY(%(owners)s::bigint[])
          OR (%(unowned)s AND s.owner_id IS NULL)
    ORDER BY f.at, s.id
""")


def session_ranks(
    graph, since: datetime, until: datetime, owners: list[int] | None = None, unowned: bool = False
) -> list[tuple]:
    """Rows of SESSION_RANKS: (session id, external id, owner id, first injection time, outcome, outcome score
    or None, policy revision of the first injection, first used rank or None), in time order."""
    params = {"graph": getattr(graph, "pk", graph), "since": since, "until": until}
    params.update(owners=owners, unowned=unowned)
    return fetch_all(SESSION_RANKS, params)


def learning_marks(graph, since: datetime, until: datetime) -> list[tuple]:
    """Rows of LEARNING_MARKS: (kind, time, revision or period, note, edges changed, all rolled back)."""
    return fetch_all(LEARNING_MARKS, {"graph": getattr(graph, "pk", graph), "since": since, "until": until})


def graph_counts(graph) -> dict:
    """The graph's sessions, injections and batches (GRAPH_COUNTS)."""
    sessions, injections, batches = fetch(GRAPH_COUNTS, {"graph": getattr(graph, "pk", graph)})
    return {"sessions": sessions, "injections": injections, "batches": batches}


# --------------------------------------------------------------------------------------------------
# The report outbox (feedback.outbox)

DRAIN_LOCK_CLASS = int(AdvisoryLock.DRAIN)  # "one drain per graph" (graphadmin.runtime.locks)

# Take the graph's drain lock for the rest of the transaction if no other transaction holds it:
# true or false at once, never a wait (a function PostgreSQL has and the ORM has not).
TRY_DRAIN_LOCK = sql.SQL("SELECT pg_try_advisory_xact_lock(%(lock_class)s, %(graph)s)")


def try_drain_lock(graph_id: int) -> bool:
    """Whether this transaction now holds the graph's drain lock (``feedback.outbox.drain``): one
    drainer per graph at a time, so a graph's reports apply in the order they were accepted, and a
    second drainer returns at once instead of queueing behind the first."""
    return fetch(TRY_DRAIN_LOCK, {"lock_class": DRAIN_LOCK_CLASS, "graph": graph_id})[0]


# Whether a transaction holds the graph's drain lock now (``feedback.reports``: a report committed while
# a drainer runs is seen by it, so it needs no poke of its own).
DRAIN_RUNNING = sql.SQL(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = %(lock_class)s AND objid = %(graph)s AND objsubid = 2)"
)


def drain_running(graph_id: int) -> bool:
    """Whether a drainer holds the graph's drain lock at this moment (``try_drain_lock``).

    A report committed before this check returned true is applied by that drainer: it claims in a new
    snapshot after each batch, and looks once more after releasing the lock before it leaves."""
    return fetch(DRAIN_RUNNING, {"lock_class": DRAIN_LOCK_CLASS, "graph": graph_id})[0]


# The new state of each report of a drained batch, in one statement: Django's bulk_update builds a
# CASE per column and row, which cost a fifth of a drain's CPU; arrays unnested cost one bound list
# per column.
MARK_REPORTS = _statement("""
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
    with connection.cursor() as cur:
        cur.execute(
            _text(MARK_REPORTS),
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
CLAIM_REPORTS = _statement(
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
    columns=sql.SQL(", ").join(sql.Identifier("r", f.column) for f in PendingReport._meta.concrete_fields),
)

# Whether the graph has a report CLAIM_REPORTS would take now (without locking anything).
REPORTS_CLAIMABLE = _statement("""
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


def _columns(model, alias: str) -> sql.Composed:
    """Every column of ``model``'s rows, in the model's order, for ``_rows``."""
    return sql.SQL(", ").join(sql.Identifier(alias, f.column) for f in model._meta.concrete_fields)


def _rows(model, statement: sql.Composed, params: dict) -> list:
    """Model instances of the rows ``statement`` returns (every column, in the model's order)."""
    names = [f.attname for f in model._meta.concrete_fields]
    return [model.from_db(connection.alias, names, list(values)) for values in fetch_all(statement, params)]


# The graph a drain applies reports to (``drain_graph``), the sessions and users of a drained batch
# (``drain_sessions``, ``drain_users``): plain SQL, read once per drain and per batch, where the ORM's compilation of
# the same queries cost more than running them.
DRAIN_GRAPH = _statement(
    "SELECT {columns} FROM {graph} g WHERE g.id = %(graph)s", graph=_table(Graph), columns=_columns(Graph, "g")
)
DRAIN_SESSIONS = _statement(
    "SELECT {columns} FROM {session} s WHERE s.graph_id = %(graph)s AND s.id = ANY(%(sessions)s::bigint[])",
    columns=_columns(AgentSession, "s"),
)


DRAIN_USERS = _statement(
    "SELECT {columns} FROM {user} u WHERE u.id = ANY(%(users)s::bigint[])",
    user=_table(get_user_model()),
    columns=_columns(get_user_model(), "u"),
)


def drain_users(ids: set[int]) -> dict:
    """The users among ``ids`` by id (DRAIN_USERS: the reporters a drained batch names as actors); no
    query for none."""
    if not ids:
        return {}
    return {u.pk: u for u in _rows(get_user_model(), DRAIN_USERS, {"users": sorted(ids)})}


def drain_graph(graph_id: int) -> Graph | None:
    """The graph (DRAIN_GRAPH), or None when it is gone."""
    found = _rows(Graph, DRAIN_GRAPH, {"graph": graph_id})
    return found[0] if found else None


def drain_sessions(graph: Graph, ids: set[int]) -> dict[int, AgentSession]:
    """The graph's sessions among ``ids`` by id (DRAIN_SESSIONS), each holding ``graph`` itself."""
    sessions = {}
    for session in _rows(AgentSession, DRAIN_SESSIONS, {"graph": graph.pk, "sessions": sorted(ids)}):
        session.graph = graph  # one graph object for the batch
        sessions[session.pk] = session
    return sessions


# The id of the graph's edge type of that name (``actions._answered_type``; no row: none yet).
EDGE_TYPE_ID = _statement("SELECT t.id FROM {edge_type} t WHERE t.graph_id = %(graph)s AND t.name = %(name)s")


# --------------------------------------------------------------------------------------------------
# Learning health (feedback.health): what the candidate log and the weight history say about learning

# The window: the graph's last ``n`` injections (the index injection_graph_recent), and their candidates by
# injection (the unique index on injection, rank, created_at), the partitions pruned by the window's first time.
_HEALTH_WINDOW = """
    WITH inj AS MATERIALIZED (
        SELECT i.id, i.created_at FROM {injection} i
        WHERE i.graph_id = %(graph)s ORDER BY i.created_at DESC, i.id DESC LIMIT %(n)s
    ),
    cand AS MATERIALIZED (
        SELECT c.injection_id, c.node_id, c.hops, c.total, c.selected, c.components, c.features
        FROM {candidate} c JOIN inj ON inj.id = c.injection_id
        WHERE c.graph_id = %(graph)s AND c.created_at >= (SELECT min(created_at) FROM inj)
    )
"""

# Per score component: in how many candidates (and selected items) of the window taking the component out of
# the total moves the candidate's place in its injection's order (and takes a selected item that is among the
# first ``selected`` places out of them). Orders are row_number over (total desc, hops, node id), the log's tie
# rule, both with and without the component, so only the component's own effect counts. ORM: no window function
# over a jsonb_each.
HEALTH_COMPONENTS = _statement(
    """{window},
    flat AS MATERIALIZED (
        SELECT c.injection_id, c.node_id, c.hops, c.selected, k.key AS component,
               round(c.total * 1e12) AS with_key,
               round((c.total - coalesce((k.value ->> 'contribution')::double precision, 0)) * 1e12) AS without_key,
               coalesce((k.value ->> 'contribution')::double precision, 0) AS contribution
        FROM cand c CROSS JOIN LATERAL jsonb_each(c.components) k
        WHERE jsonb_typeof(k.value) = 'object'
    ),
    per AS (
        SELECT f.selected, f.component, f.contribution,
               row_number() OVER (PARTITION BY f.injection_id, f.component
                                  ORDER BY f.with_key DESC, f.hops, f.node_id) AS with_rank,
               row_number() OVER (PARTITION BY f.injection_id, f.component
                                  ORDER BY f.without_key DESC, f.hops, f.node_id) AS without_rank,
               count(*) FILTER (WHERE f.selected) OVER (PARTITION BY f.injection_id, f.component) AS n_selected
        FROM flat f
    )
    SELECT component,
           count(*) AS candidates,
           count(*) FILTER (WHERE contribution <> 0) AS nonzero,
           count(*) FILTER (WHERE with_rank <> without_rank) AS moved,
           count(*) FILTER (WHERE selected) AS selected,
           count(*) FILTER (WHERE selected AND with_rank <= n_selected AND without_rank > n_selected) AS selected_moved
    FROM per GROUP BY component ORDER BY component
    """,
    window=sql.SQL(_HEALTH_WINDOW).format(**TABLES),
)

# The window's size, time span and how its candidates (and selected items) were reached: how they entered
# (vector, lexical, triplet, start, expansion, memory) and, for those reached by following links from an entry
# point (path_hops > 0), the type of the last link. A triplet hit carries its link as its path but entered
# directly (0 hops): it is not "reached through a link".
HEALTH_REACH = _statement(
    """{window}
    SELECT coalesce(c.features ->> 'entry', '') AS entry,
           CASE WHEN coalesce((c.features ->> 'path_hops')::int, 0) > 0
                THEN coalesce(nullif(c.features ->> 'edge_type', ''), '?') END AS edge_type,
           count(*) AS candidates, count(*) FILTER (WHERE c.selected) AS selected,
           (SELECT count(*) FROM inj) AS injections,
           (SELECT min(created_at) FROM inj) AS since, (SELECT max(created_at) FROM inj) AS until
    FROM cand c GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST
    """,
    window=sql.SQL(_HEALTH_WINDOW).format(**TABLES),
)

# Distinct weights that moved since each of two times, by weight (target, field) and by the kind of batch
# that moved them, beside the live rows holding that weight. The history view (rows and blocks) by graph and
# time; rolled-back batches count (a move is a move).
HEALTH_MOVED = _statement("""
    WITH moved AS (
        SELECT CASE WHEN h.node_id IS NOT NULL THEN 'node' ELSE 'edge' END AS target, h.field, b.kind,
               coalesce(h.node_id, h.edge_id) AS id, h.created_at
        FROM {history} h JOIN {batch} b ON b.id = h.batch_id AND b.graph_id = %(graph)s
        WHERE h.graph_id = %(graph)s AND h.created_at >= %(since_long)s AND h.before IS DISTINCT FROM h.after
    )
    SELECT target, field, kind,
           count(DISTINCT id) FILTER (WHERE created_at >= %(since_short)s) AS short,
           count(DISTINCT id) AS long
    FROM moved GROUP BY target, field, kind ORDER BY target, field, kind
    """)

HEALTH_LIVE = _statement("""
    SELECT (SELECT count(*) FROM {node} WHERE graph_id = %(graph)s AND NOT archived),
           (SELECT count(*) FROM {edge} WHERE graph_id = %(graph)s AND NOT archived)
    """)

# Per edge type: its live edges, how many still hold the default weight and feedback weight, and the means.
HEALTH_EDGE_TYPES = _statement("""
    SELECT et.name, count(e.id) AS edges,
           count(e.id) FILTER (WHERE e.weight = %(default)s) AS weight_default,
           count(e.id) FILTER (WHERE e.feedback_weight = %(default)s) AS feedback_default,
           avg(e.weight) AS mean_weight, avg(e.feedback_weight) AS mean_feedback
    FROM {edge_type} et
    LEFT JOIN {edge} e ON e.edge_type_id = et.id AND e.graph_id = %(graph)s AND NOT e.archived
    WHERE et.graph_id = %(graph)s
    GROUP BY et.name ORDER BY et.name
    """)


def health_rows(graph_id: int, n: int, since_short: datetime, since_long: datetime) -> dict[str, list[tuple]]:
    """The learning-health figures of a graph (feedback.health): components, reach, moved weights, live rows,
    edge types, each one named statement above."""
    params = {"graph": graph_id, "n": n, "since_short": since_short, "since_long": since_long, "default": 0.5}
    return {
        "components": fetch_all(HEALTH_COMPONENTS, params),
        "reach": fetch_all(HEALTH_REACH, params),
        "moved": fetch_all(HEALTH_MOVED, params),
        "live": fetch_all(HEALTH_LIVE, params),
        "edge_types": fetch_all(HEALTH_EDGE_TYPES, params),
    }
