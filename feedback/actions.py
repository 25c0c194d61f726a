"""The one write path for weights: reinforcement, outcome EMA, decay, normalisation, manual set, rollback.

Every function here is the only way its change reaches the database (DESIGN.md: one write path).
Each one:

- runs in one transaction (decay: one transaction per id-range chunk, see ``decay``);
- takes the acting user, or a task label such as ``"task:decay"``;
- writes one ``UpdateBatch``, its history (before, after, event: ``WeightChange`` rows, or
  ``WeightChangeBlock`` arrays for the bulk actions over id ranges) and one ``AuditEvent``;
- changes weights with set-based SQL: one statement per (table, field) that locks the target rows
  in id order, updates them from a VALUES/unnest/ledger relation and inserts the history rows from
  the UPDATE's RETURNING (no Python loop issuing per-row queries); the per-report actions chain
  their (table, field) steps in one statement (``_apply_changes``), keeping the same lock order;
- returns a ``Result`` with node_updates, edge_updates, triplet_embeddings and duration_ms.

Lock order, everywhere: the session row (outcome only), then edges by id, then nodes by id, then the
organization's audit advisory lock. Concurrent writers therefore queue instead of deadlocking, and
since each statement reads the *locked* value as ``before``, no update is lost.

Weights moved here never touch ``updated_at`` (it tracks content edits) nor triplet embeddings
(the triplet text "source -> type -> target" does not contain weights), so ``triplet_embeddings``
is always 0: the field is reported so callers need not assume it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import OperationalError, connection, transaction
from django.db.models import Q
from psycopg.errors import DeadlockDetected

from graphadmin import audit, clock
from graphadmin.embeddings import configured_model, embed_texts
from graphadmin.models import Edge, EdgeType, Graph, Node, PolicyRevision
from graphadmin.models.policy import POLICY_NUMBERS
from graphadmin.vault.plan import triplet_text

from .models import (
    OUTCOMES,
    SIGNALS,
    AgentSession,
    InjectionCandidate,
    UpdateBatch,
    UseEvent,
    WeightChange,
    WeightChangeBlock,
    WeightHistory,
)

log = logging.getLogger(__name__)

EDGE_TABLE = Edge._meta.db_table
NODE_TABLE = Node._meta.db_table
DECAY_CHUNK = 50000  # edge ids per decay/normalize transaction: each chunk holds its row locks ~0.2 s
BLOCK_SPAN = 10000  # ids covered by one history block at most (one edge's history reads one block per batch)
CONFLICT_SAMPLE = 100  # conflicts listed by id in a rollback batch's details (all are counted)
AUDIT_ACTIONS = {
    "reinforce": "graph.feedback",
    "outcome": "graph.feedback",
    "decay": "graph.decay",
    "normalize": "graph.normalize",
    "manual": "graph.weights.set",
    "link": "graph.links.learn",
    "rollback": "batch.rollback",
}


class FeedbackError(ValueError):
    """Input an action refuses (the API turns it into a 400 naming ``field``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class RollbackRefused(Exception):
    """A batch that cannot be rolled back (already rolled back)."""


@dataclass
class Result:
    """What an action did. ``status`` is ``applied`` or ``duplicate`` or a fall-through reason."""

    status: str
    batch_id: int | None = None
    node_updates: int = 0
    edge_updates: int = 0
    triplet_embeddings: int = 0
    duration_ms: float = 0.0
    conflicts: int = 0
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# The set-based core shared by every action.


def _history_insert(
    history: str, target: str, *, name: str = "ins", source: str = "u", field: str | None = None
) -> str:
    """The CTE ``name`` writing the history of the updated rows ``source`` (id, before, after, event, use_event_id).

    ``rows``: one WeightChange per change. ``blocks``: one WeightChangeBlock per event and id range of
    ``BLOCK_SPAN`` ids, holding the changes as three aligned arrays in the order the UPDATE wrote
    them (bulk actions over id ranges; use events are not recorded there). The span bound keeps a
    block small whatever the batch (a one-chunk normalize of a million edges, its rollback), so one
    edge's history never reads more than one span of a batch. Decay and normalize chunks write in
    id order (their UPDATE walks the primary key), so their ids come out sorted without a sort step,
    which would cost about a sixth of the chunk. The CTE returns the number of changes each inserted
    row holds (``size``). ``field``: the field name as a literal (default: the ``%(field)s`` parameter).
    """
    field_sql = f"'{field}'" if field else "%(field)s"
    if history == "rows":
        return f"""{name} AS (
            INSERT INTO feedback_weightchange (batch_id, graph_id, {target}_id, field, before, after, event, use_event_id, created_at)
            SELECT %(batch)s, %(graph)s, u.id, {field_sql}, u.before, u.after, u.event, u.use_event_id, %(now)s FROM {source} u
            RETURNING 1 AS size
        )"""
    if history == "blocks":
        return f"""{name} AS (
            INSERT INTO feedback_weightchangeblock (batch_id, graph_id, target, field, event, created_at, id_min, id_max, size, ids, before, after)
            SELECT %(batch)s, %(graph)s, '{target}', {field_sql}, u.event, %(now)s, min(u.id), max(u.id), count(*),
                   array_agg(u.id), array_agg(u.before), array_agg(u.after)
            FROM {source} u GROUP BY u.event, u.id / {BLOCK_SPAN}
            RETURNING size
        )"""
    raise ValueError(f"unknown history shape {history!r}")


def _apply(
    *,
    table: str,
    field_name: str,
    graph_id: int,
    batch_id: int,
    rows_sql: str,
    rows_params: list,
    new_expr: str,
    event_expr: str = "i.event",
    use_event_expr: str = "NULL::bigint",
    conflict_expr: str = "false",
    now: datetime,
    history: str = "rows",
    named: dict | None = None,
) -> tuple[int, int, list[int]]:
    """Change ``field_name`` of the rows of ``table`` listed by ``rows_sql`` (a relation ``i`` with ``id``).

    One statement: lock the target rows in id order (``FOR UPDATE``; they are read *after* the lock,
    so ``before`` is the committed value), compute ``new_expr`` (which may use ``i.before`` and the
    columns of ``i``), update the rows whose value changes, and write their history from the
    UPDATE's RETURNING in the ``history`` shape (``rows`` or ``blocks``, see ``_history_insert``).
    ``rows_params`` are ``%(p0)s``, ``%(p1)s``... in ``rows_sql``; ``named`` adds named parameters.
    Returns (changes written, conflicts, sample of conflicting ids).
    """
    target = "edge" if table == EDGE_TABLE else "node"
    # ``l`` carries the input columns beside the locked value, so no step joins two CTEs (which have
    # no index: a nested loop over two 1M-row CTEs is quadratic). Expressions see it as ``i``.
    sql = f"""
        WITH i AS ({rows_sql}),
        l AS MATERIALIZED (
            SELECT i.*, t.{field_name} AS before FROM {table} t JOIN i ON i.id = t.id
            WHERE t.graph_id = %(graph)s
            ORDER BY t.id FOR UPDATE OF t
        ),
        n AS (
            SELECT i.id, i.before, ({new_expr})::double precision AS after, ({event_expr})::text AS event,
                   ({use_event_expr}) AS use_event_id, ({conflict_expr}) AS conflict
            FROM l AS i
        ),
        u AS (
            UPDATE {table} t SET {field_name} = n.after FROM n
            WHERE t.id = n.id AND n.after IS DISTINCT FROM n.before
            RETURNING t.id, n.before, n.after, n.event, n.use_event_id
        ),
        {_history_insert(history, target)}
        SELECT (SELECT coalesce(sum(size), 0) FROM ins),
               (SELECT count(*) FROM n WHERE n.conflict),
               (SELECT coalesce(array_agg(id ORDER BY id), '{{}}') FROM (SELECT id FROM n WHERE n.conflict ORDER BY id LIMIT {CONFLICT_SAMPLE}) s)
    """
    params = {**(named or {}), "graph": graph_id, "batch": batch_id, "field": field_name, "now": now}
    for index, value in enumerate(rows_params):
        params[f"p{index}"] = value
    with connection.cursor() as cur:
        cur.execute(sql, params)
        written, conflicts, sample = cur.fetchone()
    return written, conflicts, list(sample)


def _update_range(
    *,
    graph_id: int,
    batch_id: int,
    lo: int,
    hi: int,
    where: str,
    params: dict,
    new_expr: str,
    event: str,
    now: datetime,
) -> int:
    """Update ``weight`` of the graph's edges ``e`` with ids in [lo, hi) matching ``where``; block history.

    The bulk path of decay and normalize: one plain UPDATE whose RETURNING gives the replaced value
    (``old.weight``, PostgreSQL 18), so no separate locking pass and no per-row history. The rows are
    visited through the primary key in id order, the order every other writer locks in: the caller
    (``_edge_chunk_once``) turns sequential and bitmap scans off for its transaction, and the graph
    condition is written so no index can serve it (``graph_id + 0``; otherwise, on a graph holding
    most of the table, the planner scans the whole graph_id index and filters the range).
    ``new_expr`` names the current value ``{w}``. Returns the changes written. On a server older
    than 18 the same change goes through ``_apply`` (a locking pass first).
    """
    params = {
        **params,
        "graph": graph_id,
        "batch": batch_id,
        "field": "weight",
        "now": now,
        "event": event,
        "lo": lo,
        "hi": hi,
    }
    rows = f"e.id >= %(lo)s AND e.id < %(hi)s AND e.graph_id + 0 = %(graph)s AND {where}"
    if connection.pg_version < 180000:
        written, _c, _s = _apply(
            table=EDGE_TABLE,
            field_name="weight",
            graph_id=graph_id,
            batch_id=batch_id,
            rows_sql=f"SELECT e.id FROM {EDGE_TABLE} e WHERE {rows}",
            rows_params=[],
            new_expr=new_expr.format(w="i.before"),
            event_expr=f"'{event}'",
            now=now,
            history="blocks",
            named=params,
        )
        return written
    new = new_expr.format(w="e.weight")
    sql = f"""
        WITH u AS (
            UPDATE {EDGE_TABLE} e SET weight = ({new})::double precision
            WHERE {rows} AND ({new}) IS DISTINCT FROM e.weight
            RETURNING e.id, old.weight AS before, new.weight AS after, %(event)s::text AS event, NULL::bigint AS use_event_id
        ),
        {_history_insert("blocks", "edge")}
        SELECT coalesce(sum(size), 0) FROM ins
    """
    with connection.cursor() as cur:
        cur.execute(sql, params)
        (written,) = cur.fetchone()
    return written


@dataclass(frozen=True)
class Change:
    """One (table, field) change of a combined statement (``_apply_changes``).

    ``rows_sql`` is the input relation ``i``: with ``ids_only`` it yields target ids only (repeats
    are fine: it is read as a semi-join, no DISTINCT needed); otherwise ``id`` plus the columns the
    expressions use, one row per target. The expressions see ``i`` and ``i.before`` as in ``_apply``.
    """

    table: str
    field_name: str
    rows_sql: str
    new_expr: str
    event_expr: str = "i.event"
    use_event_expr: str = "NULL::bigint"
    ids_only: bool = False


def _change_ctes(k: int, change: Change) -> list[str]:
    """The CTEs of change ``k``: lock (``l<k>``), update (``u<k>``), history (``h<k>``), count (``c<k>``).

    Change ``k``'s rows are locked only after change ``k - 1`` wrote its history (the gate reads
    ``c<k-1>``), so one statement takes its row locks in the same order as separate statements would.
    """
    table, field_name = change.table, change.field_name
    target = "edge" if table == EDGE_TABLE else "node"
    gate = f"AND (SELECT n FROM c{k - 1}) >= 0" if k else ""
    history = [
        _history_insert("rows", target, name=f"h{k}", source=f"u{k}", field=field_name),
        f"c{k} AS (SELECT count(*) AS n FROM h{k})",
    ]
    if change.ids_only and connection.pg_version >= 180000:
        # No locking pass: the UPDATE locks as it goes, in id order (a primary-key scan over the sorted
        # id array; the caller has turned sequential and bitmap scans off), re-reads a row another
        # writer changed meanwhile, and RETURNING old.* gives the value it replaced.
        new = change.new_expr.replace("i.before", f"t.{field_name}")
        return [
            f"""u{k} AS (
                UPDATE {table} t SET {field_name} = ({new})::double precision
                WHERE t.graph_id = %(graph)s AND t.id = ANY(ARRAY({change.rows_sql})) {gate}
                  AND ({new}) IS DISTINCT FROM t.{field_name}
                RETURNING t.id, old.{field_name} AS before, new.{field_name} AS after, ({change.event_expr})::text AS event,
                          ({change.use_event_expr}) AS use_event_id)""",
            *history,
        ]
    if change.ids_only:
        lock = f"""SELECT t.id, t.{field_name} AS before FROM {table} t
                   WHERE t.graph_id = %(graph)s AND t.id IN ({change.rows_sql}) {gate} ORDER BY t.id FOR UPDATE OF t"""
    else:
        lock = f"""SELECT i.*, t.{field_name} AS before FROM {table} t JOIN ({change.rows_sql}) i ON i.id = t.id
                   WHERE t.graph_id = %(graph)s {gate} ORDER BY t.id FOR UPDATE OF t"""
    return [
        f"l{k} AS MATERIALIZED ({lock})",
        f"""u{k} AS (
            UPDATE {table} t SET {field_name} = n.after
            FROM (SELECT i.id, i.before, ({change.new_expr})::double precision AS after, ({change.event_expr})::text AS event,
                         ({change.use_event_expr}) AS use_event_id FROM l{k} AS i) n
            WHERE t.id = n.id AND n.after IS DISTINCT FROM n.before
            RETURNING t.id, n.before, n.after, n.event, n.use_event_id)""",
        *history,
    ]


def _apply_changes(
    changes: list[Change],
    *,
    graph_id: int,
    batch_id: int,
    params: dict,
    now: datetime,
    then: tuple[str, ...] = (),
    returning: tuple[str, ...] = (),
) -> tuple[list[int], tuple]:
    """``_apply`` for several (table, field) changes in one statement (one round trip, one plan).

    Same guarantees as ``_apply``: each change locks its rows in id order and reads ``before`` after
    the lock; the changes run in list order (edges before nodes), each after the previous one's
    history is written. ``then`` adds CTEs that run in the same statement (they may read the counts
    ``c0``, ``c1``, ...), ``returning`` extra values of the final row. Returns (history rows written
    per change, the extra values). No conflict accounting: rollback uses ``_apply``.
    """
    ctes = [cte for k, change in enumerate(changes) for cte in _change_ctes(k, change)] + list(then)
    selected = [f"(SELECT n FROM c{k})" for k in range(len(changes))] + list(returning)
    sql = f"WITH {', '.join(ctes)} SELECT {', '.join(selected)}"
    with connection.cursor() as cur:
        cur.execute(sql, {**params, "graph": graph_id, "batch": batch_id, "now": now})
        row = cur.fetchone()
    return list(row[: len(changes)]), tuple(row[len(changes) :])


def _batch_insert_cte(batch: UpdateBatch, computed: dict[str, str]) -> tuple[str, dict]:
    """A CTE ``b`` inserting ``batch`` (unsaved, its id reserved) inside a combined statement.

    The columns come from the model; ``computed`` gives SQL for those known only in the statement
    (counts, finish time). Returns the CTE and its parameters. History rows may be written before
    the batch row in the same statement: their foreign key is checked at commit.
    """
    columns, values, params = _batch_row(batch, computed)
    sql = f"b AS (INSERT INTO {UpdateBatch._meta.db_table} ({columns}) VALUES ({values}) RETURNING finished_at, duration_ms)"
    return sql, params


def _batch_row(batch: UpdateBatch, computed: dict[str, str] | None = None) -> tuple[str, str, dict]:
    """The INSERT column list, VALUES list and parameters of an unsaved batch (the model's columns;
    ``computed``: SQL for some of them; an unset id is left to the sequence)."""
    columns, values, params = [], [], {}
    for f in UpdateBatch._meta.concrete_fields:
        if f.primary_key and batch.pk is None:
            continue
        columns.append(connection.ops.quote_name(f.column))
        if computed and f.column in computed:
            values.append(computed[f.column])
        else:
            params[f"b_{f.column}"] = f.get_db_prep_save(getattr(batch, f.attname), connection)
            values.append(f"%(b_{f.column})s")
    return ", ".join(columns), ", ".join(values), params


def _new_batch(graph: Graph, kind: str, actor, *, session=None, key=None, details=None, **extra) -> UpdateBatch:
    """An unsaved batch row: the trigger (session, user or task label), key, details and start time."""
    user = actor if getattr(actor, "is_authenticated", False) else None
    task = actor if isinstance(actor, str) else ""
    return UpdateBatch(
        graph=graph,
        kind=kind,
        trigger_session=session,
        trigger_user=user,
        trigger_task=task,
        idempotency_key=key,
        details=details or {},
        started_at=clock.now(),
        **extra,
    )


def _start_batch(
    graph: Graph, kind: str, actor, *, session=None, key=None, details=None, **extra
) -> UpdateBatch | None:
    """Insert the batch row; None when ``key`` is already taken (a concurrent or earlier run)."""
    batch = _new_batch(graph, kind, actor, session=session, key=key, details=details, **extra)
    if not key:
        batch.save(force_insert=True)
        return batch
    # One statement, no savepoint: a taken key (committed, or in a concurrent transaction that then
    # commits) inserts nothing.
    columns, values, params = _batch_row(batch)
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {UpdateBatch._meta.db_table} ({columns}) VALUES ({values}) "
            "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
            params,
        )
        row = cur.fetchone()
    if row is None:
        return None
    batch.pk = row[0]
    batch._state.adding, batch._state.db = False, connection.alias
    return batch


