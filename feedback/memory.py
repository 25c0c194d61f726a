"""Agent-written memory: remember, link and forget, each call one ``memory`` batch that a rollback undoes.

An agent (the ``agent`` role, in its own organization) or an operator writes notes through REST
(``feedback.api``) and MCP (``feedback.mcp``); both call the ``do_*`` here. Each call:

- checks its bounds (``check_rate``: calls per user per minute; text size, links per call, keys
  following the importer's rule: ``graphadmin.vault.parse.key_problem``), refusing with the limit named;
- writes nodes and edges through the core's node actions (``graphadmin.actions``: create, update,
  archive), so every hook on them (audit, lexical index) sees agent writes too;
- records each row's tracked fields before and after (``feedback.records``) in one UpdateBatch of kind
  ``memory`` with one AuditEvent (``graph.memory``), triggered by the user and the session when given.

Provenance: a remembered node's ``created_by`` is the caller and its ``source`` reads
``agent:<username> session:<id> at:<time>``. An agent may update (by key), link from and forget only
what it wrote; operators and admins anything. Nothing is deleted: forgetting archives.
"""

from __future__ import annotations

import math
import re
import time
import uuid

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils.text import slugify
from pgvector.django import CosineDistance

from graphadmin import actions as core
from graphadmin import clock
from graphadmin.embeddings import configured_model, embed_texts
from graphadmin.errors import Forbidden, InputError, TooManyRequests
from graphadmin.models import Edge, EdgeType, Graph, Node
from graphadmin.models.sql import advisory_lock
from graphadmin.runtime.locks import AdvisoryLock
from graphadmin.tasks import embed_graph
from graphadmin.tenancy import AGENT, require_session
from graphadmin.vault.parse import (
    EDGE_TYPE_NAME,
    EDGE_TYPE_NAME_RULE,
    NO_SUCH_NOTE,
    Resolver,
    _links_of,
    key_problem,
    normalize_target,
    strip_code,
)
from graphadmin.vault.plan import node_embedding_text, triplet_text

from . import ledger, records
from .models import AgentSession, RecordChange, UpdateBatch

# The documented bounds (docs/memory.md); the calls per minute are a setting (MEMORY_CALLS_PER_MINUTE).
MAX_TEXT_CHARS = 20_000
MAX_TITLE_CHARS = 500
MAX_LINKS = 20
MAX_TAGS = 20
MAX_TAG_CHARS = 100
MAX_FORGET = 50
KIND = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,49}$")
KIND_RULE = "Lower-case letters, digits, '-' or '_', at most 50 (observation, decision, note...)."
DEFAULT_KIND = "observation"
# A text longer than this is embedded by the embeddings task after the call (as a large import is), and
# so is not compared with existing notes for near-duplicates.
SYNC_EMBED_CHARS = 8000


class RateLimited(TooManyRequests):
    """Too many memory calls by one user in the current minute: the REST API's 429, an MCP tool error."""

    def __init__(self, limit: int, wait: float):
        message = (
            f"MEMORY_CALLS_PER_MINUTE: at most {limit} memory calls per user per minute; "
            f"try again in {math.ceil(wait)} s."
        )
        super().__init__(message, wait)
        self.limit = limit


def check_rate(user) -> None:
    """Count one memory call of ``user`` in the current minute; RateLimited past MEMORY_CALLS_PER_MINUTE."""
    limit = settings.MEMORY_CALLS_PER_MINUTE
    now = time.time()
    key = f"memory-calls:{user.pk}:{int(now // 60)}"
    cache.add(key, 0, timeout=120)
    if cache.incr(key) > limit:
        raise RateLimited(limit, 60 - now % 60)


def _lock(graph: Graph) -> None:
    """Memory calls on one graph queue behind each other (``AdvisoryLock.MEMORY``, the graph's id), so two
    remembers of the same key (or of the same text) cannot both create a note. Not the graph row's lock:
    FOR UPDATE on it would block every insert referencing the graph (context calls) meanwhile."""
    advisory_lock(AdvisoryLock.MEMORY, graph.pk)


def _is_agent(role: str) -> bool:
    return role == AGENT


