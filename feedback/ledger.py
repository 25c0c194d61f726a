"""The ledger of the write path: update batches, their history and audit event, chunked runs.

Every feedback write is one ``UpdateBatch`` (started here, with its trigger and idempotency key),
its history (written by the write's own statement in ``queries.weights``, from the parameters
``history_params`` gives) and one ``AuditEvent`` (``finish``). The bulk writes over the edges of a
graph (decay, normalize) run as chunks of fixed id ranges, each its own short transaction and batch,
retried when PostgreSQL picks it as a deadlock victim (``run_chunks``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field

from django.db import OperationalError, connection, transaction
from psycopg import sql
from psycopg.errors import DeadlockDetected, SerializationFailure
from psycopg.types.json import Jsonb

from graphadmin import audit, clock
from graphadmin.models import Graph
from graphadmin.models.sql import execute, fetch, fetch_all
from graphadmin.runtime.errorpages import short_of_resources

from . import queries
from .models import UpdateBatch
from .queries import weights

log = logging.getLogger(__name__)

DECAY_CHUNK = 50000  # edge ids per decay/normalize transaction: each chunk holds its row locks briefly
DEADLOCK_RETRIES = 3
RETRY_BACKOFF_S = 0.05  # first pause before a retry; doubled each time (0.05, 0.1, 0.2 s)
AUDIT_ACTIONS = {
    "reinforce": "graph.feedback",
    "outcome": "graph.feedback",
    "decay": "graph.decay",
    "normalize": "graph.normalize",
    "manual": "graph.weights.set",
    "link": "graph.links.learn",
    "rollback": "batch.rollback",
    "import": "graph.import",
    "memory": "graph.memory",
}


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
    links: Result | None = None  # an accepted outcome's co_used links (``actions.do_apply_report``)

    def as_dict(self) -> dict:
        out = asdict(self)
        if self.links is None:
            del out["links"]
        return out


def fall_through(status: str, message: str, **context) -> Result:
    """A clean no-op: a structured warning in the log, a clear status for the caller, never an exception."""
    log.warning(message, extra={"feedback_status": status, **context})
    return Result(status, details={"reason": message, **context})


def elapsed_ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading), rounded to the microsecond."""
    return round((time.perf_counter() - started) * 1000.0, 3)


# --------------------------------------------------------------------------------------------------
# Batches


def new_batch(graph: Graph, kind: str, actor, *, session=None, key=None, details=None, **extra) -> UpdateBatch:
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


def batch_params(batch: UpdateBatch) -> dict:
    """The parameters ``%(b_<column>)s`` of a batch row (``weights.INSERT_BATCH_ONCE``, ``weights.OUTCOME_WRITE``)."""
    return {
        f"b_{f.column}": f.get_db_prep_save(getattr(batch, f.attname), connection)
        for f in UpdateBatch._meta.concrete_fields
    }


def start_batch(graph: Graph, kind: str, actor, *, session=None, key=None, details=None, **extra) -> UpdateBatch | None:
    """Insert the batch row; None when ``key`` is already taken (a concurrent or earlier run)."""
    batch = new_batch(graph, kind, actor, session=session, key=key, details=details, **extra)
    if not key:
        batch.save(force_insert=True)
        return batch
    row = fetch(weights.INSERT_BATCH_ONCE, batch_params(batch))
    if row is None:
        return None
    batch.pk = row[0]
    batch._state.adding, batch._state.db = False, connection.alias
    return batch


def existing(batch: UpdateBatch, status: str = "duplicate") -> Result:
    """The Result of a batch already written (a repeated report, a retried task)."""
    return Result(
        status, batch.pk, batch.node_updates, batch.edge_updates, 0, batch.duration_ms, batch.conflicts, batch.details
    )