def _finish(
    batch: UpdateBatch, actor, started: float, *, node_updates=0, edge_updates=0, conflicts=0, audit_extra=None
) -> Result:
    """Write the batch's counts and timings and its one AuditEvent; return the Result."""
    batch.node_updates, batch.edge_updates, batch.conflicts = node_updates, edge_updates, conflicts
    batch.finished_at = clock.now()
    batch.duration_ms = round((time.perf_counter() - started) * 1000.0, 3)
    batch.save(update_fields=["node_updates", "edge_updates", "conflicts", "details", "finished_at", "duration_ms"])
    return _audit_batch(batch, actor, audit_extra)


def _audit_batch(batch: UpdateBatch, actor, audit_extra=None) -> Result:
    """Append the finished batch's one AuditEvent; return the Result."""
    payload = {
        "batch": batch.pk,
        "kind": batch.kind,
        "node_updates": batch.node_updates,
        "edge_updates": batch.edge_updates,
        "conflicts": batch.conflicts,
        **(audit_extra or {}),
    }
    audit.append(
        batch.graph.organization_id,
        actor,
        AUDIT_ACTIONS[batch.kind],
        payload,
        scope={"graph": batch.graph_id, "graph_slug": batch.graph.slug},
    )
    return _existing(batch, "applied")


