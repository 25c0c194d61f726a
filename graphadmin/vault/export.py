"""The graph back out as an Obsidian vault (``manage.py export_vault``, the graph page's download).

One markdown file per live node at its key's path (``<key>.md``), with frontmatter (title, kind, tags,
aliases and the learned ``feedback_weight``), the node's text, then a section per edge type of its
live outgoing edges, each a Dataview field line ``- <type>:: [[<target key>]] (weight 0.620)`` so the
importer reads the link with its type (``graphadmin.vault.parse``). Importing the vault into an empty
graph gives the same nodes (keys, titles, kinds, tags, aliases) and the same (source, target, type)
edges; the texts gain the link sections. Links written in a note's text are kept as they are, so an
edge an operator archived while its text still links the note comes back on a re-import.

A key that is not a safe vault path (``parse.key_problem``: API-made keys before the rule) is
written under ``_unsafe-keys/<node id>.md`` and listed in the result's warnings.
"""

from __future__ import annotations

import io
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from graphadmin.models import Edge, Graph, Node

from .parse import NOTE_SUFFIX, key_problem

SECTION_HEADING = "## Links: {type}"


@dataclass
class ExportResult:
    """What an export wrote: counts, and the keys that could not be written at their own path."""

    notes: int = 0
    edges: int = 0
    warnings: list[str] = field(default_factory=list)


def note_files(graph: Graph, result: ExportResult | None = None) -> Iterator[tuple[str, str]]:
    """(vault path, markdown) of every live node of ``graph``, in key order."""
    result = result if result is not None else ExportResult()
    keys = dict(Node.objects.filter(graph=graph, archived=False).values_list("pk", "key"))
    links: dict[int, dict[str, list[tuple[str, float]]]] = defaultdict(lambda: defaultdict(list))
    edges = (
        Edge.objects.filter(graph=graph, archived=False, source__archived=False, target__archived=False)
        .order_by("edge_type__name", "target__key")
        .values_list("source_id", "target_id", "edge_type__name", "weight")
    )
    for source, target, type_name, weight in edges.iterator(chunk_size=2000):
        links[source][type_name].append((keys[target], weight))
        result.edges += 1
    nodes = (
        Node.objects.filter(graph=graph, archived=False)
        .order_by("key")
        .values_list("pk", "key", "title", "kind", "text", "tags", "aliases", "feedback_weight")
    )
    for pk, key, title, kind, text, tags, aliases, feedback_weight in nodes.iterator(chunk_size=500):
        path = key + NOTE_SUFFIX
        if key_problem(key):
            path = f"_unsafe-keys/{pk}{NOTE_SUFFIX}"
            result.warnings.append(f"node {pk}: key {key!r} is not a vault path; written as {path}.")
        result.notes += 1
        yield path, render_note(title, kind, text, tags, aliases, feedback_weight, links.get(pk, {}))


def render_note(title, kind, text, tags, aliases, feedback_weight, links: dict[str, list[tuple[str, float]]]) -> str:
    """One note's markdown: frontmatter, text, and a section per edge type of its outgoing links."""
    meta = {"title": title, "kind": kind, "tags": list(tags or []), "aliases": list(aliases or [])}
    meta["feedback_weight"] = round(float(feedback_weight), 6)
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=False, width=10_000)
    parts = [f"---\n{front}---\n", text.rstrip("\n") + "\n" if text else ""]
    for type_name in sorted(links):
        lines = [f"- {type_name}:: [[{target}]] (weight {weight:.3f})" for target, weight in links[type_name]]
        parts.append("\n" + SECTION_HEADING.format(type=type_name) + "\n\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def export_to_dir(graph: Graph, out: Path) -> ExportResult:
    """Write the vault under ``out`` (created; existing files of the same paths are overwritten)."""
    result = ExportResult()
    out = Path(out)
    for path, markdown in note_files(graph, result):
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(markdown, encoding="utf-8")
    return result


def export_zip(graph: Graph) -> tuple[bytes, ExportResult]:
    """The vault as a zip archive in memory (the dashboard's download), with the result."""
    result = ExportResult()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, markdown in note_files(graph, result):
            archive.writestr(f"{graph.slug}/{path}", markdown)
    return buffer.getvalue(), result
