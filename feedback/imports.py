"""The vault import as an action: the graph's rows (graphadmin.vault), recorded as one UpdateBatch.

An import changes no weight, but it is recorded like every other change of the graph's learned
state: one UpdateBatch(kind='import') with the counts, so the batches page lists it beside the
feedback it precedes. That batch is feedback's model, so the action composing the core's pure plan
and row writes lives here (the core imports neither feedback nor ranking).
"""

from __future__ import annotations

import time

from django.db import transaction

from graphadmin.models import Graph
from graphadmin.tasks import embed_graph
from graphadmin.vault import apply
from graphadmin.vault.parse import ParsedVault, ProgressFn, group_unresolved
from graphadmin.vault.plan import ImportResult, plan_import

from . import ledger


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
    with transaction.atomic():
        # One import at a time per graph: the row lock queues a concurrent import behind this one.
        graph = Graph.objects.select_for_update().get(pk=graph.pk)
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
        apply.apply_plan(graph, plan, mode=mode, progress=progress)

        details = {
            "counts": plan.counts,
            "unresolved": plan.unresolved,
            "unresolved_by_reason": group_unresolved(plan.unresolved),
            "warnings": list(parsed.warnings),
            "embedding": mode,
            "renamed": {new_key: row["key"] for new_key, row in sorted(plan.renames.items())},
        }
        # The batch through feedback.ledger, like every other batch: its row, then its counts and one AuditEvent.
        batch = ledger.start_batch(graph, "import", actor, details=details)
        ledger.finish(
            batch,
            actor,
            clock,
            audit_extra={"counts": plan.counts, "unresolved": plan.unresolved[:50], "embedding": mode},
        )
        event, duration_ms = batch.audit_event, batch.duration_ms
        if mode == "task":
            graph_id = graph.pk
            transaction.on_commit(lambda: embed_graph.apply_async(args=[graph_id], queue="embeddings"))
    return ImportResult(
        plan.counts,
        plan.unresolved,
        list(parsed.warnings),
        batch_id=batch.pk,
        audit_seq=event.seq,
        embedding=mode,
        duration_ms=duration_ms,
    )
