"""Write a parsed vault into a graph: plan the difference, then apply it in one transaction.

``import_vault(graph, parsed, actor)`` is the action. It is idempotent: a second run on an unchanged
vault writes nothing but its UpdateBatch and AuditEvent. Rules (docs/import.md):

- a note is matched to its node by key (vault path without .md); a note under a new key whose
  content hash equals that of a node whose file disappeared is that node, renamed;
- changed notes are updated and re-embedded (when the file and title are the same, e.g. only the
  tags a newer parser reads changed, without re-embedding); nodes whose file disappeared are archived, never
  deleted; edges no longer in the vault are archived; an archived node or edge that comes back is
  restored with its learned weights;
- the import never changes a weight: new edges start at the model defaults and existing edges
  keep theirs, so it writes no WeightChange;
- only nodes the importer owns (source ``vault:...``) are archived or lose edges; nodes made
  through the API are left alone.

All writes are set-based (bulk_create, bulk_update, UPDATE ... WHERE id IN), never one query per row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Q

from graphadmin import audit
from graphadmin.embeddings import get_embedder, stored_models
from graphadmin.models import Edge, EdgeType, Graph, Node

from .parse import ParsedVault, ProgressFn, group_unresolved

SOURCE_PREFIX = "vault:"
MISSING_PREFIX = "vault-missing:"
BULK = 500
EMBED_TEXT_CHARS = 8000


def node_embedding_text(title: str, text: str) -> str:
    """What a node's embedding is computed from: its title, then its text (bounded)."""
    return f"{title}\n\n{text}"[:EMBED_TEXT_CHARS]


def triplet_text(source_title: str, edge_type: str, target_title: str) -> str:
    """What an edge's triplet embedding is computed from: 'source -> type -> target'."""
    return f"{source_title} -> {edge_type} -> {target_title}"


def _owned(source: str) -> bool:
    return source.startswith(SOURCE_PREFIX) or source.startswith(MISSING_PREFIX)


@dataclass
class ImportResult:
    """What an import did (or, with dry_run, would do): counts, unresolved links (also grouped by reason), warnings."""

    counts: dict
    unresolved: list[dict]
    warnings: list[str]
    dry_run: bool = False
    batch_id: int | None = None
    audit_seq: int | None = None
    embedding: str = "sync"  # "sync", "task" (enqueued on commit) or "none" (dry run)
    duration_ms: float = 0.0

    def as_dict(self) -> dict:
        return {
            "dry_run": self.dry_run,
            "batch": self.batch_id,
            "audit_seq": self.audit_seq,
            "embedding": self.embedding,
            "duration_ms": round(self.duration_ms, 1),
            "counts": self.counts,
            "unresolved": self.unresolved,
            "unresolved_by_reason": group_unresolved(self.unresolved),
            "warnings": self.warnings,
        }


@dataclass
class _Desired:
    key: str
    title: str
    kind: str
    text: str
    source: str
    aliases: list
    tags: list
    content_hash: str


def _desired_nodes(parsed: ParsedVault) -> dict[str, _Desired]:
    desired = {
        key: _Desired(key, n.title, n.kind, n.text, SOURCE_PREFIX + n.path, n.aliases, n.tags, n.content_hash)
        for key, n in parsed.notes.items()
    }
    for key, title in parsed.missing.items():
        if key not in desired:
            desired[key] = _Desired(key, title, "missing", "", MISSING_PREFIX + key, [], [], "")
    return desired


