"""The vault import as an action: the graph's rows (graphadmin.vault), recorded as one UpdateBatch.

An import changes no weight, but it is recorded like every other change of the graph's learned
state: one UpdateBatch(kind='import') with the counts, so the batches page lists it beside the
feedback it precedes. That batch is feedback's model, so the action composing the core's pure plan
and row writes lives here (the core imports neither feedback nor ranking).
"""

from __future__ import annotations

import tempfile
import time
import uuid

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models.functions import Length

from graphadmin import clock
from graphadmin import outbox as task_outbox
from graphadmin.models import Graph, Node
from graphadmin.tasks import embed_graph
from graphadmin.vault import apply
from graphadmin.vault.parse import ParsedVault, ProgressFn, VaultError, group_unresolved, parse_vault, zip_extent
from graphadmin.vault.plan import ImportResult, plan_import

from . import ledger, records
from .models import VaultImport


def do_import_vault(
    graph: Graph,
    parsed: ParsedVault,
    *,
    actor,
    dry_run: bool = False,
    embed: str = "auto",
    progress: ProgressFn | None = None,
) -> ImportResult:
    """Import a parsed vault into ``graph`` as ``actor`` (a user or a label such as 'command:import_vault').

    One transaction: the nodes and edges, one UpdateBatch(kind='import') with the counts and the
    unresolved links in ``details``, and one AuditEvent 'graph.import'. ``embed``: 'sync' embeds in
    this transaction, 'task' leaves the vectors to the embeddings Celery task (enqueued on commit),
    'auto' picks 'task' when more than settings.VAULT_IMPORT_SYNC_EMBED_LIMIT texts need embedding.
    With ``dry_run`` nothing is written and the counts say what would change. Idempotent: a second
    run on an unchanged vault writes nothing but its UpdateBatch and AuditEvent (rules: graphadmin.vault.plan).
    """
    clock = time.perf_counter()
    with transaction.atomic(), apply.statements_not_prepared():
        # One import at a time per graph: the row lock queues a concurrent import behind this one. NO KEY
        # UPDATE, not UPDATE: the latter also blocks the foreign-key checks of every row inserted that
        # points at the graph (an agent's report, a context call's session and injection) for the whole
        # import (tests/feedback/test_import_beside_agents.py).
        graph = Graph.objects.select_for_update(no_key=True).get(pk=graph.pk)
        plan = plan_import(parsed, *apply.current_rows(graph))
        if dry_run:
            transaction.set_rollback(True)
            return ImportResult(
                plan.counts,
                plan.unresolved,
                list(parsed.warnings),
                dry_run=True,
                embedding="none",
                duration_ms=(time.perf_counter() - clock) * 1000,
            )
        mode = apply.embedding_mode(plan, embed)
        # The rows the import changes, as they were (its rollback restores them: feedback.records).
        touched = {
            "node": [plan.existing[k]["id"] for k in plan.changed]
            + [row["id"] for row in plan.renames.values()]
            + [row["id"] for row in plan.gone],
            "edge": [*plan.restore_edges, *plan.archive_edges],
        }
        before = {kind: records.snapshot(kind, graph.pk, ids) for kind, ids in touched.items()}
        made = apply.apply_plan(graph, plan, mode=mode, progress=progress)

        details = {
            "counts": plan.counts,
            "unresolved": plan.unresolved,
            "unresolved_by_reason": group_unresolved(plan.unresolved),
            "warnings": list(parsed.warnings),
            "embedding": mode,
            "renamed": {new_key: row["key"] for new_key, row in sorted(plan.renames.items())},
            "records": True,
        }
        # The batch through feedback.ledger, like every other batch: its row, then its counts and one AuditEvent.
        batch = ledger.start_batch(graph, "import", actor, details=details)
        for kind, ids in (("node", made["nodes"]), ("edge", made["edges"])):
            after = records.snapshot(kind, graph.pk, touched[kind])
            records.record(batch, kind, "update", before[kind], after)
            _record_created(batch, kind, graph.pk, ids)
        ledger.finish(
            batch,
            actor,
            clock,
            audit_extra={"counts": plan.counts, "unresolved": plan.unresolved[:50], "embedding": mode},
        )
        event, duration_ms = batch.audit_event, batch.duration_ms
        embed_task = ""
        if mode == "task":
            graph_id = graph.pk
            # Through the task outbox: the vectors are filled even if the broker is down now.
            embed_task = task_outbox.send_on_commit(embed_graph.name, args=[graph_id], queue="embeddings")
    return ImportResult(
        plan.counts,
        plan.unresolved,
        list(parsed.warnings),
        batch_id=batch.pk,
        audit_seq=event.seq,
        embedding=mode,
        duration_ms=duration_ms,
        embed_task=embed_task,
    )


def _record_created(batch, kind: str, graph_id: int, ids: list[int]) -> None:
    """The rows the import created, recorded run by run (bounded by count and text size, as they were written)."""
    sizes = dict.fromkeys(ids, 0)
    if kind == "node" and ids:
        sizes.update(
            Node.objects.filter(graph_id=graph_id, pk__in=ids).annotate(n=Length("text")).values_list("pk", "n")
        )
    for run in apply.chunks(ids, sizes.__getitem__):
        created = records.snapshot(kind, graph_id, run)
        records.record(batch, kind, "create", records.created(created), created)


