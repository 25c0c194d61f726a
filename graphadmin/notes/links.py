"""Resolve a node's links to the nodes of its graph, the way the vault importer does, in one query.

``render_node_text(node)`` is what the node page shows: ``graphadmin.notes.text.render`` with a resolver
from ``node_resolver``. The resolver fetches, in one query, every live node of the graph that any of
the note's links could name (by exact path, by file name or path ending, by alias: a superset), then
lets ``graphadmin.vault.parse.Resolver`` pick among them with the importer's rules (exact vault path,
then the same name in the linking note's own folder, then the shortest path, then a unique alias;
a true tie stays unresolved). A node created through the API, whose key is no vault path, is found
by its key or its aliases all the same.

The query reads the graph's live nodes with plain comparisons (no index serves a case-insensitive
match on a key's last part); it runs only for a note that has links.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

from django.db.models import Func, JSONField, Q, TextField, Value
from django.db.models.functions import Cast, Lower, Reverse
from django.urls import reverse

from graphadmin.models import Node
from graphadmin.notes.text import NoteLink, NoteRef, Resolve, render
from graphadmin.vault.parse import NOTE_SUFFIX, Resolver

# Links past this many distinct targets in one note are left unresolved (the query stays bounded).
MAX_LINK_TARGETS = 500


def _vault_path(path: str) -> str:
    # As Resolver.resolve reads a target: no leading '/', no '.md'.
    path = path.strip().lstrip("/")
    return path[: -len(NOTE_SUFFIX)] if path.lower().endswith(NOTE_SUFFIX) else path


def candidate_filter(refs: list[NoteRef], source_key: str) -> Q:
    """Nodes that any of ``refs`` could name: a superset of what ``Resolver`` may pick, for one query.

    Over the annotations of ``_annotated``: the lowercased key (exact paths, and paths relative to the
    note's folder for markdown links), the lowercased last part of the key (names: ``Resolver`` keeps
    those whose path ends as the link says) and the lowercased aliases (JSON ``?|``: plain equality,
    no pattern matching, so the scan stays cheap).
    """
    exact, names, aliases = set(), set(), set()
    for ref in refs:
        path = _vault_path(ref.path)
        if not path:
            continue
        exact.add(path.lower())
        if ref.style == "md" or path.startswith("."):
            relative = posixpath.normpath(posixpath.join(posixpath.dirname(source_key), path))
            if not relative.startswith(".."):
                exact.add(relative.lower())
        names.add(path.rsplit("/", 1)[-1].lower())
        aliases.add(ref.path.strip().lower())
    return Q(lkey__in=sorted(exact)) | Q(lname__in=sorted(names)) | Q(laliases__has_any_keys=sorted(aliases))


def _annotated(graph_id: int):
    # The key's last part is reverse(split_part(reverse(key), '/', 1)): 'Team A/Standup' -> 'Standup'.
    last_part = Func(Reverse("key"), Value("/"), Value(1), function="split_part", output_field=TextField())
    return Node.objects.filter(graph_id=graph_id, archived=False).annotate(
        lkey=Lower("key"),
        lname=Lower(Reverse(last_part)),
        laliases=Cast(Lower(Cast("aliases", TextField())), JSONField()),
    )


def node_resolver(graph_id: int, source_key: str) -> Resolve:
    """A ``resolve`` for ``graphadmin.notes.text.render``: the note ``source_key``'s links, in one query."""

    def resolve(refs: list[NoteRef]) -> Mapping[NoteRef, NoteLink]:
        refs = refs[:MAX_LINK_TARGETS]
        rows = list(
            _annotated(graph_id).filter(candidate_filter(refs, source_key)).values_list("id", "key", "title", "aliases")
        )
        by_key = {key: (pk, title) for pk, key, title, _aliases in rows}
        resolver = Resolver(by_key, {key: list(aliases or []) for _pk, key, _title, aliases in rows}, [])
        links = {}
        for ref in refs:
            found = resolver.resolve(ref.path, source_key, ref.style)
            if found.key is not None:
                pk, title = by_key[found.key]
                links[ref] = NoteLink(reverse("node", args=[graph_id, pk]), title)
        return links

    return resolve


def render_node_text(node: Node) -> str:
    """The node's text as safe HTML with its links to other nodes of the graph resolved."""
    return render(node.text, node_resolver(node.graph_id, node.key))
