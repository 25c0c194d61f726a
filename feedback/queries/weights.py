"""The weight writes' SQL: each statement whole and named, and the reads the write path makes (``feedback.actions``,
``feedback.ledger``).

Why raw SQL: every weight write changes a set of rows *and* writes their history from the UPDATE's
RETURNING, in id order and in one round trip; the ORM has no UPDATE ... RETURNING, no data-modifying
CTE and no ``FOR UPDATE`` ordered by id over a join. Rules for every statement here:

- values are bound parameters (``%(name)s``), never pasted into the text;
- table names come from the models' ``_meta.db_table`` (``feedback.queries.TABLES``, composed by
  ``graphadmin.models.sql.statement``), and so does a column chosen among several (``set_weight``,
  ``rollback_restore``: from a fixed mapping, ``feedback.queries.WEIGHTS``);
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
from functools import cache
from typing import NamedTuple

from psycopg import sql as psql

from graphadmin.models import Edge, EdgeType, Graph, Node
from graphadmin.models.sql import execute, fetch, fetch_all

from .. import rules
from ..models import AgentSession, InjectionCandidate, UpdateBatch
from . import TABLES, WEIGHTS, statement

CONFLICT_SAMPLE = 100  # conflicts listed by id in a rollback batch's details (all are counted)


def _weight(target: str, field: str) -> tuple[psql.Identifier, psql.Identifier, psql.Identifier]:
    """(table, column, history target column) of a weight, refusing any other (target, field)."""
    if (target, field) not in WEIGHTS:
        raise ValueError(f"no weight {target}.{field}")
    return TABLES[target], psql.Identifier(field), WEIGHTS[(target, field)]


def _batch_columns(computed: dict[str, str] | None = None, *, with_id: bool = True) -> dict[str, psql.Composable]:
    """The column list and VALUES list of an UpdateBatch row, from the model: ``%(b_<column>)s``
    for each column (``ledger.batch_params`` binds them), or the SQL in ``computed`` for a column
    known only inside the statement."""
    computed = computed or {}
    fields = [f for f in UpdateBatch._meta.concrete_fields if with_id or not f.primary_key]
    return {
        "batch_columns": psql.SQL(", ").join(psql.Identifier(f.column) for f in fields),
        "batch_values": psql.SQL(", ").join(
            psql.SQL(computed[f.column]) if f.column in computed else psql.Placeholder(f"b_{f.column}") for f in fields
        ),
    }


# --------------------------------------------------------------------------------------------------
# Transaction settings and batches

# For the rest of the transaction: plan row scans through indexes (a bulk UPDATE's primary-key scan
# then locks rows in id order), and, when ``async_commit`` (a chunk's own transaction, never a
# caller's), do not wait for the commit's WAL flush.
SESSION_SETTINGS = statement("""
    SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
           set_config('synchronous_commit',
                      CASE WHEN %(async_commit)s::boolean THEN 'off' ELSE current_setting('synchronous_commit') END,
                      true)