def _existing(batch: UpdateBatch, status: str = "duplicate") -> Result:
    return Result(
        status, batch.pk, batch.node_updates, batch.edge_updates, 0, batch.duration_ms, batch.conflicts, batch.details
    )


def fall_through(status: str, message: str, **context) -> Result:
    """A clean no-op: a structured warning in the log, a clear status for the caller, never an exception."""
    log.warning(message, extra={"feedback_status": status, **context})
    return Result(status, details={"reason": message, **context})


def _bounded(name: str, value, policy_value):
    """A per-call override of a policy rate, checked against the policy's bounds."""
    if value is None:
        return policy_value
    _default, lo, hi, _integer, _help = POLICY_NUMBERS[name]
    if not (lo <= value <= hi):
        raise FeedbackError(name, f"must be between {lo} and {hi}.")
    return float(value)


# --------------------------------------------------------------------------------------------------
# 1. Use events and reinforcement


@dataclass(frozen=True)
class UseItem:
    """One reported item: a node or an edge of the session's graph, with its signal."""

    kind: str  # "node" or "edge"
    id: int
    signal: str
    injection_id: int | None = None


def apply_uses(
    actor,
    session: AgentSession,
    items: list[UseItem],
    *,
    source: str = "api",
    learning_rate: float | None = None,
    idempotency_key: str | None = None,
) -> Result:
    """Record use events and reinforce what was used and the paths that surfaced it.

    A used node moves up, ``w += lr * (1 - w)``, and so does every edge on the path that surfaced
    it in this session's injections (credit to the path, ``path_credit``); a node flagged negative
    moves down, ``w -= negative_rate * w``, with the last edge of its path. Edges move ``weight``;
    nodes (which have no reinforcement weight of their own) move ``feedback_weight``. Surfaced but
    unreported items do not change. Each node or edge moves at most once per session: a target
    already credited (or flagged) in this session is skipped, so reporting a use again moves
    nothing more. The same target with two different signals in one call is refused.
    ``learning_rate`` overrides the policy's (for both signals) within its bounds. With
    ``idempotency_key`` a repeated call (a retried task) returns the first batch.
    """
    started = time.perf_counter()
    graph = session.graph
    if not graph.feedback_enabled:
        return fall_through(
            "feedback_disabled", "feedback is disabled for this graph", graph=graph.pk, session=session.external_id
        )
    if not items:
        return fall_through("nothing_reported", "no items were reported", graph=graph.pk, session=session.external_id)
    for index, item in enumerate(items):
        if item.signal not in SIGNALS:
            raise FeedbackError(f"items[{index}].signal", f"must be one of {', '.join(SIGNALS)}.")
    seen: dict[tuple[str, int], str] = {}
    for index, item in enumerate(items):
        previous = seen.setdefault((item.kind, item.id), item.signal)
        if previous != item.signal:
            raise FeedbackError(
                f"items[{index}]", f"{item.kind} {item.id} is reported both {previous} and {item.signal}."
            )
    unique = list({(i.kind, i.id): i for i in items}.values())
    policy = graph.current_policy()
    lr = _bounded("learning_rate", learning_rate, policy.learning_rate)
    neg = _bounded("negative_rate", learning_rate, policy.negative_rate)

    with transaction.atomic():
        # The session row orders concurrent reports of one session, so "once per session" holds; the
        # checks below run after the lock, so a report that waited sees what the first one committed.
        AgentSession.objects.select_for_update().filter(pk=session.pk).first()
        if idempotency_key:
            done = UpdateBatch.objects.filter(idempotency_key=idempotency_key).first()
            if done:
                return _existing(done)
        _check_targets(graph, unique)
        targets = [(i, source) for i in unique] + [(i, "path") for i in path_credit(session, unique)]
        credited = _already_credited(session, [i for i, _s in targets])
        targets = [(i, s) for i, s in targets if (i.kind, i.id) not in credited]
        if not targets:
            return fall_through(
                "already_credited",
                "every reported item was already credited in this session",
                graph=graph.pk,
                session=session.external_id,
            )
        events = UseEvent.objects.bulk_create(
            [
                UseEvent(
                    graph=graph,
                    session=session,
                    injection_id=i.injection_id,
                    signal=i.signal,
                    source=s,
                    node_id=i.id if i.kind == "node" else None,
                    edge_id=i.id if i.kind == "edge" else None,
                )
                for i, s in targets
            ]
        )
        reported = [i for i, s in targets if s != "path"]
        batch = _start_batch(
            graph,
            "reinforce",
            actor,
            session=session,
            key=idempotency_key,
            details={
                "learning_rate": lr,
                "negative_rate": neg,
                "source": source,
                "signals": {s: sum(1 for i in reported if i.signal == s) for s in SIGNALS},
                "path_edges": sorted(i.id for i, s in targets if s == "path"),
            },
        )
        if batch is None:
            # A concurrent run with the same key committed first: drop our use events, answer with its batch.
            existing = UpdateBatch.objects.get(idempotency_key=idempotency_key)
            transaction.set_rollback(True)
            return _existing(existing)
        new_expr = (
            "CASE WHEN i.event = 'negative' THEN i.before - %(neg)s::double precision * i.before"
            " ELSE i.before + %(lr)s::double precision * (1 - i.before) END"
        )
        kinds, changes, params = [], [], {"lr": lr, "neg": neg}
        for kind, table, field_name in (("edge", EDGE_TABLE, "weight"), ("node", NODE_TABLE, "feedback_weight")):
            chosen = [(i, e) for (i, _s), e in zip(targets, events) if i.kind == kind]
            if not chosen:
                continue
            params.update(
                {
                    f"{kind}_ids": [i.id for i, _ in chosen],
                    f"{kind}_signals": [i.signal for i, _ in chosen],
                    f"{kind}_events": [e.pk for _, e in chosen],
                }
            )
            rows = (
                f"SELECT * FROM unnest(%({kind}_ids)s::bigint[], %({kind}_signals)s::text[], %({kind}_events)s::bigint[])"
                " AS x(id, event, use_event_id)"
            )
            kinds.append(kind)
            changes.append(Change(table, field_name, rows, new_expr=new_expr, use_event_expr="i.use_event_id"))
        written, _ = _apply_changes(changes, graph_id=graph.pk, batch_id=batch.pk, params=params, now=batch.started_at)
        counts = {"edge": 0, "node": 0, **dict(zip(kinds, written))}
        return _finish(
            batch,
            actor,
            started,
            node_updates=counts["node"],
            edge_updates=counts["edge"],
            audit_extra={"session": session.external_id, "source": source},
        )