def import_vault(
    graph: Graph,
    parsed: ParsedVault,
    actor,
    *,
    dry_run: bool = False,
    embed: str = "auto",
    progress: ProgressFn | None = None,
) -> ImportResult:
    """Import a parsed vault into ``graph`` as ``actor`` (a user or a label such as 'command:import_vault').

    One transaction: the nodes and edges, one UpdateBatch(kind='import') with the counts and the
    unresolved links in ``details``, and one AuditEvent 'graph.import'. ``embed``: 'sync' embeds in
    this transaction, 'task' leaves the vectors to the embeddings Celery task (enqueued on commit),
    'auto' picks 'task' when more than settings.VAULT_IMPORT_SYNC_EMBED_LIMIT texts need embedding.
    With ``dry_run`` nothing is written and the counts say what would change.
    """
    started = datetime.now(UTC)
    clock = time.perf_counter()
    with transaction.atomic():
        # One import at a time per graph: the row lock queues a concurrent import behind this one.
        graph = Graph.objects.select_for_update().get(pk=graph.pk)
        result = _import(graph, parsed, actor, dry_run, embed, progress, started, clock)
        if dry_run:
            transaction.set_rollback(True)
    return result


def _import(graph, parsed, actor, dry_run, embed, progress, started, clock) -> ImportResult:
    desired = _desired_nodes(parsed)
    skipped = set(parsed.skipped)
    existing = {
        row["key"]: row
        for row in Node.objects.filter(graph=graph).values(
            "id", "key", "title", "kind", "source", "content_hash", "archived", "tags", "aliases"
        )
    }

    # --- Nodes: created, renamed, updated, archived, unchanged.
    new_keys = [k for k in desired if k not in existing]
    gone = [
        row
        for key, row in existing.items()
        if key not in desired and key not in skipped and not row["archived"] and _owned(row["source"])
    ]
    renames: dict[str, dict] = {}  # new key -> existing row
    by_hash: dict[str, list[str]] = {}
    for key in sorted(new_keys):
        if desired[key].content_hash:
            by_hash.setdefault(desired[key].content_hash, []).append(key)
    for row in sorted(gone, key=lambda r: r["key"]):
        candidates = by_hash.get(row["content_hash"]) if row["content_hash"] else None
        if candidates:
            renames[candidates.pop(0)] = row
    renamed_ids = {row["id"] for row in renames.values()}
    gone = [row for row in gone if row["id"] not in renamed_ids]
    new_keys = [k for k in new_keys if k not in renames]
    changed = [
        key
        for key, d in desired.items()
        if key in existing
        and (
            existing[key]["archived"]
            or existing[key]["content_hash"] != d.content_hash
            or existing[key]["title"] != d.title
            or existing[key]["kind"] != d.kind
            or existing[key]["source"] != d.source
            or existing[key]["tags"] != d.tags
            or existing[key]["aliases"] != d.aliases
        )
    ]
    # Same file, same title: the text and so the embedding are the same. What changed is what the
    # embedding does not read (tags or aliases read by a newer parser, such as body tags; the kind;
    # the source): the row is updated without a new vector.
    meta_only = {
        key
        for key in changed
        if not existing[key]["archived"]
        and existing[key]["content_hash"] == desired[key].content_hash
        and existing[key]["title"] == desired[key].title
    }
    unchanged_nodes = len(desired) - len(new_keys) - len(renames) - len(changed)

    # --- Edges, planned in key space (valid before new nodes have ids).
    key_after = {row["id"]: row["key"] for row in existing.values()}
    for new_key, row in renames.items():
        key_after[row["id"]] = new_key
    title_after = {row["id"]: row["title"] for row in existing.values()}
    for key in changed:
        title_after[existing[key]["id"]] = desired[key].title
    for new_key, row in renames.items():
        title_after[row["id"]] = desired[new_key].title
    retitled_ids = {existing[k]["id"] for k in changed if existing[k]["title"] != desired[k].title}
    retitled_ids |= {row["id"] for k, row in renames.items() if row["title"] != desired[k].title}
    archived_now = {row["id"] for row in gone}
    owned_sources = (
        {row["id"] for key, row in existing.items() if _owned(row["source"]) and key not in skipped}
        | renamed_ids
        | {existing[k]["id"] for k in changed}
    )

    type_ids = dict(EdgeType.objects.filter(graph=graph).values_list("name", "id"))
    type_names = {v: k for k, v in type_ids.items()}
    new_types = sorted({link.edge_type for link in parsed.links} - set(type_ids))

    desired_edges = {(link.source, link.target, link.edge_type) for link in parsed.links}
    existing_edges = {}
    for row in Edge.objects.filter(graph=graph).values("id", "source_id", "target_id", "edge_type_id", "archived"):
        triplet = (key_after[row["source_id"]], key_after[row["target_id"]], type_names[row["edge_type_id"]])
        existing_edges[triplet] = row
    create_edges = sorted(desired_edges - set(existing_edges))
    restore_edges = [
        existing_edges[t]["id"] for t in desired_edges if t in existing_edges and existing_edges[t]["archived"]
    ]
    archive_edges = [
        row["id"]
        for t, row in existing_edges.items()
        if not row["archived"]
        and t not in desired_edges
        and (row["source_id"] in owned_sources or row["source_id"] in archived_now or row["target_id"] in archived_now)
    ]
    archive_edge_set = set(archive_edges)
    retitle_edges = [
        row["id"]
        for t, row in existing_edges.items()
        if t in desired_edges
        and row["id"] not in archive_edge_set
        and (row["source_id"] in retitled_ids or row["target_id"] in retitled_ids)
    ]
    unchanged_edges = sum(1 for t, row in existing_edges.items() if t in desired_edges and not row["archived"])

    counts = {
        "notes": len(parsed.notes),
        "nodes_created": len(new_keys),
        "nodes_updated": len(changed),
        "nodes_renamed": len(renames),
        "nodes_archived": len(gone),
        "nodes_unchanged": unchanged_nodes,
        "placeholders": len([k for k in parsed.missing if k not in parsed.notes]),
        "edges_created": len(create_edges),
        "edges_restored": len(restore_edges),
        "edges_archived": len(archive_edges),
        "edges_unchanged": unchanged_edges,
        "edge_types_created": len(new_types),
        "unresolved_links": len(parsed.unresolved),
        "attachment_links": parsed.attachment_links,
        "files_skipped": len(parsed.skipped),
        "warnings": len(parsed.warnings),
    }
    unresolved = [u.as_dict() for u in parsed.unresolved]
    if dry_run:
        return ImportResult(
            counts,
            unresolved,
            list(parsed.warnings),
            dry_run=True,
            embedding="none",
            duration_ms=(time.perf_counter() - clock) * 1000,
        )

    to_embed = len(new_keys) + len(changed) - len(meta_only) + len(renames) + len(create_edges) + len(retitle_edges)
    mode = embed
    if mode == "auto":
        mode = "task" if to_embed > settings.VAULT_IMPORT_SYNC_EMBED_LIMIT else "sync"
    embedder = get_embedder() if mode == "sync" else None
    model = embedder.model_name if embedder else ""
    embedded = [0]

    def vectors(texts: list[str]) -> list:
        if embedder is None:
            return [None] * len(texts)
        out = []
        size = settings.EMBED_BATCH_SIZE
        for i in range(0, len(texts), size):
            out.extend(embedder.embed(texts[i : i + size]))
            embedded[0] += len(texts[i : i + size])
            if progress:
                progress("embed", embedded[0], to_embed)
        return out

    now = datetime.now(UTC)
    # --- Write nodes.
    new_objs = [
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
        for k in new_keys
    ]
    for obj, vec in zip(new_objs, vectors([node_embedding_text(o.title, o.text) for o in new_objs])):
        obj.embedding, obj.embedding_model = vec, model if vec is not None else ""
    Node.objects.bulk_create(new_objs, batch_size=BULK)
    update_objs = []
    for key in changed:
        if key not in meta_only:
            update_objs.append((existing[key]["id"], desired[key]))
    for new_key, row in renames.items():
        update_objs.append((row["id"], desired[new_key]))
    updated = [
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
        for pk, d in update_objs
    ]
    for obj, vec in zip(updated, vectors([node_embedding_text(o.title, o.text) for o in updated])):
        obj.embedding, obj.embedding_model = vec, model if vec is not None else ""
    Node.objects.bulk_update(
        updated,
        [
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
        ],
        batch_size=BULK,
    )
    if meta_only:
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
                for k in sorted(meta_only)
            ],
            ["kind", "source", "aliases", "tags", "updated_at"],
            batch_size=BULK,
        )
    if gone:
        Node.objects.filter(graph=graph, id__in=[row["id"] for row in gone]).update(archived=True, updated_at=now)

    # --- Write edge types and edges.
    if new_types:
        EdgeType.objects.bulk_create(
            [EdgeType(graph=graph, name=n, priority=0.0, description="Created by a vault import.") for n in new_types],
            ignore_conflicts=True,
        )
        type_ids = dict(EdgeType.objects.filter(graph=graph).values_list("name", "id"))
    node_id = {key_after[i]: i for i in key_after}
    node_id.update({o.key: o.id for o in new_objs})
    for obj in new_objs:
        title_after[obj.id] = obj.title
    edge_objs = [
        Edge(graph=graph, source_id=node_id[s], target_id=node_id[t], edge_type_id=type_ids[n])
        for s, t, n in create_edges
    ]
    texts = [
        triplet_text(title_after[e.source_id], n, title_after[e.target_id])
        for e, (_s, _t, n) in zip(edge_objs, create_edges)
    ]
    for obj, vec in zip(edge_objs, vectors(texts)):
        obj.triplet_embedding, obj.embedding_model = vec, model if vec is not None else ""
    Edge.objects.bulk_create(edge_objs, batch_size=BULK)
    if restore_edges:
        Edge.objects.filter(graph=graph, id__in=restore_edges).update(archived=False, updated_at=now)
    if archive_edges:
        Edge.objects.filter(graph=graph, id__in=archive_edges).update(archived=True, updated_at=now)
    if retitle_edges:
        rows = list(
            Edge.objects.filter(graph=graph, id__in=retitle_edges).values_list(
                "id", "source_id", "target_id", "edge_type__name"
            )
        )
        vecs = vectors([triplet_text(title_after[s], n, title_after[t]) for _i, s, t, n in rows])
        Edge.objects.bulk_update(
            [
                Edge(id=i, triplet_embedding=v, embedding_model=model if v is not None else "", updated_at=now)
                for (i, _s, _t, _n), v in zip(rows, vecs)
            ],
            ["triplet_embedding", "embedding_model", "updated_at"],
            batch_size=BULK,
        )

    # --- The batch and the audit event.
    from feedback.models import UpdateBatch

    finished = datetime.now(UTC)
    duration_ms = (time.perf_counter() - clock) * 1000
    user = actor if getattr(actor, "is_authenticated", False) else None
    details = {
        "counts": counts,
        "unresolved": unresolved,
        "unresolved_by_reason": group_unresolved(unresolved),
        "warnings": list(parsed.warnings),
        "embedding": mode,
        "renamed": {new_key: row["key"] for new_key, row in sorted(renames.items())},
    }
    batch = UpdateBatch.objects.create(
        graph=graph,
        kind="import",
        trigger_user=user,
        trigger_task="" if user else audit.actor_label(actor),
        details=details,
        started_at=started,
        finished_at=finished,
        duration_ms=duration_ms,
    )
    event = audit.append(
        graph.organization_id,
        actor,
        "graph.import",
        {"batch": batch.pk, "counts": counts, "unresolved": unresolved[:50], "embedding": mode},
        scope={"graph": graph.pk, "graph_slug": graph.slug},
    )
    if mode == "task":
        from graphadmin.tasks import embed_graph

        graph_id = graph.pk
        transaction.on_commit(lambda: embed_graph.apply_async(args=[graph_id], queue="embeddings"))
    return ImportResult(
        counts,
        unresolved,
        list(parsed.warnings),
        batch_id=batch.pk,
        audit_seq=event.seq,
        embedding=mode,
        duration_ms=duration_ms,
    )


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
                    for row, v in zip(rows, vecs)
                ],
                [field, "embedding_model"],
            )
        done += len(rows)
        if progress:
            progress("embed", done, len(ids))
    return done
