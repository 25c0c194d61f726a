"""Apply a vault import's plan: write the nodes, edge types and edges (set-based), with their embeddings.

``apply_plan(graph, plan, embed=...)`` writes what ``graphadmin.vault.plan.plan_import`` decided, inside
the caller's transaction; the import action (``feedback.imports.do_import_vault``) holds the graph's
row lock, records the import's batch and audit event and enqueues the embeddings task. Also here:
filling missing embeddings after a large import (``embed_pending``) and re-embedding a graph with
another model (``do_reembed``).

All writes are set-based (bulk_create, bulk_update, UPDATE ... WHERE id IN), never one query per row.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from graphadmin import audit
from graphadmin.embeddings import get_embedder, stored_models
from graphadmin.models import Edge, EdgeType, Graph, Node

from .parse import ProgressFn, body_size
from .plan import ImportPlan, node_embedding_text, triplet_text

BULK = 500
TEXT_CHUNK_BYTES = 16 * 1024 * 1024  # note text held at a time while writing nodes


def current_rows(graph: Graph) -> tuple[list[dict], list[dict], dict[str, int]]:
    """The graph's nodes, edges and edge types as ``plan_import`` reads them (archived rows too)."""
    nodes = list(
        Node.objects.filter(graph=graph).values(
            "id", "key", "title", "kind", "source", "content_hash", "archived", "tags", "aliases"
        )
    )
    edges = list(Edge.objects.filter(graph=graph).values("id", "source_id", "target_id", "edge_type_id", "archived"))
    return nodes, edges, dict(EdgeType.objects.filter(graph=graph).values_list("name", "id"))


def embedding_mode(plan: ImportPlan, embed: str) -> str:
    """'sync' or 'task': 'auto' is 'task' when more than settings.VAULT_IMPORT_SYNC_EMBED_LIMIT texts need embedding."""
    if embed == "auto":
        return "task" if plan.to_embed > settings.VAULT_IMPORT_SYNC_EMBED_LIMIT else "sync"
    return embed


class _Embedder:
    """Vectors for texts in EMBED_BATCH_SIZE batches ('sync'), or None for each ('task': the task fills them)."""

    def __init__(self, mode: str, to_embed: int, progress: ProgressFn | None):
        self.embedder = get_embedder() if mode == "sync" else None
        self.model = self.embedder.model_name if self.embedder else ""
        self.to_embed, self.progress, self.done = to_embed, progress, 0

    def fill(self, objs: list, field: str, texts: list[str]) -> None:
        """Set ``field`` and ``embedding_model`` of each of ``objs`` from its text in ``texts``."""
        for obj, vec in zip(objs, self.vectors(texts), strict=True):
            setattr(obj, field, vec)
            obj.embedding_model = self.model if vec is not None else ""

    def vectors(self, texts: list[str]) -> list:
        if self.embedder is None:
            return [None] * len(texts)
        out, size = [], settings.EMBED_BATCH_SIZE
        for i in range(0, len(texts), size):
            out.extend(self.embedder.embed(texts[i : i + size]))
            self.done += len(texts[i : i + size])
            if self.progress:
                self.progress("embed", self.done, self.to_embed)
        return out


def chunks(items: list, size_of) -> Iterator[list]:
    """``items`` in runs of at most BULK items and TEXT_CHUNK_BYTES of text (one item at least): the rows of
    one run are all the note texts in memory at a time."""
    run, size = [], 0
    for item in items:
        item_size = size_of(item)
        if run and (len(run) >= BULK or size + item_size > TEXT_CHUNK_BYTES):
            yield run
            run, size = [], 0
        run.append(item)
        size += item_size
    if run:
        yield run


def apply_plan(graph: Graph, plan: ImportPlan, *, mode: str, progress: ProgressFn | None = None) -> dict:
    """Write ``plan`` into ``graph`` in the caller's transaction; ``mode`` 'sync' embeds here, 'task' leaves NULLs.

    The nodes are written in runs bounded by count and text size (their texts read from the parse's spool
    run by run). Returns the ids of the nodes and edges it created (``{"nodes": [...], "edges": [...]}``)."""
    embedder = _Embedder(mode, plan.to_embed, progress)
    now = datetime.now(UTC)
    created = _create_nodes(graph, plan, embedder)
    _update_nodes(plan, embedder, now)
    if plan.gone:
        Node.objects.filter(graph=graph, id__in=[row["id"] for row in plan.gone]).update(archived=True, updated_at=now)
    edges = _write_edges(graph, plan, created, embedder, now)
    return {"nodes": [pk for pk, _title in created.values()], "edges": edges}