def history_params(batch: UpdateBatch) -> dict:
    """The parameters every history-writing statement of ``queries.weights`` takes for its batch."""
    return {
        "batch": batch.pk,
        "graph": batch.graph_id,
        "now": batch.started_at,
        "block_span": queries.BLOCK_SPAN,
        "conflict_sample": weights.CONFLICT_SAMPLE,
    }


def finish(
    batch: UpdateBatch, actor, started: float, *, node_updates=0, edge_updates=0, conflicts=0, audit_extra=None
) -> Result:
    """Write the batch's counts and timings and its one AuditEvent; return the Result."""
    batch.node_updates, batch.edge_updates, batch.conflicts = node_updates, edge_updates, conflicts
    batch.finished_at = clock.now()
    batch.duration_ms = elapsed_ms(started)
    # By graph and id (not save()): one shard's row when the tables are distributed by graph (docs/scaling.md).
    execute(
        weights.FINISH_BATCH,
        {
            "graph": batch.graph_id,
            "id": batch.pk,
            "node_updates": node_updates,
            "edge_updates": edge_updates,
            "conflicts": conflicts,
            "details": Jsonb(batch.details),
            "finished_at": batch.finished_at,
            "duration_ms": batch.duration_ms,
        },
    )
    return audit_batch(batch, actor, audit_extra)


def check_batches_audited(organization_id: int) -> str:
    """The reason the organization's batches break the rule "one audit event per UpdateBatch", or "" when they
    keep it (``settings.AUDIT_LEDGER_CHECKS``: a full ``graphadmin.audit.verify`` runs it)."""
    rows = fetch_all(
        weights.BATCHES_NOT_AUDITED_ONCE,
        {"organization": organization_id, "actions": sorted(set(AUDIT_ACTIONS.values())), "limit": 10},
    )
    if not rows:
        return ""
    listed = ", ".join(f"batch {pk} ({kind}): {events}" for pk, kind, events in rows)
    return f"update batches without exactly one audit event: {listed}"


def audit_batch(batch: UpdateBatch, actor, audit_extra=None) -> Result:
    """Append the finished batch's one AuditEvent; return the Result."""
    payload = {
        "batch": batch.pk,
        "kind": batch.kind,
        "node_updates": batch.node_updates,
        "edge_updates": batch.edge_updates,
        "conflicts": batch.conflicts,
        **(audit_extra or {}),
    }
    # Kept on the row object for callers that report the event (the vault import's audit_seq).
    batch.audit_event = audit.append(
        batch.graph.organization_id,
        actor,
        AUDIT_ACTIONS[batch.kind],
        payload,
        scope={"graph": batch.graph_id, "graph_slug": batch.graph.slug},
    )
    return existing(batch, "applied")


# --------------------------------------------------------------------------------------------------
# Chunked runs over a graph's edge ids


def run_chunks(
    graph: Graph,
    kind: str,
    actor,
    *,
    chunks: list[int],
    chunk_size: int,
    started: float,
    key: str,
    statement: sql.Composed,
    params: dict,
    details: dict,
    audit_extra: dict,
    summary: dict,
) -> Result:
    """Run ``statement`` (``weights.DECAY_RANGE``, ``weights.NORMALIZE_RANGE``) over each id range of
    the graph's live edges, each range its own transaction and batch.

    The ranges are fixed (``chunks``: the k of ``[k * chunk_size, (k + 1) * chunk_size)`` from
    ``weights.chunk_ranges``), so
    they do not depend on what changed: chunk ``k``'s idempotency key is ``<key>:<k>``, and a second
    run with the same key skips every chunk already applied. Row locks are held for one chunk only;
    a killed run leaves whole chunk batches and no partial one. ``summary`` collects the batch ids
    (``batches``) and the skipped chunks; the Result sums the run: applied, duplicate (every chunk
    done before) or ``nothing_to_change``; its duration counts from ``started``.
    """
    edges = 0
    for k in chunks:
        lo, hi = k * chunk_size, (k + 1) * chunk_size
        edges += _chunk(
            graph,
            kind,
            actor,
            key=f"{key}:{k}"[:200],
            params={**params, "lo": lo, "hi": hi},
            statement=statement,
            details={**details, "id_range": [lo, hi]},
            audit_extra={**audit_extra, "id_range": [lo, hi]},
            summary=summary,
        )
    status = "applied" if summary["batches"] else ("duplicate" if summary["skipped_chunks"] else "nothing_to_change")
    batch_id = summary["batches"][0] if len(summary["batches"]) == 1 else None
    return Result(status, batch_id, 0, edges, 0, elapsed_ms(started), details=summary)