def _own(role: str, user, record) -> bool:
    return not _is_agent(role) or (record.created_by_id is not None and record.created_by_id == user.pk)


def _session(graph: Graph, user, role: str, external_id: str | None) -> AgentSession | None:
    """The caller's session (created on first use, as a context call does); another user's: Forbidden."""
    if not external_id:
        return None
    session, made = AgentSession.objects.get_or_create(graph=graph, external_id=external_id, defaults={"owner": user})
    if not made:
        require_session(role, user.pk, session.owner_id, external_id)
    return session


def _source(user, session: AgentSession | None) -> str:
    who = f"agent:{user.get_username()}"
    where = f" session:{session.external_id}" if session else ""
    return f"{who}{where} at:{clock.now().isoformat(timespec='seconds')}"[:1000]


def _node(graph: Graph, ref, field: str) -> Node:
    """A live node of ``graph`` by id (an int) or key (a string); InputError naming ``field`` otherwise
    (another graph's node reads as unknown: a note never links across graphs)."""
    qs = Node.objects.filter(graph=graph, archived=False)
    node = qs.filter(pk=ref).first() if isinstance(ref, int) else qs.filter(key=str(ref)).first()
    if node is None:
        raise InputError({field: [f"unknown node {ref!r} in this graph."]})
    return node


def _edge_type(graph: Graph, name: str, role: str, field: str, *, actor) -> EdgeType:
    """An edge type of the graph by name; a new one is created for operators, refused for agents."""
    if not EDGE_TYPE_NAME.match(name or ""):
        raise InputError({field: [EDGE_TYPE_NAME_RULE]})
    edge_type = EdgeType.objects.filter(graph=graph, name=name).first()
    if edge_type is None:
        if _is_agent(role):
            raise InputError({field: [f"unknown edge type {name!r}: a new edge type needs an operator."]})
        edge_type = core.do_create_edge_type(graph, name, actor=actor)
    return edge_type


def _check_note(data: dict) -> None:
    """The bounds of a remembered note (InputError naming the field)."""
    text = data.get("text") or ""
    errors = {}
    if not text.strip():
        errors["text"] = ["Give the note's text."]
    elif len(text) > MAX_TEXT_CHARS:
        errors["text"] = [f"At most {MAX_TEXT_CHARS} characters (this one has {len(text)})."]
    if "\x00" in text or "\x00" in (data.get("title") or ""):
        errors["text"] = ["Text may not contain NUL (0x00) characters."]
    if data.get("title") is not None and len(data["title"]) > MAX_TITLE_CHARS:
        errors["title"] = [f"At most {MAX_TITLE_CHARS} characters."]
    if data.get("kind") is not None and not KIND.match(data["kind"]):
        errors["kind"] = [KIND_RULE]
    if data.get("key") is not None and (problem := key_problem(data["key"])):
        errors["key"] = [problem]
    tags = data.get("tags") or []
    if len(tags) > MAX_TAGS or any(not t or len(t) > MAX_TAG_CHARS or "\x00" in t for t in tags):
        errors["tags"] = [f"At most {MAX_TAGS} tags of 1 to {MAX_TAG_CHARS} characters."]
    if len(data.get("links") or []) > MAX_LINKS:
        errors["links"] = [f"At most {MAX_LINKS} links per call."]
    if errors:
        raise InputError(errors)


def _title(data: dict) -> str:
    if data.get("title"):
        return data["title"].strip()[:MAX_TITLE_CHARS]
    first = next((line.strip("# ").strip() for line in data["text"].splitlines() if line.strip()), "")
    return (first[:120] or "note").strip()


def _embed(title: str, text: str) -> list | None:
    """The note's vector now, or None when its text is long enough for the background task."""
    if len(text) > SYNC_EMBED_CHARS:
        return None
    return embed_texts([node_embedding_text(title, text)])[0]