def path_credit(session: AgentSession, items: list[UseItem]) -> list[UseItem]:
    """The edges a report credits besides its items: the paths that surfaced the reported nodes.

    For each node used (explicit or implicit), every edge on its path in the session's injections
    where it was selected; for a node flagged negative, the last edge of each such path. An edge
    credited both ways (one used node's path, another's wrong last step) moves up only: a path that
    led to something useful is not blamed for a detour. Edges reported themselves keep their own
    signal. One query.
    """
    nodes = {i.id: i for i in items if i.kind == "node"}
    if not nodes:
        return []
    rows = InjectionCandidate.objects.filter(
        graph_id=session.graph_id, injection__session=session, node_id__in=list(nodes), selected=True
    ).values_list("node_id", "injection_id", "edge_id", "features")
    reported_edges = {i.id for i in items if i.kind == "edge"}
    credit: dict[int, UseItem] = {}
    for node_id, injection_id, edge_id, features in rows:
        path = (features or {}).get("path") or ([edge_id] if edge_id else [])
        item = nodes[node_id]
        edges = path[-1:] if item.signal == "negative" else path
        for edge in edges:
            if edge in reported_edges:
                continue
            previous = credit.get(edge)
            if previous is None or (previous.signal == "negative" and item.signal != "negative"):
                credit[edge] = UseItem("edge", edge, item.signal, injection_id)
    return [credit[e] for e in sorted(credit)]


def _already_credited(session: AgentSession, items: list[UseItem]) -> set[tuple[str, int]]:
    """The (kind, id) among ``items`` that already have a use event in this session (one query)."""
    nodes = [i.id for i in items if i.kind == "node"]
    edges = [i.id for i in items if i.kind == "edge"]
    found = (
        UseEvent.objects.filter(graph_id=session.graph_id, session=session)
        .filter(Q(node_id__in=nodes) | Q(edge_id__in=edges))
        .values_list("node_id", "edge_id")
    )
    return {("node", n) if n else ("edge", e) for n, e in found}


def _check_targets(graph: Graph, items: list[UseItem]) -> None:
    """Refuse items that are not live nodes/edges of this graph (another graph's ids read as unknown)."""
    for kind, model in (("node", Node), ("edge", Edge)):
        wanted = {i.id for i in items if i.kind == kind}
        if not wanted:
            continue
        found = set(model.objects.filter(graph=graph, archived=False, pk__in=wanted).values_list("pk", flat=True))
        missing = sorted(wanted - found)
        if missing:
            index = next(n for n, i in enumerate(items) if i.kind == kind and i.id == missing[0])
            raise FeedbackError(f"items[{index}].{kind}", f"unknown {kind} {missing[0]} in this graph.")


# --------------------------------------------------------------------------------------------------
# Implicit use detection

