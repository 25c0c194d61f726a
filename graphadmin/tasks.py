"""Celery tasks of the graph core: thin, they take keys, re-fetch and call the action."""

import logging

from celery import shared_task

from graphadmin import audit, outbox
from graphadmin.models import Graph
from graphadmin.vault.apply import do_reembed, embed_pending

log = logging.getLogger(__name__)


@shared_task(name="graphadmin.embed_graph", acks_late=True)
def embed_graph(graph_id: int) -> dict:
    """Fill the missing node and triplet embeddings of a graph (after a large import). Queue: embeddings."""
    return embed_pending(graph_id)


@shared_task(name="graphadmin.reembed_graph", acks_late=True)
def reembed_graph(graph_id: int, actor: str = "task:reembed_graph") -> dict:
    """Re-embed a graph's vectors made by another model than the configured one (manage.py reembed).

    Queue: embeddings.
    """
    graph = Graph.objects.select_related("organization").get(pk=graph_id)
    return do_reembed(graph, actor=actor)


@shared_task(name="graphadmin.verify_audit_chains")
def verify_audit_chains() -> dict:
    """Verify every organization's audit chain, advance the checkpoint of each that holds and anchor its head
    outside the database (``audit.anchor_heads``: the anchor file and/or log sink).

    Logs a structured error for each broken one (its checkpoint and anchor stay where they were).
    """
    results = {}
    for slug, result in audit.anchor_heads().items():
        results[slug] = result.as_dict()
        if not result.ok:
            log.error("audit chain broken", extra={"organization": slug, **result.as_dict()})
    return results


@shared_task(name="graphadmin.sweep_outbox", ignore_result=True)
def sweep_outbox() -> dict:
    """Beat entry: send again the durable tasks not sent (broker down) or lost with their worker (``outbox.sweep``)."""
    return outbox.sweep()