@contextmanager
def statements_not_prepared() -> Iterator[None]:
    """Within the block (an import's transaction: ``feedback.imports.do_import_vault``), psycopg neither
    prepares nor counts this connection's statements.

    To choose what to prepare, psycopg keeps the text of each statement it counts (its last 100). A run of
    new nodes, and the import's record of them, is one INSERT with up to TEXT_CHUNK_BYTES of note text bound
    into it (Django binds on the client), a new statement each time: a vault's whole text stayed in that
    count, and a 480 MiB import passed 877 MB of memory and kept growing (docs/resilience.md). The import's
    statements run once each; nothing is lost by not preparing them."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.prepare_threshold
    raw.prepare_threshold = None
    try:
        yield
    finally:
        raw.prepare_threshold = before


def _create_nodes(graph: Graph, plan: ImportPlan, embedder: _Embedder) -> dict[str, tuple[int, str]]:
    """The plan's new nodes, run by run; returns key -> (id, title) of each."""
    desired, created = plan.desired, {}
    for keys in chunks(plan.new_keys, lambda k: body_size(desired[k].body)):
        objs = [
            Node(
                graph=graph,
                key=k,
                kind=desired[k].kind,
                title=desired[k].title,
                text=desired[k].text,
                source=desired[k].source,
                aliases=desired[k].aliases,
                tags=desired[k].tags,
                content_hash=desired[k].content_hash,
            )
            for k in keys
        ]
        embedder.fill(objs, "embedding", [node_embedding_text(o.title, o.text) for o in objs])
        Node.objects.bulk_create(objs, batch_size=BULK)
        created.update({o.key: (o.pk, o.title) for o in objs})
    return created


NODE_UPDATE_FIELDS = (
    "key",
    "kind",
    "title",
    "text",
    "source",
    "aliases",
    "tags",
    "content_hash",
    "embedding",
    "embedding_model",
    "archived",
    "updated_at",
)


def _update_nodes(plan: ImportPlan, embedder: _Embedder, now: datetime) -> None:
    """The changed and renamed nodes (re-embedded), run by run; then the metadata-only changes (not re-embedded)."""
    desired, existing = plan.desired, plan.existing
    rows = [(existing[key]["id"], desired[key]) for key in plan.changed if key not in plan.meta_only]
    rows += [(row["id"], desired[new_key]) for new_key, row in plan.renames.items()]
    for run in chunks(rows, lambda row: body_size(row[1].body)):
        objs = [
            Node(
                id=pk,
                key=d.key,
                kind=d.kind,
                title=d.title,
                text=d.text,
                source=d.source,
                aliases=d.aliases,
                tags=d.tags,
                content_hash=d.content_hash,
                archived=False,
                updated_at=now,
            )
            for pk, d in run
        ]
        embedder.fill(objs, "embedding", [node_embedding_text(o.title, o.text) for o in objs])
        Node.objects.bulk_update(objs, NODE_UPDATE_FIELDS, batch_size=BULK)
    if plan.meta_only:
        Node.objects.bulk_update(
            [
                Node(
                    id=existing[k]["id"],
                    kind=desired[k].kind,
                    source=desired[k].source,
                    aliases=desired[k].aliases,
                    tags=desired[k].tags,
                    updated_at=now,
                )
                for k in sorted(plan.meta_only)
            ],
            ["kind", "source", "aliases", "tags", "updated_at"],
            batch_size=BULK,
        )


def _write_edges(
    graph: Graph, plan: ImportPlan, created: dict[str, tuple[int, str]], embedder: _Embedder, now: datetime
) -> list[int]:
    """The new edge types and edges (embedded), the restored and archived edges, and the edges whose triplet
    text changed with an end's title (re-embedded); returns the ids of the edges created."""
    type_ids = dict(plan.type_ids)
    if plan.new_types:
        EdgeType.objects.bulk_create(
            [
                EdgeType(graph=graph, name=n, priority=0.0, description="Created by a vault import.")
                for n in plan.new_types
            ],
            ignore_conflicts=True,
        )
        type_ids = dict(EdgeType.objects.filter(graph=graph).values_list("name", "id"))
    node_id = {key: pk for pk, key in plan.key_after.items()}
    title_after = dict(plan.title_after)
    for key, (pk, title) in created.items():
        node_id[key], title_after[pk] = pk, title
    edge_objs = [
        Edge(graph=graph, source_id=node_id[s], target_id=node_id[t], edge_type_id=type_ids[n])
        for s, t, n in plan.create_edges
    ]
    texts = [
        triplet_text(title_after[e.source_id], n, title_after[e.target_id])
        for e, (_s, _t, n) in zip(edge_objs, plan.create_edges, strict=True)
    ]
    embedder.fill(edge_objs, "triplet_embedding", texts)
    Edge.objects.bulk_create(edge_objs, batch_size=BULK)
    if plan.restore_edges:
        Edge.objects.filter(graph=graph, id__in=plan.restore_edges).update(archived=False, updated_at=now)
    if plan.archive_edges:
        Edge.objects.filter(graph=graph, id__in=plan.archive_edges).update(archived=True, updated_at=now)
    if plan.retitle_edges:
        rows = list(
            Edge.objects.filter(graph=graph, id__in=plan.retitle_edges).values_list(
                "id", "source_id", "target_id", "edge_type__name"
            )
        )
        objs = [Edge(id=i, updated_at=now) for i, _s, _t, _n in rows]
        embedder.fill(
            objs, "triplet_embedding", [triplet_text(title_after[s], n, title_after[t]) for _i, s, t, n in rows]
        )
        Edge.objects.bulk_update(objs, ["triplet_embedding", "embedding_model", "updated_at"], batch_size=BULK)
    return [o.pk for o in edge_objs]