WORD = re.compile(r"[a-z0-9][a-z0-9_\-]*[a-z0-9]|[a-z0-9]")
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only
    or other our ours out over own same she should so some such than that the their them then there these they
    this those through to too under until up very was we were what when where which while who whom why will with
    would you your yours note notes use used using""".split()
)


def distinctive_grams(text: str) -> set[str]:
    """Word unigrams (3+ letters, not stopwords) and bigrams of adjacent such words, lower-cased."""
    words = WORD.findall(text.lower())
    grams: set[str] = set()
    previous = None
    for word in words:
        if word in STOPWORDS or len(word) < 3:
            previous = None
            continue
        grams.add(word)
        if previous:
            grams.add(f"{previous} {word}")
        previous = word
    return grams


def detect_implicit(candidates: list[dict], response: str, threshold: float, min_grams: int = 2) -> list[dict]:
    """The candidates a response text used, by overlap of their *distinctive* word n-grams.

    An item's distinctive grams are its title and text grams (``distinctive_grams``) minus those it
    shares with any other surfaced candidate, so boilerplate common to the context proves nothing.
    It counts as used when at least ``threshold`` of them (the policy's ``implicit_threshold``)
    appear in the response, and it has at least ``min_grams`` of them (too little text decides nothing).
    Pure function: no database.
    """
    grams = {c["node_id"]: distinctive_grams(f"{c['title']} {c['text']}") for c in candidates}
    seen_by: dict[str, int] = {}
    for node_grams in grams.values():
        for g in node_grams:
            seen_by[g] = seen_by.get(g, 0) + 1
    reply = distinctive_grams(response)
    used = []
    for c in candidates:
        own = {g for g in grams[c["node_id"]] if seen_by[g] == 1}
        if len(own) < min_grams:
            continue
        share = len(own & reply) / len(own)
        if share >= threshold:
            used.append({**c, "share": round(share, 4)})
    return used


def apply_response(actor, session: AgentSession, response: str, *, idempotency_key: str | None = None) -> Result:
    """Detect which selected candidates of the session the response used, and reinforce them as implicit.

    A used candidate reinforces its node and, through ``apply_uses``, the path that surfaced it.
    """
    graph = session.graph
    if not graph.feedback_enabled:
        return fall_through(
            "feedback_disabled", "feedback is disabled for this graph", graph=graph.pk, session=session.external_id
        )
    rows = list(
        InjectionCandidate.objects.filter(graph=graph, injection__session=session, selected=True)
        .order_by("node_id", "-injection_id")
        .distinct("node_id")
        .values("node_id", "edge_id", "injection_id", "node__title", "node__text")
    )
    if not rows:
        return fall_through(
            "nothing_surfaced", "the session has no selected candidates", graph=graph.pk, session=session.external_id
        )
    candidates = [
        {
            "node_id": r["node_id"],
            "edge_id": r["edge_id"],
            "injection_id": r["injection_id"],
            "title": r["node__title"],
            "text": r["node__text"],
        }
        for r in rows
    ]
    used = detect_implicit(candidates, response, graph.current_policy().implicit_threshold)
    if not used:
        return fall_through(
            "nothing_detected", "the response used no surfaced item", graph=graph.pk, session=session.external_id
        )
    items = [UseItem("node", c["node_id"], "implicit", c["injection_id"]) for c in used]
    return apply_uses(actor, session, items, source="response", idempotency_key=idempotency_key)


# --------------------------------------------------------------------------------------------------
# 2. Outcome EMA


def apply_outcome(
    actor,
    graph: Graph,
    external_id: str,
    outcome: str,
    *,
    alpha: float | None = None,
    idempotency_key: str | None = None,
) -> Result:
    """EMA on ``feedback_weight`` of every node and edge selected in the session's injections.

    ``w = alpha * score(outcome) + (1 - alpha) * w``, alpha from the policy unless overridden within
    its bounds. Reporting the session's current outcome again returns the batch that applied it
    (status ``duplicate``); a different outcome later is a new batch whose ``correction_of`` names
    the previous outcome batch (it moves the weights from where they are, it does not undo the first:
    roll that back for that). Unknown session, no injection, nothing selected, feedback disabled:
    a logged no-op with that status. With ``idempotency_key`` (one per report) a retried task returns
    the batch its first run wrote, even if another outcome was applied in between.
    """
    started = time.perf_counter()
    if outcome not in OUTCOMES:
        raise FeedbackError("outcome", f"must be one of {', '.join(OUTCOMES)}.")
    alpha = _bounded("ema_alpha", alpha, None)  # an override is checked first; the policy's is read below
    context = {"graph": graph.pk, "session": external_id, "outcome": outcome}
    if not graph.feedback_enabled:
        return fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    with transaction.atomic():
        state = _lock_session(graph, external_id, outcome, idempotency_key)
        if state is None:
            return fall_through("unknown_session", "outcome for an unknown session", **context)
        session_id, current_outcome, unchanged, *facts = state
        if not unchanged:
            # We waited for the lock on a session another report changed after this statement began:
            # its facts came from the statement's snapshot, so read them again (a new snapshot).
            facts = _outcome_facts(graph, session_id, outcome, idempotency_key)
        retry_id, previous_id, has_injection, has_selected, batch_id, revision, policy_alpha, score = facts
        if retry_id is not None:
            return _existing(UpdateBatch.objects.get(pk=retry_id))
        if previous_id is not None and current_outcome == outcome:
            return _existing(UpdateBatch.objects.get(pk=previous_id))
        if not has_injection:
            return fall_through("no_injection", "the session has no context injection", **context)
        if not has_selected:
            return fall_through("nothing_surfaced", "the session's injections surfaced nothing", **context)
        alpha = policy_alpha if alpha is None else alpha
        batch = _new_batch(
            graph,
            "outcome",
            actor,
            key=idempotency_key,
            id=batch_id,
            correction_of_id=previous_id,
            details={
                "outcome": outcome,
                "score": score,
                "alpha": alpha,
                "policy_revision": revision,
                **({"correction_of": previous_id, "previous_outcome": current_outcome} if previous_id else {}),
            },
        )
        batch.trigger_session_id = session_id
        _write_outcome(batch, session_id, outcome, alpha=alpha, score=score, started=started)
        return _audit_batch(
            batch, actor, {"session": external_id, "outcome": outcome, "alpha": alpha, "correction_of": previous_id}
        )


def _selected_candidates(session: str = "%(session)s") -> str:
    """FROM/WHERE of the selected candidates (``c``) of session ``session`` (an SQL expression)."""
    return f"""
        FROM feedback_injectioncandidate c JOIN feedback_contextinjection j ON j.id = c.injection_id
        WHERE j.session_id = {session} AND c.graph_id = %(graph)s AND c.selected
    """


def _facts_sql(session: str, outcome: str) -> str:
    """What an outcome report needs to know about session ``session`` (an SQL expression), as a select list.

    The batch of this very report if it is a retry, the session's last outcome batch, has an
    injection, has a selected candidate, a reserved id for the new batch, and from the current
    policy (``p``, see ``_CURRENT_POLICY``) its revision, EMA alpha and the outcome's score.
    """
    return f"""(SELECT id FROM feedback_updatebatch WHERE idempotency_key = %(key)s),
               (SELECT id FROM feedback_updatebatch WHERE trigger_session_id = {session} AND kind = 'outcome'
                ORDER BY id DESC LIMIT 1),
               EXISTS (SELECT 1 FROM feedback_contextinjection WHERE session_id = {session}),
               EXISTS (SELECT 1 {_selected_candidates(session)}),
               nextval(pg_get_serial_sequence('{UpdateBatch._meta.db_table}', 'id')),
               p.revision, p.ema_alpha, p.outcome_{outcome}"""


# For the rest of the transaction, plan row scans through indexes (the write's primary-key scans then
# lock rows in id order, see ``_change_ctes``): two values to drop from the statement's row.
_ID_ORDER_SCANS = "set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)"

# ``Graph.current_policy`` (the newest revision), as a relation ``p``.
_CURRENT_POLICY = (
    f"(SELECT * FROM {PolicyRevision._meta.db_table} WHERE graph_id = %(graph)s ORDER BY revision DESC LIMIT 1) p"
)


def _lock_session(graph: Graph, external_id: str, outcome: str, key: str | None) -> tuple | None:
    """Lock the session row (it serialises every outcome report of the session) and read, in the same
    statement, its id, outcome, whether it is unchanged since the statement began, and its facts
    (``_facts_sql``); None for an unknown session.

    Under READ COMMITTED the facts come from the statement's snapshot, taken before the lock. If we
    waited for another report of this session that committed, the locked row is that report's new
    version (its ``xmin`` differs from the snapshot's) and the facts may miss its batch: the caller
    then reads them again (``_outcome_facts``). Every outcome batch updates its session row.
    """
    with connection.cursor() as cur:
        cur.execute(
            f"""SELECT s.id, s.outcome, s.xmin = (SELECT o.xmin FROM feedback_agentsession o WHERE o.id = s.id),
                       {_facts_sql("s.id", outcome)},
                       {_ID_ORDER_SCANS}
                FROM feedback_agentsession s CROSS JOIN {_CURRENT_POLICY}
                WHERE s.graph_id = %(graph)s AND s.external_id = %(external_id)s
                FOR UPDATE OF s""",
            {"graph": graph.pk, "external_id": external_id, "key": key},
        )
        row = cur.fetchone()
        return row[:-2] if row else None


def _outcome_facts(graph: Graph, session_id: int, outcome: str, key: str | None) -> list:
    """The facts of ``_lock_session`` read again, in a new statement (so a new snapshot)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT {_facts_sql('%(session)s', outcome)} FROM {_CURRENT_POLICY}",
            {"graph": graph.pk, "session": session_id, "key": key},
        )
        return list(cur.fetchone())


def _write_outcome(
    batch: UpdateBatch, session_id: int, outcome: str, *, alpha: float, score: float, started: float
) -> None:
    """The outcome's writes, in one statement: the EMA ``alpha * score + (1 - alpha) * w`` on the
    selected edges then nodes with their history, the session's outcome, and the batch row with its
    counts (written once). Sets the batch's counts, finish time and duration (the action's time up
    to the end of the statement). Both numbers are bound parameters.
    """
    new_expr = (
        "%(alpha)s::double precision * %(score)s::double precision + (1 - %(alpha)s::double precision) * i.before"
    )
    # The surfaced edges are every edge on a selected candidate's path (logs older than the pipeline
    # have no path: their one edge).
    path_edges = (
        "SELECT p.e::bigint FROM feedback_injectioncandidate c JOIN feedback_contextinjection j ON j.id = c.injection_id"
        " CROSS JOIN LATERAL jsonb_array_elements_text(coalesce(c.features -> 'path', jsonb_build_array(c.edge_id))) AS p(e)"
        " WHERE j.session_id = %(session)s AND c.graph_id = %(graph)s AND c.selected AND p.e IS NOT NULL"
    )
    changes = [
        Change(EDGE_TABLE, "feedback_weight", path_edges, new_expr=new_expr, event_expr="%(outcome)s", ids_only=True),
        Change(
            NODE_TABLE,
            "feedback_weight",
            f"SELECT c.node_id {_selected_candidates()}",
            new_expr=new_expr,
            event_expr="%(outcome)s",
            ids_only=True,
        ),
    ]
    # Duration: Python's time before the statement plus the statement's own, each on one clock.
    duration = (
        "(%(elapsed_ms)s + 1000 * extract(epoch FROM clock_timestamp() - statement_timestamp()))::double precision"
    )
    insert_batch, batch_params = _batch_insert_cte(
        batch,
        {
            "edge_updates": "(SELECT n FROM c0)",
            "node_updates": "(SELECT n FROM c1)",
            "finished_at": f"%(b_started_at)s + {duration} * interval '1 millisecond'",
            "duration_ms": f"round({duration}::numeric, 3)",
        },
    )
    set_outcome = (
        "s AS (UPDATE feedback_agentsession SET outcome = %(outcome)s, outcome_at = %(now)s WHERE id = %(session)s)"
    )
    (edges, nodes), (finished_at, duration_ms) = _apply_changes(
        changes,
        graph_id=batch.graph_id,
        batch_id=batch.pk,
        now=batch.started_at,
        params={
            **batch_params,
            "session": session_id,
            "outcome": outcome,
            "alpha": alpha,
            "score": score,
            "elapsed_ms": (time.perf_counter() - started) * 1000.0,
        },
        then=(set_outcome, insert_batch),
        returning=("(SELECT finished_at FROM b)", "(SELECT duration_ms FROM b)"),
    )
    batch.edge_updates, batch.node_updates, batch.finished_at, batch.duration_ms = (
        edges,
        nodes,
        finished_at,
        duration_ms,
    )


# --------------------------------------------------------------------------------------------------
# 3. Decay


def decay_period(graph: Graph, now: datetime | None = None, *, policy=None) -> tuple[int, datetime, datetime]:
    """(period index, start of the current period, cutoff) for the graph's policy at ``now``.

    Periods are ``decay_period_days`` long, counted from the Unix epoch in UTC. The run for period
    ``p`` decays edges not traversed since the start of period ``p - 1`` (the cutoff): no traversal
    during the last full period, nor since.
    """
    now = now or datetime.now(UTC)
    days = (policy or graph.current_policy()).decay_period_days
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    index = (now - epoch).days // days
    start = epoch + timedelta(days=index * days)
    return index, start, start - timedelta(days=days)


# The edges of a graph a decay run changes (alias ``e``): live, above the floor, older than the cutoff
# and not traversed since it. Parameters: floor, cutoff.
DECAY_WHERE = """
    NOT e.archived AND e.weight > %(floor)s AND e.created_at < %(cutoff)s
    AND NOT EXISTS (SELECT 1 FROM graphadmin_edgestats s WHERE s.edge_id = e.id AND s.last_traversed_at >= %(cutoff)s)
"""
DEADLOCK_RETRIES = 3


def _edge_chunk(
    graph: Graph,
    kind: str,
    actor,
    *,
    key: str,
    lo: int,
    hi: int,
    details: dict,
    where: str,
    params: dict,
    new_expr: str,
    audit_extra: dict,
    summary: dict,
) -> tuple[int, int | None]:
    """One chunk of a chunked edge-weight action (decay, normalize): its own short transaction and batch.

    Changes ``weight`` of the edges with ids in [lo, hi) matching ``where`` (``_update_range``; block
    history). The chunk commits asynchronously (``synchronous_commit`` off for this transaction: no
    wait for the WAL flush); a crash right after can lose the last chunks, never part of one, and
    the next run of the period re-applies them (their keys were lost with them). Skips a
    chunk whose idempotency key already has a batch (a retried or repeated run); leaves no batch
    (nor audit event) behind when the range changes nothing; retries the chunk if PostgreSQL chose
    it as a deadlock victim. Records the batch id or the skip in ``summary``. Returns (edges
    written, batch id or None).
    """
    for attempt in range(DEADLOCK_RETRIES + 1):
        try:
            return _edge_chunk_once(
                graph,
                kind,
                actor,
                key=key,
                lo=lo,
                hi=hi,
                details=details,
                where=where,
                params=params,
                new_expr=new_expr,
                audit_extra=audit_extra,
                summary=summary,
            )
        except OperationalError as exc:
            if not isinstance(exc.__cause__, DeadlockDetected) or attempt == DEADLOCK_RETRIES:
                raise
            log.warning("chunk was a deadlock victim; retrying", extra={"key": key, "attempt": attempt + 1})
    raise AssertionError("unreachable")


def _edge_chunk_once(graph, kind, actor, *, key, lo, hi, details, where, params, new_expr, audit_extra, summary):
    chunk_started = time.perf_counter()
    # Settings for this chunk's transaction: the UPDATE walks the primary key (see _update_range), and
    # the commit does not wait for its WAL flush (never relaxed for a caller's own transaction).
    settings = [_ID_ORDER_SCANS]
    if not connection.in_atomic_block:
        settings.append("set_config('synchronous_commit', 'off', true)")
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute(f"SELECT {', '.join(settings)}")
        batch = _start_batch(graph, kind, actor, key=key, details=details)
        if batch is None:
            summary["skipped_chunks"] += 1
            return 0, None
        written = _update_range(
            graph_id=graph.pk,
            batch_id=batch.pk,
            lo=lo,
            hi=hi,
            where=where,
            params=params,
            new_expr=new_expr,
            event=kind,
            now=batch.started_at,
        )
        if written == 0:
            # Nothing in this range: leave no empty batch (and no audit noise) behind.
            transaction.set_rollback(True)
            return 0, None
        _finish(batch, actor, chunk_started, edge_updates=written, audit_extra=audit_extra)
    summary["batches"].append(batch.pk)
    return written, batch.pk


def _chunks(graph: Graph, chunk_size: int) -> list[int]:
    """The id ranges (k: ids in [k * chunk_size, (k + 1) * chunk_size)) that hold live edges of the graph.

    Edge ids come from one sequence shared by all graphs, so a graph's ids can be spread out; only
    the ranges that hold its edges are visited. Found by skipping through the (graph, id) index: one
    probe per range, not a scan of the graph's edges.
    """
    with connection.cursor() as cur:
        cur.execute(
            f"""
            WITH RECURSIVE k(n) AS (
                SELECT (SELECT min(id) FROM {EDGE_TABLE} WHERE graph_id = %(graph)s AND NOT archived) / %(size)s
                UNION ALL
                SELECT (SELECT min(id) FROM {EDGE_TABLE} WHERE graph_id = %(graph)s AND NOT archived
                        AND id >= (k.n + 1) * %(size)s) / %(size)s
                FROM k WHERE k.n IS NOT NULL
            )
            SELECT n FROM k WHERE n IS NOT NULL
            """,
            {"graph": graph.pk, "size": chunk_size},
        )
        return [row[0] for row in cur.fetchall()]


def _chunked_result(summary: dict, edges: int, duration_ms: float) -> Result:
    """The Result of a chunked run: applied (batch ids in details), duplicate (every chunk done before) or a no-op."""
    status = "applied" if summary["batches"] else ("duplicate" if summary["skipped_chunks"] else "nothing_to_change")
    batch_id = summary["batches"][0] if len(summary["batches"]) == 1 else None
    return Result(status, batch_id, 0, edges, 0, duration_ms, details=summary)


def decay(
    actor, graph: Graph, *, now: datetime | None = None, chunk_size: int = DECAY_CHUNK, dry_run: bool = False
) -> Result:
    """Multiply the weight of edges not traversed during the period by ``decay_rate``, never below the floor.

    Chunk semantics: the graph's edge ids are cut into fixed ranges ``[k * chunk_size, (k + 1) *
    chunk_size)``; each range is its own short transaction and, when it changes anything, its own
    UpdateBatch (kind ``decay``, idempotency key ``decay:<graph>:<period>:<k>``) with its
    history blocks and AuditEvent. So row locks are held for one chunk only, a killed run leaves
    whole chunk batches and no partial one, and a second run in the same period skips every chunk
    already applied (the ranges do not depend on what changed). Archived edges, edges at or below
    the floor, and edges traversed since the cutoff are untouched. The returned Result sums the run;
    ``details`` lists the chunk batches. ``dry_run`` counts what would change (``decay_preview``)
    and writes nothing.
    """
    started = time.perf_counter()
    policy = graph.current_policy()
    period, _start, cutoff = decay_period(graph, now, policy=policy)
    rate, floor = policy.decay_rate, policy.weight_floor
    details = {"period": period, "cutoff": cutoff.isoformat(), "rate": rate, "floor": floor}
    summary = {**details, "batches": [], "skipped_chunks": 0}
    chunks = _chunks(graph, chunk_size)
    if not chunks or rate >= 1.0:
        return Result(
            "nothing_to_change", details=summary, duration_ms=round((time.perf_counter() - started) * 1000, 3)
        )
    if dry_run:
        edges = decay_preview(graph, now=now, limit=0)["edges"]
        return Result("dry_run", None, 0, edges, 0, round((time.perf_counter() - started) * 1000, 3), details=summary)
    params = {"floor": floor, "cutoff": cutoff, "rate": rate}
    edges = 0
    for k in chunks:
        lo, hi = k * chunk_size, (k + 1) * chunk_size
        written, _batch = _edge_chunk(
            graph,
            "decay",
            actor,
            key=f"decay:{graph.pk}:{period}:{k}",
            lo=lo,
            hi=hi,
            details={**details, "id_range": [lo, hi]},
            where=DECAY_WHERE,
            params=params,
            new_expr="CASE WHEN {w} > %(floor)s THEN greatest(%(floor)s, {w} * %(rate)s) ELSE {w} END",
            audit_extra={"period": period, "id_range": [lo, hi]},
            summary=summary,
        )
        edges += written
    duration = round((time.perf_counter() - started) * 1000, 3)
    return _chunked_result(summary, edges, duration)


def decay_preview(graph: Graph, *, now: datetime | None = None, limit: int = 20) -> dict:
    """What ``decay`` would change now, without writing: the count and the first ``limit`` edges."""
    policy = graph.current_policy()
    period, _start, cutoff = decay_period(graph, now, policy=policy)
    rate, floor = policy.decay_rate, policy.weight_floor
    params = {"graph": graph.pk, "cutoff": cutoff, "floor": floor, "rate": rate, "limit": limit}
    with connection.cursor() as cur:
        cur.execute(f"SELECT count(*) FROM {EDGE_TABLE} e WHERE e.graph_id = %(graph)s AND {DECAY_WHERE}", params)
        total = cur.fetchone()[0]
        cur.execute(
            f"""SELECT e.id, e.weight, greatest(%(floor)s, e.weight * %(rate)s) FROM {EDGE_TABLE} e
                WHERE e.graph_id = %(graph)s AND {DECAY_WHERE} ORDER BY e.id LIMIT %(limit)s""",
            params,
        )
        sample = [{"edge": i, "before": b, "after": a} for i, b, a in cur.fetchall()]
    applied = UpdateBatch.objects.filter(idempotency_key__startswith=f"decay:{graph.pk}:{period}:").count()
    return {
        "period": period,
        "cutoff": cutoff.isoformat(),
        "rate": rate,
        "floor": floor,
        "edges": total,
        "sample": sample,
        "chunks_already_applied": applied,
    }


# --------------------------------------------------------------------------------------------------
# 4. Ceiling: normalize


def normalize(actor, graph: Graph, *, chunk_size: int = DECAY_CHUNK, idempotency_key: str | None = None) -> Result:
    """Rescale the weights of the graph's live edges so the largest is 1.0 (the ``normalize`` ceiling mode).

    The factor ``1 / max(weight)`` is read once; it is then applied chunk by chunk, exactly like
    decay (fixed id ranges, one short transaction and one batch of kind ``normalize`` per range that
    changes, so row locks are never held long), as ``least(1.0, weight * factor)``: an edge
    reinforced between chunks is capped at 1.0. ``idempotency_key`` names the run, so a retried task
    skips the chunks already applied. A no-op (``nothing_to_change``) when the maximum is already
    1.0 or every weight is 0.
    """
    started = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(f"SELECT max(weight) FROM {EDGE_TABLE} WHERE graph_id = %s AND NOT archived", [graph.pk])
        (top,) = cur.fetchone()
    if not top or top >= 1.0:
        return Result("nothing_to_change", details={"max_weight": top})
    factor = 1.0 / top
    run = idempotency_key or uuid.uuid4().hex
    summary = {"max_weight": top, "factor": factor, "run": run, "batches": [], "skipped_chunks": 0}
    edges = 0
    for k in _chunks(graph, chunk_size):
        lo, hi = k * chunk_size, (k + 1) * chunk_size
        written, _batch = _edge_chunk(
            graph,
            "normalize",
            actor,
            key=f"normalize:{graph.pk}:{run}:{k}"[:200],
            lo=lo,
            hi=hi,
            details={"max_weight": top, "factor": factor, "run": run, "id_range": [lo, hi]},
            where="NOT e.archived",
            params={"factor": factor},
            new_expr="least(1.0, {w} * %(factor)s)",
            audit_extra={"max_weight": top, "id_range": [lo, hi]},
            summary=summary,
        )
        edges += written
    duration = round((time.perf_counter() - started) * 1000, 3)
    return _chunked_result(summary, edges, duration)


# --------------------------------------------------------------------------------------------------
# Manual set


@dataclass(frozen=True)
class ManualValue:
    """A weight an operator sets by hand: ``kind`` node or edge, ``field`` weight or feedback_weight."""

    kind: str
    id: int
    field: str
    value: float


def set_weights(actor, graph: Graph, values: list[ManualValue], *, reason: str = "") -> Result:
    """Set weights by hand (kind ``manual``): one batch, audited with the reason."""
    started = time.perf_counter()
    for index, v in enumerate(values):
        if v.kind == "node" and v.field != "feedback_weight":
            raise FeedbackError(f"values[{index}].field", "nodes have only feedback_weight.")
        if v.field not in ("weight", "feedback_weight"):
            raise FeedbackError(f"values[{index}].field", "must be weight or feedback_weight.")
        if not (0.0 <= v.value <= 1.0):
            raise FeedbackError(f"values[{index}].value", "must be between 0 and 1.")
    if len({(v.kind, v.id, v.field) for v in values}) != len(values):
        raise FeedbackError("values", "each weight may be set once per call.")
    with transaction.atomic():
        _check_targets(graph, [UseItem(v.kind, v.id, "explicit") for v in values])
        batch = _start_batch(graph, "manual", actor, details={"reason": reason})
        counts = {"node": 0, "edge": 0}
        for kind, table, field_name in (
            ("edge", EDGE_TABLE, "weight"),
            ("edge", EDGE_TABLE, "feedback_weight"),
            ("node", NODE_TABLE, "feedback_weight"),
        ):
            chosen = [v for v in values if v.kind == kind and v.field == field_name]
            if not chosen:
                continue
            rows = "SELECT * FROM unnest(%(p0)s::bigint[], %(p1)s::double precision[]) AS x(id, value)"
            written, _c, _s = _apply(
                table=table,
                field_name=field_name,
                graph_id=graph.pk,
                batch_id=batch.pk,
                rows_sql=rows,
                rows_params=[[v.id for v in chosen], [v.value for v in chosen]],
                new_expr="i.value",
                event_expr="'manual'",
                now=batch.started_at,
            )
            counts[kind] += written
        return _finish(
            batch,
            actor,
            started,
            node_updates=counts["node"],
            edge_updates=counts["edge"],
            audit_extra={"reason": reason},
        )


# --------------------------------------------------------------------------------------------------
# 4b. Links the graph learns: co_used edges

CO_USED = "co_used"
CO_USED_DESCRIPTION = (
    "Learned: both notes were used in the same accepted sessions (created by feedback, not by an import)."
)


def co_used_pairs(session: AgentSession, threshold: int) -> list[tuple[int, int, int]]:
    """(a, b, sessions) for pairs of nodes used in ``session`` that are used together in at least
    ``threshold`` accepted sessions of the graph and that no edge links (either way, any type; an
    archived co_used edge counts, so a rolled-back link stays undone). a < b.

    "Used" is an explicit or implicit use event on the node itself (path credit is not a use).
    Raw SQL: a self-join of the session's uses with the graph's, grouped by pair, that the ORM
    would write as several queries; every table filtered by graph_id.
    """
    sql = f"""
        WITH mine AS (
            SELECT DISTINCT u.node_id FROM feedback_useevent u
            WHERE u.graph_id = %(graph)s AND u.session_id = %(session)s AND u.node_id IS NOT NULL
              AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
        ),
        pairs AS (SELECT a.node_id AS a, b.node_id AS b FROM mine a JOIN mine b ON a.node_id < b.node_id),
        together AS (
            SELECT p.a, p.b, count(DISTINCT ua.session_id) AS n
            FROM pairs p
            JOIN feedback_useevent ua ON ua.graph_id = %(graph)s AND ua.node_id = p.a
                 AND ua.signal IN ('explicit', 'implicit') AND ua.source <> 'path'
            JOIN feedback_useevent ub ON ub.graph_id = %(graph)s AND ub.node_id = p.b AND ub.session_id = ua.session_id
                 AND ub.signal IN ('explicit', 'implicit') AND ub.source <> 'path'
            JOIN feedback_agentsession s ON s.id = ua.session_id AND s.graph_id = %(graph)s AND s.outcome = 'accepted'
            GROUP BY p.a, p.b
            HAVING count(DISTINCT ua.session_id) >= %(threshold)s
        )
        SELECT t.a, t.b, t.n FROM together t
        WHERE NOT EXISTS (
            SELECT 1 FROM {EDGE_TABLE} e
            JOIN graphadmin_edgetype et ON et.id = e.edge_type_id AND et.graph_id = %(graph)s
            WHERE e.graph_id = %(graph)s AND ((e.source_id = t.a AND e.target_id = t.b) OR (e.source_id = t.b AND e.target_id = t.a))
              AND (NOT e.archived OR et.name = %(co_used)s)
        )
        ORDER BY t.a, t.b
    """
    with connection.cursor() as cur:
        cur.execute(sql, {"graph": session.graph_id, "session": session.pk, "threshold": threshold, "co_used": CO_USED})
        return [tuple(r) for r in cur.fetchall()]


def link_co_used(actor, session: AgentSession) -> Result:
    """Link what keeps being used together: a ``co_used`` edge for each pair of ``co_used_pairs``.

    Run after an accepted outcome. Co-use is symmetric and expansion follows edges forward, so each
    pair gets an edge both ways, weight and feedback weight neutral (0.5), with its triplet
    embedding. The edge type ``co_used`` (priority 0) is created on first use and tuned like any
    other. One ``link`` batch (details: the edges and the pairs) and one audit event; rolling the
    batch back archives the edges. A clean no-op when feedback is off, the session is not accepted
    or no pair qualifies.
    """
    started = time.perf_counter()
    graph = session.graph
    context = {"graph": graph.pk, "session": session.external_id}
    if not graph.feedback_enabled:
        return fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    if session.outcome != "accepted":
        return fall_through("not_accepted", "links are learned from accepted sessions only", **context)
    policy = graph.current_policy()
    with transaction.atomic():
        # The session lock orders two links of the same session; ON CONFLICT below, two sessions'.
        AgentSession.objects.select_for_update().filter(pk=session.pk).first()
        pairs = co_used_pairs(session, policy.co_use_min_sessions)
        if not pairs:
            # The usual case after an accepted session: not worth a warning (fall_through logs one).
            return Result(
                "no_new_links", details={"reason": "no unlinked pair was used together often enough", **context}
            )
        edge_type, _ = EdgeType.objects.get_or_create(
            graph=graph, name=CO_USED, defaults={"priority": 0.0, "description": CO_USED_DESCRIPTION}
        )
        titles = dict(
            Node.objects.filter(graph=graph, pk__in={n for a, b, _n in pairs for n in (a, b)}).values_list(
                "id", "title"
            )
        )
        ends = [(a, b) for a, b, _n in pairs] + [(b, a) for a, b, _n in pairs]
        vectors = embed_texts([triplet_text(titles[a], CO_USED, titles[b]) for a, b in ends])
        batch = _start_batch(
            graph,
            "link",
            actor,
            session=session,
            details={"threshold": policy.co_use_min_sessions, "pairs": [list(p) for p in pairs]},
        )
        with connection.cursor() as cur:
            cur.execute(
                f"""INSERT INTO {EDGE_TABLE} (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight,
                                              triplet_embedding, embedding_model, archived, created_at, updated_at)
                    SELECT %(graph)s, x.s, x.t, %(type)s, 0.5, 0.5, x.v::vector,
                           CASE WHEN x.v IS NULL THEN '' ELSE %(model)s END, false, now(), now()
                    FROM unnest(%(sources)s::bigint[], %(targets)s::bigint[], %(vectors)s::text[]) AS x(s, t, v)
                    ON CONFLICT (source_id, target_id, edge_type_id) DO NOTHING
                    RETURNING id""",
                {
                    "graph": graph.pk,
                    "type": edge_type.pk,
                    "sources": [a for a, _b in ends],
                    "targets": [b for _a, b in ends],
                    "vectors": [_vector_text(v) for v in vectors],
                    "model": configured_model(),
                },
            )
            created = sorted(r[0] for r in cur.fetchall())
        batch.details["created_edges"] = created
        return _finish(
            batch,
            actor,
            started,
            edge_updates=len(created),
            audit_extra={"session": session.external_id, "created_edges": created, "edge_type": CO_USED},
        )


def _vector_text(vector) -> str | None:
    if vector is None or not any(vector):
        return None
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _rollback_links(actor, target: UpdateBatch, started: float, *, undo: bool) -> Result:
    """Roll back a ``link`` batch (archive the edges it created) or the rollback of one (restore them).

    Links hold no weight change to restore: the edges themselves are what the batch made. An edge
    already in the wanted state is left alone and counted as a conflict.
    """
    graph = target.graph
    edges = target.details.get("created_edges" if target.kind == "link" else "edges", [])
    new = _start_batch(
        graph,
        "rollback",
        actor,
        rollback_of=target,
        details={
            "rollback_of": target.pk,
            "rolled_back_kind": "link" if undo else "link_rollback",
            "edges": edges,
            "force": False,
        },
    )
    changed = list(Edge.objects.filter(graph=graph, pk__in=edges, archived=not undo).values_list("pk", flat=True))
    Edge.objects.filter(graph=graph, pk__in=changed).update(archived=undo)
    conflicts = len(edges) - len(changed)
    new.details.update({"archived" if undo else "restored": sorted(changed), "conflict_ids": {}})
    target.status = "rolled_back"
    target.save(update_fields=["status"])
    return _finish(
        new,
        actor,
        started,
        edge_updates=len(changed),
        conflicts=conflicts,
        audit_extra={
            "rollback_of": target.pk,
            "rolled_back_kind": new.details["rolled_back_kind"],
            "forced": False,
            "edges": sorted(changed),
        },
    )


# --------------------------------------------------------------------------------------------------
# 5. Rollback


def rollback(actor, batch: UpdateBatch, *, force: bool = False) -> Result:
    """Undo a batch with a new batch of kind ``rollback`` that restores each ``before`` value.

    A row is restored only where its current value still equals that batch's ``after``; rows
    changed since are conflicts: counted, listed (first 100 ids per target and field) in the
    details, and left alone, unless ``force`` (then overwritten, recorded with event
    ``rollback_forced`` and audited as forced). The batch is marked ``rolled_back``; rolling it
    back again raises ``RollbackRefused``. A rollback batch is itself rollbackable (it re-applies
    the values it replaced). Every kind of batch is rollbackable. The rollback's history has the
    shape of the batch's (blocks for a bulk batch, rows otherwise).
    """
    started = time.perf_counter()
    with transaction.atomic():
        target = UpdateBatch.objects.select_for_update().select_related("graph").get(pk=batch.pk)
        # rollback() is the only writer of rollback_of, and it marks the batch rolled_back in the same transaction.
        if target.status == "rolled_back":
            raise RollbackRefused(f"batch {target.pk} has already been rolled back.")
        if target.kind == "link" or target.details.get("rolled_back_kind") in ("link", "link_rollback"):
            return _rollback_links(
                actor,
                target,
                started,
                undo=target.kind == "link" or target.details.get("rolled_back_kind") == "link_rollback",
            )
        history = "blocks" if WeightChangeBlock.objects.filter(batch=target).exists() else "rows"
        if (
            (target.node_updates or target.edge_updates)
            and history == "rows"
            and not WeightChange.objects.filter(batch=target).exists()
        ):
            raise RollbackRefused(
                f"batch {target.pk}'s weight history has expired (retention); it cannot be rolled back."
            )
        graph = target.graph
        new = _start_batch(
            graph,
            "rollback",
            actor,
            rollback_of=target,
            details={"rollback_of": target.pk, "rolled_back_kind": target.kind, "force": force},
        )
        counts = {"node": 0, "edge": 0}
        conflicts, sample = 0, {}
        for kind, table, field_name in (
            ("edge", EDGE_TABLE, "weight"),
            ("edge", EDGE_TABLE, "feedback_weight"),
            ("node", NODE_TABLE, "feedback_weight"),
        ):
            rows = f"""
                SELECT h.{kind}_id AS id, h.before AS restore, h.after AS expected FROM {WeightHistory._meta.db_table} h
                WHERE h.batch_id = %(p0)s AND h.field = %(p1)s AND h.{kind}_id IS NOT NULL
            """
            matches = "i.before IS NOT DISTINCT FROM i.expected"
            written, found, ids = _apply(
                table=table,
                field_name=field_name,
                graph_id=graph.pk,
                batch_id=new.pk,
                rows_sql=rows,
                rows_params=[target.pk, field_name],
                new_expr=f"CASE WHEN {matches} OR {'true' if force else 'false'} THEN i.restore ELSE i.before END",
                event_expr=f"CASE WHEN {matches} THEN 'rollback' ELSE 'rollback_forced' END",
                conflict_expr=f"NOT ({matches})",
                now=new.started_at,
                history=history,
            )
            counts[kind] += written
            conflicts += found
            if ids:
                sample[f"{kind}.{field_name}"] = ids
        new.details["conflict_ids"] = sample
        target.status = "rolled_back"
        target.save(update_fields=["status"])
        result = _finish(
            new,
            actor,
            started,
            node_updates=counts["node"],
            edge_updates=counts["edge"],
            conflicts=conflicts,
            audit_extra={
                "rollback_of": target.pk,
                "rolled_back_kind": target.kind,
                "forced": force,
                "conflict_ids": sample,
            },
        )
        if conflicts and not force:
            log.warning(
                "rollback left conflicts alone", extra={"batch": target.pk, "rollback": new.pk, "conflicts": conflicts}
            )
        return result