""")

# Insert a batch unless its idempotency key is taken (committed, or in a concurrent transaction that
# then commits): one statement, no savepoint. Returns its id, or no row.
INSERT_BATCH_ONCE = statement(
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
REINFORCE = statement("""
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
LOCK_SESSION_FOR_OUTCOME = statement("""
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


class OutcomeLock(NamedTuple):
    """LOCK_SESSION_FOR_OUTCOME's row, by name: what an outcome report knows once it holds the session's row."""

    session_id: int
    outcome: str  # the session's current outcome ("" for none)
    unchanged: bool  # the locked row is the one the statement's snapshot saw (else: read again)
    retry_id: int | None  # the batch of this very report, when it is a retry (its idempotency key)
    previous_id: int | None  # the session's last outcome batch
    has_injection: bool
    has_selected: bool
    batch_id: int  # reserved for the new batch
    revision: int  # the current policy's revision
    alpha: float  # its EMA alpha
    score: float  # its score of the reported outcome
    seqscan_off: str  # set_config's answers: the transaction's index-only scans for OUTCOME_WRITE
    bitmapscan_off: str


def lock_session_for_outcome(graph_id: int, external_id: str, outcome: str, key: str | None) -> OutcomeLock | None:
    """Lock the session's row and read its facts (LOCK_SESSION_FOR_OUTCOME; None: unknown session)."""
    params = {
        "graph": graph_id,
        "external_id": external_id,
        "key": key,
        "outcome": outcome,
        "batch_table": UpdateBatch._meta.db_table,
    }
    row = fetch(LOCK_SESSION_FOR_OUTCOME, params)
    if row is not None and not row[2]:
        # We waited for the lock on a session another report changed after this statement began:
        # its facts came from the statement's snapshot, so read them again (a new snapshot; we
        # hold the lock now, so nothing changes in between).
        row = fetch(LOCK_SESSION_FOR_OUTCOME, params)
    return None if row is None else OutcomeLock._make(row)


# The outcome's writes, in one statement: the EMA ``alpha * score + (1 - alpha) * w`` (``rules.ema``)
# on ``feedback_weight`` of every edge on a selected candidate's path (logs older than the pipeline
# have no path: their one edge), then of every selected node, with one WeightChange each; the
# session's outcome; and the batch row (its id reserved by LOCK_SESSION_FOR_OUTCOME) with its counts,
# finish time and duration (Python's time before the statement, ``elapsed_ms``, plus the statement's
# own, each on one clock). No locking pass: each UPDATE locks as it goes, in id order (a primary-key
# scan over the sorted id array), re-reads a row another writer changed meanwhile, and RETURNING
# old.* gives the value it replaced. History rows may precede the batch row in the statement: their
# foreign key is checked at commit. Returns (edge changes, node changes, finished_at, duration_ms).
OUTCOME_WRITE = statement(
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
CHUNK_RANGES = statement("""
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
DECAY_RANGE = statement("""
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
NORMALIZE_RANGE = statement("""
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
DECAY_PREVIEW_COUNT = statement("SELECT count(*) {due}", due=_DECAY_DUE)
DECAY_PREVIEW_SAMPLE = statement(
    "SELECT e.id, e.weight, CASE WHEN e.edge_type_id = ANY(%(toward_neutral)s::bigint[])"
    " THEN 0.5 + (e.weight - 0.5) * %(rate)s ELSE greatest(%(floor)s, e.weight * %(rate)s) END"
    " {due} ORDER BY e.id LIMIT %(limit)s",
    due=_DECAY_DUE,
)

# The largest weight among the graph's live edges (the normalize factor is its inverse), evidence
# edges (types %(evidence_types)s: ``answered``, whose weight is evidence, not reinforcement) apart.
MAX_EDGE_WEIGHT = statement(
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
LOCK_ROWS = {kind: statement(_LOCK_ROWS, table=TABLES[kind]) for kind in ("edge", "node")}
LOCK_BATCH_ROWS = {
    kind: statement(_LOCK_BATCH_ROWS, table=TABLES[kind], target_column=WEIGHTS[(kind, "feedback_weight")])
    for kind in ("edge", "node")
}


def lock_rows(graph_id: int, edge_ids, node_ids) -> None:
    """Lock the given edges, then the given nodes, each in id order (``LOCK_ROWS``)."""
    for kind, ids in (("edge", edge_ids), ("node", node_ids)):
        if ids:
            execute(LOCK_ROWS[kind], {"graph": graph_id, "ids": sorted(set(ids))})


def lock_batch_rows(graph_id: int, batch_id: int) -> None:
    """Lock every edge, then every node, whose weights the batch changed, in id order (``LOCK_BATCH_ROWS``)."""
    for kind in ("edge", "node"):
        execute(LOCK_BATCH_ROWS[kind], {"graph": graph_id, "rolled_back": batch_id})


@cache  # composed once per weight (three at most), then read from here
def set_weight(target: str, field: str) -> str:
    """Set ``field`` of the listed nodes or edges to the given values (``ids``, ``values``: aligned
    arrays), with one WeightChange per change (event ``manual``). Locks the rows in id order and
    reads ``before`` after the lock. Returns the changes written.

    One statement per (target, field): an edge's weight and feedback weight set in one call are two
    statements, since one statement may not update a row twice.
    """
    table, column, target_column = _weight(target, field)
    return statement(
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


@cache  # composed once per weight (three at most), then read from here
def rollback_restore(target: str, field: str) -> str:
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
    return statement(
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
        restore_rows=RESTORE_ROWS,
    )


@cache  # composed once per weight (three at most), then read from here
def rollback_preview(target: str, field: str) -> str:
    """What ``rollback_restore`` would do now, without a lock or a write: (values it would restore,
    conflicts, conflicts a forced rollback would overwrite, sample of conflicting ids).

    The same rows and the same rule as ``rollback_restore`` (a row is restored where its current
    value still equals the batch's ``after``, and written only where that changes it), so the preview
    and the rollback that follows report the same counts when nothing is written in between. Takes
    the same ``finishing`` parameter. A plain read; the rollback itself re-reads under its locks.
    """
    table, column, target_column = _weight(target, field)
    return statement(
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
        target_column=target_column,
        restore_rows=RESTORE_ROWS,
    )


# --------------------------------------------------------------------------------------------------
# Links the graph learns: co_used edges

# Pairs (a < b) of nodes used in the session that are used together in at least ``threshold``
# accepted sessions of the graph and that no edge links (either way, any type; an archived co_used
# edge counts, so a rolled-back link stays undone). "Used": an explicit or implicit use event on the
# node itself (path credit is not a use). A self-join of the session's uses with the graph's,
# grouped by pair, that the ORM would write as several queries; every table filtered by graph_id.
CO_USED_PAIRS = statement("""
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
INSERT_LINKS = statement("""
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
NEAREST_QUESTION = statement("""
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
QUESTION_PAIRS = statement("""
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
SET_EVIDENCE_SIMILARITY = statement("""
    UPDATE {graph} SET evidence_similarity = %(similarity)s
    WHERE id = %(graph)s AND evidence_similarity IS DISTINCT FROM %(similarity)s
""")

# The ``answered`` edges (type %(type)s) from question to note for the aligned arrays, neutral (0.5:
# no evidence yet, so creating one changes no ranking), with no triplet embedding (they are found
# from their question, never as entry points). Existing edges are kept as they are.
INSERT_ANSWERED = statement("""
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
TEACH = statement("""
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
SESSION_SHOWN = statement("""
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


# Every UpdateBatch of an organization's graphs whose audit events (by the batch id in the payload) are not
# exactly one: none (written past the write path) or several (a duplicated event). Raw SQL: the ORM cannot
# join on a key inside a JSON payload cast to bigint. A hash join over the organization's events.
BATCHES_NOT_AUDITED_ONCE = statement("""
        SELECT b.id, b.kind, count(e.id) AS events
        FROM {batch} b
        LEFT JOIN {audit_event} e
          ON e.organization_id = %(organization)s AND e.action = ANY(%(actions)s::text[])
         AND e.payload ? 'batch' AND jsonb_typeof(e.payload -> 'batch') = 'number'
         AND (e.payload ->> 'batch')::bigint = b.id
        WHERE b.graph_id IN (SELECT g.id FROM {graph} g WHERE g.organization_id = %(organization)s)
        GROUP BY b.id, b.kind
        HAVING count(e.id) <> 1
        ORDER BY b.id
        LIMIT %(limit)s
        """)


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
PATH_AND_CREDITED = statement("""
    SELECT 'candidate', c.node_id, c.injection_id, c.edge_id, c.features
    FROM {candidate} c JOIN {injection} i ON i.id = c.injection_id
    WHERE c.graph_id = %(graph)s AND i.graph_id = %(graph)s AND i.session_id = %(session)s AND c.selected
      AND c.node_id = ANY(%(nodes)s::bigint[])
    UNION ALL
    SELECT 'credited', u.node_id, NULL, u.edge_id, NULL
    FROM {use_event} u
    WHERE u.graph_id = %(graph)s AND u.session_id = %(session)s
""")


# Lock a session's row (``FOR NO KEY UPDATE``): the first step of every write on its reports.
LOCK_SESSION = statement("""
    SELECT s.id FROM {session} s WHERE s.graph_id = %(graph)s AND s.id = %(session)s FOR NO KEY UPDATE OF s
""")

# The id of the graph's batch with this idempotency key, if any.
BATCH_BY_KEY = statement("""
    SELECT b.id FROM {batch} b WHERE b.graph_id = %(graph)s AND b.idempotency_key = %(key)s
""")

# Use events, one per aligned array element; their ids in that order.
INSERT_USE_EVENTS = statement("""
    INSERT INTO {use_event} (graph_id, session_id, injection_id, node_id, edge_id, signal, source, created_at)
    SELECT %(graph)s, %(session)s, x.injection, x.node, x.edge, x.signal, x.source, %(now)s
    FROM unnest(%(injections)s::bigint[], %(nodes)s::bigint[], %(edges)s::bigint[], %(signals)s::text[],
                %(sources)s::text[]) WITH ORDINALITY AS x(injection, node, edge, signal, source, n)
    ORDER BY x.n
    RETURNING id
""")

# A finished batch's counts, details and timings (``ledger.finish``).
FINISH_BATCH = statement("""
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


# The id of the graph's edge type of that name (``actions._answered_type``; no row: none yet).
EDGE_TYPE_ID = statement("SELECT t.id FROM {edge_type} t WHERE t.graph_id = %(graph)s AND t.name = %(name)s")