def near_duplicate(graph: Graph, kind: str, vector, threshold: float, exclude: int | None = None):
    """The live note of ``kind`` most similar to ``vector`` at or above ``threshold`` (cosine), with its
    similarity, or (None, None). Only vectors of the configured model are compared."""
    if vector is None:
        return None, None
    qs = Node.objects.filter(graph=graph, kind=kind, archived=False, embedding_model=configured_model()).exclude(
        embedding=None
    )
    if exclude:
        qs = qs.exclude(pk=exclude)
    hit = qs.annotate(distance=CosineDistance("embedding", vector)).order_by("distance").first()
    if hit is None or 1.0 - hit.distance < threshold:
        return None, None
    return hit, round(1.0 - hit.distance, 4)


class _Call:
    """What one memory call wrote, recorded into its batch at the end."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.before = {"node": {}, "edge": {}}
        self.ops = {"node": {}, "edge": {}}
        self.unresolved: list[dict] = []
        self.edges: list[int] = []

    def touch(self, target: str, pk: int, op: str, before: dict | None = None) -> None:
        """Remember a row's state before the call's first change of it (None: created by the call)."""
        if pk not in self.before[target]:
            self.before[target][pk] = before
            self.ops[target][pk] = op

    def state(self, target: str, pk: int) -> dict:
        return records.snapshot(target, self.graph.pk, [pk])[pk]

    def record(self, batch: UpdateBatch) -> int:
        written = 0
        for target in ("node", "edge"):
            after = records.snapshot(target, self.graph.pk, self.before[target])
            for pk, before in self.before[target].items():
                written += records.record(
                    batch,
                    target,
                    self.ops[target][pk],
                    {pk: before or records.created({pk: after[pk]})[pk]},
                    {pk: after[pk]},
                )
        return written

    @property
    def changed(self) -> bool:
        return any(self.before[t] for t in ("node", "edge"))


def _link(call: _Call, source: Node, target: Node, edge_type: EdgeType, *, actor, user) -> str:
    """An edge source -> target of ``edge_type``: created (with its triplet vector), restored if archived,
    or left as it is. Returns what happened."""
    if source.pk == target.pk:
        return "self"
    edge = Edge.objects.filter(graph=call.graph, source=source, target=target, edge_type=edge_type).first()
    if edge is not None and not edge.archived:
        return "exists"
    if edge is not None:
        call.touch("edge", edge.pk, "restore", call.state("edge", edge.pk))
        core.do_update_record(edge, {"archived": False}, actor=actor)
        call.edges.append(edge.pk)
        return "restored"
    vector = embed_texts([triplet_text(source.title, edge_type.name, target.title)])[0]
    edge = core.do_create_record(
        Edge,
        call.graph,
        {
            "source": source,
            "target": target,
            "edge_type": edge_type,
            "triplet_embedding": vector,
            "embedding_model": configured_model() if vector is not None else "",
            "created_by": user,
        },
        actor=actor,
    )
    call.touch("edge", edge.pk, "create")
    call.edges.append(edge.pk)
    return "created"


def _wikilinks(graph: Graph, node: Node, text: str, call: _Call, *, actor, user, role) -> None:
    """``[[wikilinks]]`` (and markdown links, typed inline fields) in the text, resolved as the vault
    importer resolves them among the graph's live notes, become edges; the others are reported."""
    raw_links = _links_of(strip_code(text))
    if not raw_links:
        return
    rows = list(Node.objects.filter(graph=graph, archived=False).values_list("key", "aliases"))
    resolver = Resolver([k for k, _a in rows], {k: a or [] for k, a in rows}, [])
    for raw, type_name, style in raw_links:
        target = normalize_target(raw, style)
        if target is None:
            continue
        found = resolver.resolve(target, node.key, style)
        if found.key is None:
            call.unresolved.append({"link": raw, "reason": found.reason or NO_SUCH_NOTE})
            continue
        edge_type = EdgeType.objects.filter(graph=graph, name=type_name).first()
        if edge_type is None:
            call.unresolved.append({"link": raw, "reason": f"unknown edge type {type_name!r}"})
            continue
        _link(call, node, Node.objects.get(graph=graph, key=found.key), edge_type, actor=actor, user=user)


