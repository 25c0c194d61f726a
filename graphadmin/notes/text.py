"""A node's text as safe HTML: markdown, with Obsidian wikilinks turned into links to node pages. No Django here.

``render(text, resolve)`` parses the text once with markdown-it-py (CommonMark, plus tables and
strikethrough), asks ``resolve`` once for every note the text links to, renders, and passes the
result through nh3 (the ammonia sanitiser) with an allow-list of tags, attributes and URL schemes.
Raw HTML in a note never reaches the page: the parser escapes it (``html`` off) and the sanitiser
would drop it anyway, as it drops ``javascript:`` URLs, event handlers and style sheets.

Links a note makes to other notes, as the vault importer reads them (``graphadmin.vault.parse``):

- ``[[Note]]``, ``[[Note|shown text]]``, ``[[Note#Heading]]``, ``[[Note#^block]]``, and embeds
  ``![[Note]]``, which become links (an embed is not inlined: it links to the note it would show);
- markdown links with a relative destination, ``[text](Folder/Note.md)``.

Each is handed to ``resolve`` as a ``NoteRef`` (the path without heading, block or URL encoding,
and the style, 'wiki' or 'md', which decides whether a path relative to the note's folder counts).
``resolve`` answers with a ``NoteLink`` for each ref it found; one it did not find is shown as a
``span.wikilink.unresolved`` titled "not in this graph". Links inside code spans and code blocks are
code, not links, as in Obsidian. ``[[#Heading]]`` (a heading of the same note) is shown as text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

from graphadmin.vault.parse import normalize_target

UNRESOLVED_TITLE = "not in this graph"

# The wikilink as the importer reads it (graphadmin.vault.parse._WIKILINK), anchored at the parser's position.
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


@dataclass(frozen=True)
class NoteRef:
    """A note named by a link: the path as written (without heading, block or URL encoding) and the link's style."""

    path: str
    style: str  # 'wiki' or 'md'


@dataclass(frozen=True)
class NoteLink:
    """Where a resolved link goes: the node page's URL and the node's title."""

    href: str
    title: str


Resolve = Callable[[list[NoteRef]], Mapping[NoteRef, NoteLink]]

# What may reach the page. Everything markdown-it renders from CommonMark + tables + strikethrough,
# less images (rendered as links: a note must not make the reviewer's browser fetch anything).
ALLOWED_TAGS = frozenset(
    "p br hr h1 h2 h3 h4 h5 h6 strong em del s code pre blockquote ul ol li a span table thead tbody tr th td".split()
)
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class"},
    "span": {"class", "title"},
    "code": {"class"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


def _wikilink_rule(state, silent: bool) -> bool:
    """Inline rule: ``[[...]]`` or ``![[...]]`` at the current position becomes one 'wikilink' token."""
    src, pos = state.src, state.pos
    if src[pos] not in "![" or not src.startswith("[[", pos + (src[pos] == "!")):
        return False
    match = _WIKILINK.match(src, pos)
    if not match:
        return False
    if not silent:
        # In a table cell the alias pipe is escaped: [[Note\|alias]].
        inner = match.group(2).replace("\\|", "|")
        target, _, alias = inner.partition("|")
        path, _, heading = target.partition("#")
        token = state.push("wikilink", "a", 0)
        token.content = match.group(0)
        token.meta = {
            "embed": bool(match.group(1)),
            "path": path.strip(),
            "heading": heading.strip(),
            "alias": alias.strip(),
        }
    state.pos = match.end()
    return True


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.add_render_rule("wikilink", _render_wikilink)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("link_close", _render_link_close)
    md.add_render_rule("image", _render_image)
    return md


def _unresolved(text: str) -> str:
    return f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">{escapeHtml(text)}</span>'


def _render_wikilink(self, tokens, idx, options, env) -> str:
    meta = tokens[idx].meta
    shown = meta["alias"] or " > ".join(p for p in (meta["path"], meta["heading"]) if p) or tokens[idx].content
    if not meta["path"]:
        return f'<span class="wikilink">{escapeHtml(shown)}</span>'  # a heading of this very note
    link = env["links"].get(meta["ref"])
    if link is None:
        return _unresolved(shown)
    kind = "wikilink embed" if meta["embed"] else "wikilink"
    title = f"Embedded note: {link.title}" if meta["embed"] else link.title
    return f'<a class="{kind}" href="{escapeHtml(link.href)}" title="{escapeHtml(title)}">{escapeHtml(shown)}</a>'


def _render_link_open(self, tokens, idx, options, env) -> str:
    token = tokens[idx]
    ref = token.meta.get("ref")
    if ref is None:
        return self.renderToken(tokens, idx, options, env)
    link = env["links"].get(ref)
    if link is None:
        return f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">'
    return f'<a class="wikilink" href="{escapeHtml(link.href)}" title="{escapeHtml(link.title)}">'


def _render_link_close(self, tokens, idx, options, env) -> str:
    ref = tokens[idx].meta.get("ref")
    if ref is not None and env["links"].get(ref) is None:
        return "</span>"
    return self.renderToken(tokens, idx, options, env)


def _render_image(self, tokens, idx, options, env) -> str:
    """An image as a link to it (a web image) or as an unresolved attachment (a file of the vault)."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    if _SCHEME.match(src):
        return f'<a class="image-link" href="{escapeHtml(src)}">{escapeHtml("Image: " + alt)}</a>'
    return _unresolved(alt)


_MD = _parser()


def _note_ref(href: str) -> NoteRef | None:
    """The note a markdown link's destination names, or None for a URL or a link within the page."""
    if not href or href.startswith("#") or _SCHEME.match(href):
        return None
    path = normalize_target(unquote(href), "md")
    return NoteRef(path, "md") if path else None


def _collect(tokens: Iterable) -> list[NoteRef]:
    """Every note the parsed text links to (in order, each once); marks the tokens with their ref."""
    refs: dict[NoteRef, None] = {}
    for block in tokens:
        if block.type != "inline" or not block.children:
            continue
        open_links = []
        for token in block.children:
            if token.type == "wikilink" and token.meta["path"]:
                path = normalize_target(token.meta["path"], "wiki")
                token.meta["ref"] = NoteRef(path, "wiki") if path else None
                if path:
                    refs.setdefault(token.meta["ref"])
            elif token.type == "link_open":
                ref = _note_ref(token.attrGet("href") or "")
                token.meta["ref"] = ref
                open_links.append(token)
                if ref:
                    refs.setdefault(ref)
            elif token.type == "link_close" and open_links:
                token.meta["ref"] = open_links.pop().meta.get("ref")
    return list(refs)


def note_refs(text: str) -> list[NoteRef]:
    """The notes ``text`` links to, as ``render`` would ask ``resolve`` about them."""
    return _collect(_MD.parse(text or "", {}))


def sanitize(html: str) -> str:
    """HTML reduced to the allow-list: no scripts, styles, event handlers or unsafe URLs survive."""
    return nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        filter_style_properties={"text-align"},
        link_rel="noopener noreferrer",
        strip_comments=True,
    )


def render(text: str, resolve: Resolve) -> str:
    """``text`` (markdown) as sanitised HTML, its links to notes resolved by one call of ``resolve``."""
    env: dict = {}
    tokens = _MD.parse(text or "", env)
    refs = _collect(tokens)
    env["links"] = dict(resolve(refs)) if refs else {}
    return sanitize(_MD.renderer.render(tokens, _MD.options, env))