def under_pressure(exc: BaseException) -> bool:
    """Whether ``exc`` is the machine short of a resource, not a fault of the write itself: PostgreSQL's
    class 53 (insufficient resources: ``disk_full`` 53100, ``out_of_memory`` 53200, too many connections,
    a configuration limit) or this process's own ``MemoryError``. Such a write is worth trying again, as
    often as it takes, once the pressure ends (``feedback.outbox``: never counted towards a report's
    last attempt)."""
    return isinstance(exc, MemoryError) or bool(short_of_resources(exc))


def retry_transient(call, *, what: str, retries: int = DEADLOCK_RETRIES, backoff: float = RETRY_BACKOFF_S):
    """``call()``, run again (at most ``retries`` times, pausing ``backoff`` seconds, doubled each
    time) when PostgreSQL chose its transaction as a deadlock victim or refused it a serializable
    snapshot. Every writer locks in one order (edges by id, then nodes, ``FOR NO KEY UPDATE``), so
    this is a backstop, not an expected path: it is logged. Safe because the failed transaction
    rolled back whole (or to its savepoint, inside a caller's transaction) and each write carries
    its idempotency key.
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except OperationalError as exc:
            transient = isinstance(exc.__cause__, DeadlockDetected | SerializationFailure)
            if not transient or attempt == retries:
                raise
            log.warning(
                "transaction was a deadlock victim; retrying",
                extra={"what": what, "attempt": attempt + 1, "error": type(exc.__cause__).__name__},
            )
            time.sleep(backoff * 2**attempt)
    raise AssertionError("unreachable")


def _chunk(graph, kind, actor, *, key, params, statement, details, audit_extra, summary) -> int:
    """One chunk, retried if PostgreSQL chose it as a deadlock victim (``retry_transient``).
    Returns the edges written."""
    return retry_transient(
        lambda: _chunk_once(
            graph,
            kind,
            actor,
            key=key,
            params=params,
            statement=statement,
            details=details,
            audit_extra=audit_extra,
            summary=summary,
        ),
        what=key,
    )


def _chunk_once(graph, kind, actor, *, key, params, statement, details, audit_extra, summary) -> int:
    """One chunk's transaction: its batch, the statement, its audit event.

    The chunk commits asynchronously (``synchronous_commit`` off for this transaction, never for a
    caller's own): a crash right after can lose the last chunks, never part of one, and the next run
    of the period re-applies them (their keys were lost with them). A chunk whose key already has a
    batch is skipped; a range that changes nothing leaves no batch (nor audit event) behind.
    """
    chunk_started = time.perf_counter()
    async_commit = not connection.in_atomic_block
    with transaction.atomic():
        fetch(weights.SESSION_SETTINGS, {"async_commit": async_commit})
        batch = start_batch(graph, kind, actor, key=key, details=details)
        if batch is None:
            summary["skipped_chunks"] += 1
            return 0
        (written,) = fetch(statement, {**params, **history_params(batch)})
        if written == 0:
            # Nothing in this range: leave no empty batch (and no audit noise) behind.
            transaction.set_rollback(True)
            return 0
        finish(batch, actor, chunk_started, edge_updates=written, audit_extra=audit_extra)
    summary["batches"].append(batch.pk)
    return written