def _finish(call: _Call, kind: str, user, session, started: float, details: dict) -> dict:
    """The call's batch (when it wrote anything), its record changes and audit event; the answer."""
    answer = {**details, "edges": sorted(set(call.edges)), "unresolved": call.unresolved, "batch": None}
    if not call.changed:
        return answer
    batch = ledger.start_batch(call.graph, "memory", user, session=session, details={"call": kind, **details})
    rows = call.record(batch)
    batch.details["edges"] = answer["edges"]
    ledger.finish(
        batch,
        user,
        started,
        node_updates=len(call.before["node"]),
        edge_updates=len(call.before["edge"]),
        audit_extra={"call": kind, "session": session.external_id if session else None, "rows": rows},
    )
    answer["batch"] = batch.pk
    return answer


@transaction.atomic
def do_remember(graph: Graph, data: dict, *, actor, role: str, session_id: str | None = None) -> dict:
    """Remember a note: create it, update it by key (a new version), or find it already there.

    ``data``: text, kind (default observation), key, title, tags, links ([{node: id or key, type}]).
    Statuses in the answer: ``created``; ``updated`` (same key: the old text stays in the node's
    history); ``unchanged`` (same key, same content); ``duplicate`` (no key, or a new key, and a live
    note of the same kind at or above the policy's ``memory_duplicate_threshold``: no copy is made,
    the links are added from that note and ``duplicate_of`` names it). Wikilinks in the text become
    edges; ``unresolved`` lists those that name no note.
    """
    started = time.perf_counter()
    _check_note(data)
    _lock(graph)
    user = actor
    session = _session(graph, user, role, session_id)
    kind = data.get("kind") or DEFAULT_KIND
    title, text = _title(data), data["text"]
    links = [
        (
            _node(graph, link.get("node", link.get("key")), f"links[{i}].node"),
            _edge_type(graph, link.get("type") or "related", role, f"links[{i}].type", actor=actor),
        )
        for i, link in enumerate(data.get("links") or [])
    ]
    call = _Call(graph)
    existing = Node.objects.filter(graph=graph, key=data["key"]).first() if data.get("key") else None
    fields = {"kind": kind, "title": title, "text": text, "tags": list(data.get("tags") or [])}
    vector = None
    details: dict = {}
    if existing is not None:
        if not _own(role, user, existing):
            raise Forbidden(f"Note {existing.key!r} was not written by you: an agent updates only its own notes.")
        given = {name: value for name, value in fields.items() if name == "text" or data.get(name) is not None}
        changes = {name: value for name, value in given.items() if getattr(existing, name) != value}
        if existing.archived:
            changes["archived"] = False
        node, status = existing, "unchanged"
        if changes:
            call.touch("node", node.pk, "update", call.state("node", node.pk))
            if "text" in changes or "title" in changes:
                vector = _embed(changes.get("title", node.title), changes.get("text", node.text))
                changes.update(embedding=vector, embedding_model=configured_model() if vector is not None else "")
            changes["source"] = _source(user, session)
            core.do_update_record(node, changes, actor=actor)
            status = "updated"
    else:
        vector = _embed(title, text)
        threshold = graph.current_policy().memory_duplicate_threshold
        node, similarity = near_duplicate(graph, kind, vector, threshold)
        if node is not None:
            status = "duplicate"
            details = {"duplicate_of": node.pk, "similarity": similarity}
        else:
            key = data.get("key") or f"memory/{slugify(title)[:60] or 'note'}-{uuid.uuid4().hex[:8]}"
            node = core.do_create_record(
                Node,
                graph,
                {
                    "key": key,
                    "source": _source(user, session),
                    "embedding": vector,
                    "embedding_model": configured_model() if vector is not None else "",
                    "created_by": user,
                    **fields,
                },
                actor=actor,
            )
            call.touch("node", node.pk, "create")
            status = "created"
    for target, edge_type in links:
        _link(call, node, target, edge_type, actor=actor, user=user)
    if status in ("created", "updated"):
        _wikilinks(graph, node, text, call, actor=actor, user=user, role=role)
    if status in ("created", "updated") and vector is None:
        graph_id = graph.pk
        transaction.on_commit(lambda: embed_graph.apply_async(args=[graph_id], queue="embeddings"))
    answer = {"status": status, "node": node.pk, "key": node.key, "title": node.title, "kind": node.kind, **details}
    return _finish(call, "remember", user, session, started, answer)