def embed_pending(graph_id: int, progress: ProgressFn | None = None) -> dict:
    """Fill every missing embedding of a graph's active nodes and edges, in batches; returns the counts.

    What the embeddings task runs after a large import. Idempotent: rows that already have a vector
    are not touched, and each batch is written in one statement. A text that gives the embedder
    nothing to embed stays NULL (and is tried again by the next run: cheap, it has no tokens).
    """
    embedder = get_embedder()
    missing = Q(archived=False)
    return {
        "nodes": _embed_rows(
            Node,
            "embedding",
            ("title", "text"),
            node_embedding_text,
            graph_id,
            embedder,
            missing & Q(embedding__isnull=True),
            progress,
        ),
        "edges": _embed_rows(
            Edge,
            "triplet_embedding",
            ("source__title", "edge_type__name", "target__title"),
            triplet_text,
            graph_id,
            embedder,
            missing & Q(triplet_embedding__isnull=True),
        ),
    }


def _stale(model_name: str) -> Q:
    # A vector of a named model other than ``model_name``. Rows without a vector are embed_pending's;
    # a vector a caller sent without naming its model ('') is the caller's, and left alone.
    return Q(embedding_model__gt="") & ~Q(embedding_model=model_name)


def stale_rows(graph_id: int, model_name: str) -> dict:
    """How many of a graph's nodes and edges (archived too) have a vector of another model than ``model_name``."""
    stale = _stale(model_name)
    return {
        "nodes": Node.objects.filter(stale, graph_id=graph_id).count(),
        "edges": Edge.objects.filter(stale, graph_id=graph_id).count(),
    }


def do_reembed(graph: Graph, *, actor, progress: ProgressFn | None = None) -> dict:
    """Re-embed every node and edge of ``graph`` (archived ones too) whose vector was made by another model.

    Batches of EMBED_BATCH_SIZE, one transaction each, so a large graph never holds one long
    transaction; until the last batch the graph has vectors of two models and retrieval refuses it
    (409) rather than compare them. Idempotent: a second run finds nothing to do. Rows whose text
    gives the model nothing to embed end with no vector and no model. Rows without a vector
    (embed_pending fills them) and vectors a caller sent without naming a model are left alone.
    Audited as ``graph.reembed``.
    """
    embedder = get_embedder()
    stale = _stale(embedder.model_name)
    started = time.perf_counter()
    before = stored_models(graph.pk)
    total = sum(stale_rows(graph.pk, embedder.model_name).values())
    nodes = _embed_rows(
        Node,
        "embedding",
        ("title", "text"),
        node_embedding_text,
        graph.pk,
        embedder,
        stale,
        progress and (lambda phase, done, _n: progress(phase, done, total)),
    )
    edges = _embed_rows(
        Edge,
        "triplet_embedding",
        ("source__title", "edge_type__name", "target__title"),
        triplet_text,
        graph.pk,
        embedder,
        stale,
        progress and (lambda phase, done, _n: progress(phase, nodes + done, total)),
    )
    counts = {"nodes": nodes, "edges": edges}
    payload = {
        "model": embedder.model_name,
        "models_before": before,
        **counts,
        "duration_ms": round((time.perf_counter() - started) * 1000, 1),
    }
    with transaction.atomic():
        audit.append(
            graph.organization_id, actor, "graph.reembed", payload, scope={"graph": graph.pk, "graph_slug": graph.slug}
        )
    return payload


def _embed_rows(
    model, field: str, columns: tuple, text_of, graph_id: int, embedder, where: Q, progress: ProgressFn | None = None
) -> int:
    """Embed the rows of ``model`` in the graph matching ``where``, EMBED_BATCH_SIZE per transaction.

    Each row gets its vector and the embedder's model name, or NULL and '' when its text has
    nothing to embed. Rows are re-checked against ``where`` in each batch (another writer may have
    embedded them meanwhile).
    """
    ids = list(model.objects.filter(where, graph_id=graph_id).order_by("id").values_list("id", flat=True))
    done, size = 0, settings.EMBED_BATCH_SIZE
    for i in range(0, len(ids), size):
        with transaction.atomic():
            rows = list(
                model.objects.filter(where, graph_id=graph_id, id__in=ids[i : i + size]).values_list("id", *columns)
            )
            vecs = embedder.embed([text_of(*row[1:]) for row in rows])
            model.objects.bulk_update(
                [
                    model(id=row[0], **{field: v, "embedding_model": embedder.model_name if v is not None else ""})
                    for row, v in zip(rows, vecs, strict=True)
                ],
                [field, "embedding_model"],
            )
        done += len(rows)
        if progress:
            progress("embed", done, len(ids))
    return done
