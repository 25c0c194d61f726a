"""Row changes of a batch (``RecordChange``): what a ``memory`` or ``import`` batch created, changed or
archived, and the rollback that restores it.

A weight batch records weights before and after (``WeightChange``); a batch that writes nodes and
edges records their tracked fields before and after here, and its rollback follows the same rules
as every rollback (``feedback.actions.do_rollback_batch``): a row is restored to its ``before`` only
where it still holds the batch's ``after``; a row changed since is a conflict, counted and listed,
left alone unless ``force``. A created row's ``before`` is the row archived, so undoing a creation
archives it (nothing is deleted). The rollback records its own changes the same way, so rolling a
rollback back re-applies the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from graphadmin import actions as core
from graphadmin.models import Edge, Graph, Node
from graphadmin.tasks import embed_graph
from graphadmin.vault import apply

from .models import RecordChange, UpdateBatch

NODE_FIELDS = ("key", "kind", "title", "text", "source", "aliases", "tags", "content_hash", "archived")
EDGE_FIELDS = ("archived",)
FIELDS = {"node": NODE_FIELDS, "edge": EDGE_FIELDS}
MODELS = {"node": Node, "edge": Edge}
CONFLICT_SAMPLE = 100  # ids listed per target kind in a rollback's details


def snapshot(target: str, graph_id: int, ids, *, lock: bool = False) -> dict[int, dict]:
    """The tracked fields of the graph's nodes or edges ``ids``, by id (locked in id order with ``lock``)."""
    if not ids:
        return {}
    qs = MODELS[target].objects.filter(graph_id=graph_id, pk__in=list(ids)).order_by("pk")
    if lock:
        # Edges first, then nodes, each in id order: the lock order of every writer (feedback.actions).
        list(qs.select_for_update().values_list("pk", flat=True))
    return {row.pop("id"): row for row in qs.values("id", *FIELDS[target])}


def created(after: dict[int, dict]) -> dict[int, dict]:
    """The ``before`` of rows a batch created: archived (what undoing the creation leaves). Only that
    field: a large import's texts are stored once (in ``after``), not twice."""
    return {pk: {"archived": True} for pk in after}


def record(batch: UpdateBatch, target: str, op: str, before: dict[int, dict], after: dict[int, dict]) -> int:
    """Append a RecordChange for each row of ``after`` whose fields differ from ``before`` (which may name
    only some fields: those differ); returns how many."""
    rows = [
        RecordChange(
            graph_id=batch.graph_id,
            batch=batch,
            target=target,
            record_id=pk,
            op=op,
            before=before[pk],
            after=fields,
            created_at=batch.started_at,
        )
        for pk, fields in sorted(after.items())
        if pk in before and any(fields.get(name) != value for name, value in before[pk].items())
    ]
    RecordChange.objects.bulk_create(rows, batch_size=500)
    return len(rows)


def has_records(batch: UpdateBatch) -> bool:
    return RecordChange.objects.filter(graph_id=batch.graph_id, batch=batch).exists()