@transaction.atomic
def do_link(graph: Graph, data: dict, *, actor, role: str, session_id: str | None = None) -> dict:
    """Link two existing live notes (by id or key) with an existing edge type (a new type: operators).
    An agent links from the notes it wrote. Answers ``created``, ``restored`` or ``exists``."""
    started = time.perf_counter()
    _lock(graph)
    user = actor
    session = _session(graph, user, role, session_id)
    source = _node(graph, data.get("source"), "source")
    target = _node(graph, data.get("target"), "target")
    if source.pk == target.pk:
        raise InputError({"target": ["A note is not linked to itself."]})
    if not _own(role, user, source):
        raise Forbidden(f"Note {source.key!r} was not written by you: an agent links from its own notes only.")
    edge_type = _edge_type(graph, data.get("type") or "related", role, "type", actor=actor)
    call = _Call(graph)
    status = _link(call, source, target, edge_type, actor=actor, user=user)
    answer = {"status": status, "source": source.pk, "target": target.pk, "type": edge_type.name}
    if status == "exists":
        answer["edge"] = Edge.objects.get(graph=graph, source=source, target=target, edge_type=edge_type).pk
    return _finish(call, "link", user, session, started, answer)


@transaction.atomic
def do_forget(graph: Graph, data: dict, *, actor, role: str, session_id: str | None = None) -> dict:
    """Archive notes and/or edges (ids); an agent only those it wrote. Nothing is deleted; the batch's
    rollback restores them. Archived ones already are left alone."""
    started = time.perf_counter()
    _lock(graph)
    user = actor
    session = _session(graph, user, role, session_id)
    asked = {"node": list(data.get("nodes") or []), "edge": list(data.get("edges") or [])}
    if not asked["node"] and not asked["edge"]:
        raise InputError({"nodes": ["Give the node ids and/or edge ids to forget."]})
    if len(asked["node"]) + len(asked["edge"]) > MAX_FORGET:
        raise InputError({"nodes": [f"At most {MAX_FORGET} nodes and edges per call."]})
    call = _Call(graph)
    archived = {"node": [], "edge": []}
    for target, model in (("edge", Edge), ("node", Node)):
        rows = {r.pk: r for r in model.objects.filter(graph=graph, pk__in=asked[target]).order_by("pk")}
        for i, pk in enumerate(asked[target]):
            row = rows.get(pk)
            if row is None:
                raise InputError({f"{target}s[{i}]": [f"unknown {target} {pk} in this graph."]})
            if not _own(role, user, row):
                raise Forbidden(f"{target.capitalize()} {pk} was not written by you: an agent forgets its own only.")
            if row.archived:
                continue
            call.touch(target, pk, "archive", call.state(target, pk))
            core.do_archive(row, actor=actor)
            archived[target].append(pk)
    answer = {"status": "archived" if call.changed else "unchanged", "nodes": archived["node"]}
    answer["archived_edges"] = archived["edge"]
    return _finish(call, "forget", user, session, started, answer)


def node_versions(node: Node) -> list[dict]:
    """A node's versions, newest first: the current one, then each text a memory or import batch replaced."""
    changes = RecordChange.objects.filter(graph_id=node.graph_id, target="node", record_id=node.pk).select_related(
        "batch", "batch__trigger_user", "batch__trigger_session"
    )
    out = []
    for change in changes.order_by("-pk"):
        if change.before.get("text") == change.after.get("text") and change.op != "create":
            continue
        batch = change.batch
        out.append(
            {
                "batch": batch.pk,
                "kind": batch.kind,
                "op": change.op,
                "at": change.created_at,
                "by": batch.trigger_user.get_username() if batch.trigger_user else batch.trigger_task,
                "session": batch.trigger_session.external_id if batch.trigger_session else None,
                "title": change.after.get("title"),
                "text": change.after.get("text"),
                "previous_text": None if change.op == "create" else change.before.get("text"),
            }
        )
    return out
