"""Plan a vault import: what to create, update, rename, archive and restore (pure: no database).

``plan_import(parsed, nodes, edges, edge_types)`` compares the parsed vault with the graph's current
rows (plain dicts, read by ``graphadmin.vault.apply.current_rows``) and returns an ImportPlan, which
``graphadmin.vault.apply.apply_plan`` writes. Rules (docs/import.md):

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
"""

from __future__ import annotations

from dataclasses import dataclass

from .parse import ParsedVault, SpooledText, body_text, group_unresolved

SOURCE_PREFIX = "vault:"
MISSING_PREFIX = "vault-missing:"
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
    embed_task: str = ""  # the embeddings task's id when ``embedding`` is "task" (what ``import_vault`` waits for)

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
class Desired:
    """A node as the vault wants it. ``body``: its text, or where the parse spooled it (``text`` reads it)."""

    key: str
    title: str
    kind: str
    body: str | SpooledText
    source: str
    aliases: list
    tags: list
    content_hash: str

    @property
    def text(self) -> str:
        return body_text(self.body)


@dataclass
class ImportPlan:
    """The difference between a parsed vault and a graph's rows, in key space (valid before new nodes have ids)."""

    desired: dict[str, Desired]
    existing: dict[str, dict]  # key -> the node's current row
    new_keys: list[str]
    renames: dict[str, dict]  # new key -> existing row
    changed: list[str]
    meta_only: set[str]  # changed keys whose embedding stays (same file, same title)
    gone: list[dict]  # rows to archive
    key_after: dict[int, str]  # node id -> key after the import
    title_after: dict[int, str]  # node id -> title after the import
    type_ids: dict[str, int]  # edge type name -> id, before the import
    new_types: list[str]
    create_edges: list[tuple[str, str, str]]  # (source key, target key, edge type)
    restore_edges: list[int]
    archive_edges: list[int]
    retitle_edges: list[int]  # edges whose triplet text changed with an end's title
    counts: dict
    unresolved: list[dict]

    @property
    def to_embed(self) -> int:
        """How many texts the import embeds."""
        return (
            len(self.new_keys)
            + len(self.changed)
            - len(self.meta_only)
            + len(self.renames)
            + len(self.create_edges)
            + len(self.retitle_edges)
        )


def desired_nodes(parsed: ParsedVault) -> dict[str, Desired]:
    """The nodes the vault wants: one per note, and a placeholder per missing link target."""
    desired = {
        key: Desired(key, n.title, n.kind, n.body, SOURCE_PREFIX + n.path, n.aliases, n.tags, n.content_hash)
        for key, n in parsed.notes.items()
    }
    for key, title in parsed.missing.items():
        if key not in desired:
            desired[key] = Desired(key, title, "missing", "", MISSING_PREFIX + key, [], [], "")
    return desired


def plan_import(parsed: ParsedVault, nodes: list[dict], edges: list[dict], edge_types: dict[str, int]) -> ImportPlan:
    """The plan of importing ``parsed`` into a graph whose rows are ``nodes``, ``edges`` and ``edge_types``.

    ``nodes``: dicts with id, key, title, kind, source, content_hash, archived, tags, aliases;
    ``edges``: dicts with id, source_id, target_id, edge_type_id, archived; ``edge_types``: name -> id.
    """
    desired = desired_nodes(parsed)
    skipped = set(parsed.skipped)
    existing = {row["key"]: row for row in nodes}
    node_plan = _plan_nodes(desired, existing, skipped)
    after = _nodes_after(desired, existing, node_plan)
    edge_plan = _plan_edges(parsed, existing, edges, edge_types, skipped, node_plan, after)
    counts = _counts(parsed, desired, node_plan, edge_plan)
    del edge_plan["unchanged_edges"]  # a count only
    return ImportPlan(
        desired=desired,
        existing=existing,
        **node_plan,
        key_after=after["key_after"],
        title_after=after["title_after"],
        type_ids=dict(edge_types),
        **edge_plan,
        counts=counts,
        unresolved=[u.as_dict() for u in parsed.unresolved],
    )


def _plan_nodes(desired: dict[str, Desired], existing: dict[str, dict], skipped: set[str]) -> dict:
    """The nodes created (new_keys), renamed, changed (meta_only: without a new embedding) and archived (gone)."""
    new_keys = [k for k in desired if k not in existing]
    gone = [
        row
        for key, row in existing.items()
        if key not in desired and key not in skipped and not row["archived"] and _owned(row["source"])
    ]
    renames = _renames(desired, new_keys, gone)
    renamed_ids = {row["id"] for row in renames.values()}
    gone = [row for row in gone if row["id"] not in renamed_ids]
    new_keys = [k for k in new_keys if k not in renames]
    changed = [key for key, d in desired.items() if key in existing and _differs(existing[key], d)]
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
    return {"new_keys": new_keys, "renames": renames, "changed": changed, "meta_only": meta_only, "gone": gone}