# ---------------------------------------------------------------------------------------------
# Large imports in the background (VAULT_IMPORT_ASYNC_BYTES): a VaultImport row records the progress.


def runs_in_background(upload) -> bool:
    """Whether an uploaded zip is imported by the Celery task rather than in the request.

    Decided by what the archive unpacks to and its number of notes (its central directory: nothing
    is unpacked), never by its compressed size alone: a small zip of large, repetitive notes is a
    large import. Above any of VAULT_IMPORT_ASYNC_BYTES (the upload), VAULT_IMPORT_ASYNC_UNPACKED_BYTES
    or VAULT_IMPORT_ASYNC_NOTES it runs in the background. Not a zip: in the request, which refuses it.
    """
    if upload.size > settings.VAULT_IMPORT_ASYNC_BYTES:
        return True
    extent = zip_extent(upload)
    if extent is None:
        return False
    unpacked, notes = extent
    return unpacked > settings.VAULT_IMPORT_ASYNC_UNPACKED_BYTES or notes > settings.VAULT_IMPORT_ASYNC_NOTES


def do_queue_import(graph: Graph, upload, *, actor, dry_run: bool = False, create_missing: bool = False) -> VaultImport:
    """Record an uploaded vault as a VaultImport (state ``queued``) and enqueue its task on commit.

    The archive is stored with the row (the worker may run on another machine); the task empties it
    once the import has committed or failed. Nothing of the graph changes until the task runs ``do_import_vault``.
    """
    upload.seek(0)
    data = upload.read()
    task_id = str(uuid.uuid4())
    record = VaultImport.objects.create(
        graph=graph,
        requested_by=actor if getattr(actor, "pk", None) else None,
        dry_run=dry_run,
        create_missing=create_missing,
        filename=(getattr(upload, "name", "") or "")[:255],
        size=len(data),
        archive=data,
        task_id=task_id,
    )
    # Through the task outbox (by name: feedback.tasks imports this module; CELERY_TASK_ROUTES picks the queue):
    # a broker outage or a dead worker leaves the row, and the sweeper sends it again.
    task_outbox.send_on_commit(
        "feedback.import_vault", args=[record.pk], task_id=task_id, lease_seconds=settings.VAULT_IMPORT_TIME_LIMIT + 120
    )
    return record


def _set(record: VaultImport, **fields) -> None:
    """Write progress outside any import transaction, so the API and the dashboard see it at once."""
    for name, value in fields.items():
        setattr(record, name, value)
    VaultImport.objects.filter(pk=record.pk).update(**fields)


def _stored_archive(record: VaultImport):
    """The record's archive in a temporary file (the parse reads it entry by entry); the row's copy is dropped
    from the record, so the worker holds the archive once, on disk."""
    archive = tempfile.TemporaryFile(prefix="vault-import-")
    archive.write(VaultImport.objects.filter(pk=record.pk).values_list("archive", flat=True).get())
    record.archive = b""
    archive.seek(0)
    return archive


def run_queued_import(record: VaultImport, *, actor) -> VaultImport:
    """The task's work: parse the stored archive (progress: notes read), import it, record the outcome.

    A refused archive or any failure ends in state ``failed`` with the reason; the import's own
    transaction rolled back, so the graph is as it was. A record already finished is left alone
    (a redelivered task); one left ``parsing`` or ``importing`` by a worker that died is imported again
    from its archive (the dead worker's transaction never committed).
    """
    if record.state in ("succeeded", "failed"):
        return record
    _set(record, state="parsing", started_at=clock.now(), error="")
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        # At most every half second (and the last note): progress is for people watching, not a ledger.
        if stage == "read" and (done == total or time.monotonic() - last[0] > 0.5):
            last[0] = time.monotonic()
            _set(record, done=done, total=total)

    try:
        with _stored_archive(record) as archive:
            parsed = parse_vault(archive, progress=progress, create_missing=record.create_missing)
        # The archive stays with the row until the import has committed: a worker killed now (the OOM
        # killer, a deploy) leaves the graph as it was and the row ``importing`` with its archive, which
        # the task outbox's redelivery imports again from the start (tests/feedback/test_import_cancelled.py).
        _set(record, state="importing")
        try:
            result = do_import_vault(record.graph, parsed, actor=actor, dry_run=record.dry_run)
        finally:
            parsed.close()
    except VaultError as exc:
        _set(record, state="failed", error=str(exc), archive=b"", finished_at=clock.now())
    except SoftTimeLimitExceeded:
        message = f"Stopped at the time limit of {settings.VAULT_IMPORT_TIME_LIMIT} s; nothing was imported."
        _set(record, state="failed", error=message, archive=b"", finished_at=clock.now())
    except Exception as exc:
        _set(record, state="failed", error=f"{type(exc).__name__}: {exc}", archive=b"", finished_at=clock.now())
        raise
    else:
        body = result.as_dict()
        _set(record, state="succeeded", counts=body["counts"], result=body, archive=b"", finished_at=clock.now())
    return record