@dataclass
class RowPlan:
    """What undoing a batch's row changes would do, per target kind: the rows to restore (id -> wanted
    fields) and the rows in conflict, with the rows' current fields."""

    wanted: dict[str, dict[int, dict]] = field(default_factory=dict)
    clashing: dict[str, list[int]] = field(default_factory=dict)
    current: dict[str, dict[int, dict]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {kind: len(self.wanted.get(kind, {})) for kind in ("node", "edge")}

    def conflicts(self) -> int:
        return sum(len(ids) for ids in self.clashing.values())


def plan(target: UpdateBatch, *, force: bool, lock: bool, only: dict[str, set[int]] | None = None) -> RowPlan:
    """What a rollback of ``target``'s row changes restores and which rows conflict (``rollback``'s rule).

    With ``lock`` the rows are locked in the writers' order (the rollback); without, a plain read (the
    preview), so both count by the same code. ``only`` (kind -> ids) restricts it to those rows: the ones a
    partial rollback left (``feedback.actions.do_finish_rollback``).
    """
    graph = target.graph
    changes = list(RecordChange.objects.filter(graph_id=target.graph_id, batch=target).order_by("pk"))
    result = RowPlan()
    for kind in ("edge", "node"):
        first: dict[int, dict] = {}
        last: dict[int, dict] = {}
        for change in changes:
            if change.target == kind and (only is None or change.record_id in only.get(kind, ())):
                first.setdefault(change.record_id, change.before)
                last[change.record_id] = change.after
        current = snapshot(kind, graph.pk, first, lock=lock)
        wanted, clashing = {}, []
        for pk, before in first.items():
            now = current.get(pk)
            if now is None or all(now.get(name) == value for name, value in before.items()):
                continue  # gone (graph rows are never deleted, but be safe) or already as it was
            if now != last[pk] and not force:
                clashing.append(pk)
                continue
            wanted[pk] = {**now, **before}  # a created row's before names only the fields to set back
        if kind == "node":
            clashing += _key_clashes(graph, wanted, current)
            for pk in clashing:
                wanted.pop(pk, None)
        result.wanted[kind], result.clashing[kind], result.current[kind] = wanted, clashing, current
    return result


def rollback(
    target: UpdateBatch, new: UpdateBatch, *, actor, force: bool, only: dict[str, set[int]] | None = None
) -> tuple[dict, int, dict]:
    """Restore what ``target`` changed, as the rollback batch ``new``; returns (changes per kind, conflicts,
    conflicting ids per kind).

    Per row: the ``before`` of its first change in the batch, where the row still holds the ``after``
    of its last one. A key another node has taken since is a conflict even with ``force`` (two notes
    cannot share a key). Restored titles and texts are embedded again: here for a few, by the
    embeddings task for more (as an import does). ``only``: see ``plan``.
    """
    graph = target.graph
    decided = plan(target, force=force, lock=True, only=only)
    sample: dict[str, list[int]] = {}
    retexted: list[int] = []
    for kind in ("edge", "node"):
        wanted, current, clashing = decided.wanted[kind], decided.current[kind], decided.clashing[kind]
        if kind == "node":
            retexted = [pk for pk, before in wanted.items() if _text_of(before) != _text_of(current[pk])]
        if wanted:
            core.do_restore_records(
                graph, MODELS[kind], {pk: _changed(current[pk], before) for pk, before in wanted.items()}, actor=actor
            )
            record(new, kind, "restore", {pk: current[pk] for pk in wanted}, wanted)
        if clashing:
            sample[kind] = sorted(clashing)[:CONFLICT_SAMPLE]
    if retexted:
        embed_again(graph, retexted)
    return decided.counts(), decided.conflicts(), sample


def remaining(target: UpdateBatch, rollback_batch: UpdateBatch) -> dict[str, set[int]]:
    """The rows of ``target``'s row changes its (partial) rollback ``rollback_batch`` did not restore, by kind."""
    done = set(
        RecordChange.objects.filter(graph_id=target.graph_id, batch=rollback_batch).values_list("target", "record_id")
    )
    left: dict[str, set[int]] = {"node": set(), "edge": set()}
    for kind, pk in RecordChange.objects.filter(graph_id=target.graph_id, batch=target).values_list(
        "target", "record_id"
    ):
        if (kind, pk) not in done:
            left[kind].add(pk)
    return left


def _text_of(fields: dict) -> tuple:
    return fields.get("title"), fields.get("text")


def _changed(current: dict, wanted: dict) -> dict:
    return {name: value for name, value in wanted.items() if current.get(name) != value}


def _key_clashes(graph: Graph, wanted: dict[int, dict], current: dict[int, dict]) -> list[int]:
    """Rows whose restored key another node of the graph holds now (and keeps)."""
    rekeyed = {before["key"]: pk for pk, before in wanted.items() if before["key"] != current[pk]["key"]}
    if not rekeyed:
        return []
    holders = Node.objects.filter(graph=graph, key__in=list(rekeyed)).values_list("key", "pk")
    freed = {current[pk]["key"] for pk in wanted}  # keys the restore itself moves away
    return [rekeyed[key] for key, holder in holders if holder != rekeyed[key] and key not in freed]


def embed_again(graph: Graph, node_ids: list[int]) -> None:
    """Drop the vectors of nodes whose title or text changed (and of the edges at their ends), then embed
    them: in this transaction for at most VAULT_IMPORT_SYNC_EMBED_LIMIT rows, else by the embeddings task."""
    Node.objects.filter(graph=graph, pk__in=node_ids).update(embedding=None, embedding_model="")
    edges = Edge.objects.filter(graph=graph, archived=False).filter(source_id__in=node_ids) | Edge.objects.filter(
        graph=graph, archived=False, target_id__in=node_ids
    )
    edges.update(triplet_embedding=None, embedding_model="")
    if len(node_ids) <= settings.VAULT_IMPORT_SYNC_EMBED_LIMIT:
        apply.embed_pending(graph.pk)
    else:
        graph_id = graph.pk
        transaction.on_commit(lambda: embed_graph.apply_async(args=[graph_id], queue="embeddings"))