def _renames(desired: dict[str, Desired], new_keys: list[str], gone: list[dict]) -> dict[str, dict]:
    """New key -> the disappeared row whose content hash it has (each row taken once, in key order)."""
    renames: dict[str, dict] = {}
    by_hash: dict[str, list[str]] = {}
    for key in sorted(new_keys):
        if desired[key].content_hash:
            by_hash.setdefault(desired[key].content_hash, []).append(key)
    for row in sorted(gone, key=lambda r: r["key"]):
        candidates = by_hash.get(row["content_hash"]) if row["content_hash"] else None
        if candidates:
            renames[candidates.pop(0)] = row
    return renames


def _differs(row: dict, d: Desired) -> bool:
    return (
        row["archived"]
        or row["content_hash"] != d.content_hash
        or row["title"] != d.title
        or row["kind"] != d.kind
        or row["source"] != d.source
        or row["tags"] != d.tags
        or row["aliases"] != d.aliases
    )


def _nodes_after(desired: dict[str, Desired], existing: dict[str, dict], node_plan: dict) -> dict:
    """Each existing node's key and title after the import, and the ids whose title changes (retitled)."""
    renames, changed = node_plan["renames"], node_plan["changed"]
    key_after = {row["id"]: row["key"] for row in existing.values()}
    for new_key, row in renames.items():
        key_after[row["id"]] = new_key
    title_after = {row["id"]: row["title"] for row in existing.values()}
    for key in changed:
        title_after[existing[key]["id"]] = desired[key].title
    for new_key, row in renames.items():
        title_after[row["id"]] = desired[new_key].title
    retitled = {existing[k]["id"] for k in changed if existing[k]["title"] != desired[k].title}
    retitled |= {row["id"] for k, row in renames.items() if row["title"] != desired[k].title}
    return {"key_after": key_after, "title_after": title_after, "retitled": retitled}


def _plan_edges(
    parsed: ParsedVault,
    existing: dict[str, dict],
    edges: list[dict],
    edge_types: dict[str, int],
    skipped: set[str],
    node_plan: dict,
    after: dict,
) -> dict:
    """The edges created, restored, archived and re-embedded (retitled), in key space (valid before new nodes
    have ids), and the edge types to create."""
    archived_now = {row["id"] for row in node_plan["gone"]}
    owned_sources = (
        {row["id"] for key, row in existing.items() if _owned(row["source"]) and key not in skipped}
        | {row["id"] for row in node_plan["renames"].values()}
        | {existing[k]["id"] for k in node_plan["changed"]}
    )
    key_after, type_names = after["key_after"], {v: k for k, v in edge_types.items()}
    desired_edges = {(link.source, link.target, link.edge_type) for link in parsed.links}
    existing_edges = {
        (key_after[row["source_id"]], key_after[row["target_id"]], type_names[row["edge_type_id"]]): row
        for row in edges
    }
    archive_edges = [
        row["id"]
        for t, row in existing_edges.items()
        if not row["archived"]
        and t not in desired_edges
        and (row["source_id"] in owned_sources or row["source_id"] in archived_now or row["target_id"] in archived_now)
    ]
    archive_edge_set, retitled = set(archive_edges), after["retitled"]
    return {
        "new_types": sorted({link.edge_type for link in parsed.links} - set(edge_types)),
        "create_edges": sorted(desired_edges - set(existing_edges)),
        "restore_edges": [
            existing_edges[t]["id"] for t in desired_edges if t in existing_edges and existing_edges[t]["archived"]
        ],
        "archive_edges": archive_edges,
        "retitle_edges": [
            row["id"]
            for t, row in existing_edges.items()
            if t in desired_edges
            and row["id"] not in archive_edge_set
            and (row["source_id"] in retitled or row["target_id"] in retitled)
        ],
        "unchanged_edges": sum(1 for t, row in existing_edges.items() if t in desired_edges and not row["archived"]),
    }


def _counts(parsed: ParsedVault, desired: dict[str, Desired], node_plan: dict, edge_plan: dict) -> dict:
    """What the import does, in numbers (the batch's details and the API's answer)."""
    new_keys, renames, changed = node_plan["new_keys"], node_plan["renames"], node_plan["changed"]
    return {
        "notes": len(parsed.notes),
        "nodes_created": len(new_keys),
        "nodes_updated": len(changed),
        "nodes_renamed": len(renames),
        "nodes_archived": len(node_plan["gone"]),
        "nodes_unchanged": len(desired) - len(new_keys) - len(renames) - len(changed),
        "placeholders": len([k for k in parsed.missing if k not in parsed.notes]),
        "edges_created": len(edge_plan["create_edges"]),
        "edges_restored": len(edge_plan["restore_edges"]),
        "edges_archived": len(edge_plan["archive_edges"]),
        "edges_unchanged": edge_plan["unchanged_edges"],
        "edge_types_created": len(edge_plan["new_types"]),
        "unresolved_links": len(parsed.unresolved),
        "attachment_links": parsed.attachment_links,
        "files_skipped": len(parsed.skipped),
        "warnings": len(parsed.warnings),
    }
