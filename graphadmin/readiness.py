"""Whether a graph is ready: how many of its vectors are still to be written, and waiting until none is.

A large vault import (above ``VAULT_IMPORT_SYNC_EMBED_LIMIT`` texts) commits its nodes and edges at
once and leaves their vectors to the embeddings task; until that has run, a question cannot find
those notes by similarity. The graph says so (docs/import.md, "Ready"): its API answer, its overview
page, every search and context answer and the MCP tools' text carry ``vectors_pending``, the active
nodes and edges without their vector; ``manage.py import_vault`` waits until it is 0 (``wait_ready``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from graphadmin.models import OutboxTask
from graphadmin.models.sql import fetch_all, statement

POLL_SECONDS = 1.0


class NotReady(Exception):
    """The wait ended before the graph was ready: the time limit, or the embeddings task gave up."""

    def __init__(self, message: str, pending: int):
        super().__init__(message)
        self.pending = pending


# The edge type of the question-evidence edges (feedback.rules.ANSWERED; the core imports nothing of feedback,
# a test checks the two agree): question -> note, written by learning without a vector by design (they carry
# evidence, they are not triplets to find), so they are never pending.
EVIDENCE_EDGE_TYPE = "answered"
NO_TYPE = 2**63 - 1

# The active nodes and edges of each graph that have no vector yet, the evidence edges left out, and whether
# an embeddings task is still to run for the graph (its durable outbox row, graphadmin.outbox: sent by a large
# import, deleted once a worker ran it): then those vectors are being written, the graph is being built.
# Counted through the partial indexes node_vector_pending and edge_vector_pending (their predicates are these
# WHERE clauses): the edges as the two ranges of types below and above the evidence type, so a graph that has
# learned (thousands of evidence edges in that index) still costs index probes, and a ready graph two probes
# of empty ranges. The outbox is looked at only when something is pending (CASE runs one branch).
# Prepared on its connection (every context answer runs it): docs/decisions/0003-prepared-statements.md
VECTORS_PENDING = statement(
    """
    SELECT c.id, c.pending,
           CASE WHEN c.pending > 0 THEN EXISTS (
               SELECT 1 FROM {outbox_task} o
               WHERE o.name = %(task)s AND o.state = 'pending' AND o.args = jsonb_build_array(c.id)
           ) ELSE false END
    FROM (
        SELECT g.id,
               (SELECT count(*) FROM {node} n WHERE n.graph_id = g.id AND n.embedding IS NULL AND NOT n.archived)
             + (SELECT count(*) FROM {edge} e
                WHERE e.graph_id = g.id AND e.triplet_embedding IS NULL AND NOT e.archived
                  AND e.edge_type_id < coalesce(t.id, %(no_type)s))
             + (SELECT count(*) FROM {edge} e
                WHERE e.graph_id = g.id AND e.triplet_embedding IS NULL AND NOT e.archived
                  AND e.edge_type_id > coalesce(t.id, %(no_type)s)) AS pending
        FROM unnest(%(graphs)s::bigint[]) AS g(id)
        LEFT JOIN {edge_type} t ON t.graph_id = g.id AND t.name = %(evidence)s
    ) c
    """
)
EMBED_TASK = "graphadmin.embed_graph"  # graphadmin.tasks.embed_graph (which imports the vault writer: not here)


@dataclass(frozen=True)
class Readiness:
    """A graph's vectors still to write (``pending``), and whether an embeddings task is writing them
    (``building``: a large import's, until a worker has run it). Rows without a vector and no task to write
    them (created through the API without one, or a text the model finds nothing in) are pending, not building."""

    pending: int = 0
    building: bool = False


def readiness_of(graph_ids: Iterable[int]) -> dict[int, Readiness]:
    """Each graph's ``Readiness``, in one statement (a page of the graph list costs one query whatever its
    length). Named SQL: the ORM would write one COUNT per graph and table, or a GROUP BY that reads every
    row of the graphs instead of the partial indexes, and no range scan."""
    ids = sorted(set(graph_ids))
    if not ids:
        return {}
    params = {"graphs": ids, "evidence": EVIDENCE_EDGE_TYPE, "no_type": NO_TYPE, "task": EMBED_TASK}
    rows = fetch_all(VECTORS_PENDING, params, prepared=True)
    return {graph_id: Readiness(pending, building) for graph_id, pending, building in rows}


def pending_of(graph_ids: Iterable[int]) -> dict[int, int]:
    """``{graph id: vectors pending}`` for the given graphs, in one statement (``readiness_of``)."""
    return {graph_id: r.pending for graph_id, r in readiness_of(graph_ids).items()}


def readiness(graph_id: int) -> Readiness:
    """The graph's ``Readiness`` (one statement)."""
    return readiness_of([graph_id]).get(graph_id, Readiness())


def vectors_pending(graph_id: int) -> int:
    """How many of the graph's active nodes and edges have no vector yet, the question-evidence edges left out
    (0: the graph is ready)."""
    return readiness(graph_id).pending


def pending_notice(pending: int) -> str:
    """The plain words an agent reads (the MCP tools' ``notice``) while some of the graph's vectors are missing."""
    if not pending:
        return ""
    what = "note or link has" if pending == 1 else "notes and links have"
    return (
        f"This graph is not ready: {pending} {what} no vector yet, so a question cannot find them by similarity "
        "and this answer may miss them. A large import's vectors are written by a background task: ask again "
        "once vectors_pending is 0. While they are being written, reports on this session teach the graph nothing."
    )


def _task_done(task_id: str) -> bool:
    """Whether the durable task ``task_id`` has run: its outbox row goes once a worker ran it (graphadmin.outbox)."""
    state = OutboxTask.objects.filter(task_id=task_id).values_list("state", flat=True).first()
    if state == "failed":
        raise NotReady(f"The embeddings task {task_id} was given up after repeated sends (graphadmin.outbox).", 0)
    return state is None


def wait_ready(
    graph_id: int,
    *,
    timeout: float,
    task_id: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    stalled: Callable[[float], None] | None = None,
    poll: float = POLL_SECONDS,
) -> int:
    """Wait until the graph has no vector pending; return what is left (0, unless ``task_id`` ended first).

    Polls ``vectors_pending`` (outside any transaction: each poll sees what the worker committed).
    ``task_id``, the embeddings task an import sent: once it has run, what it could not embed (a text
    that gives the model nothing to embed stays without a vector) is returned instead of waited for.
    ``progress("vectors", written, total)`` after each poll; ``stalled(seconds)`` once, when nothing has
    moved for 30 s (no worker serving the 'embeddings' queue?). Raises ``NotReady`` at ``timeout`` seconds.
    """
    started = last_move = time.monotonic()
    first = pending = vectors_pending(graph_id)
    warned = False
    while True:
        if progress:
            progress("vectors", max(first - pending, 0), first)
        if pending == 0:
            return 0
        if task_id and _task_done(task_id):
            # The task has run: whatever is still without a vector is what it could not embed.
            return vectors_pending(graph_id)
        now = time.monotonic()
        if now - started > timeout:
            raise NotReady(f"{pending} vectors still pending after {timeout:.0f} s.", pending)
        if stalled and not warned and now - last_move > 30:
            stalled(now - last_move)
            warned = True
        time.sleep(poll)
        latest = vectors_pending(graph_id)
        if latest != pending:
            last_move = time.monotonic()
        pending = latest
