"""Read an Obsidian vault (a folder or a zip) and resolve its links. Pure Python: no Django here.

The entry point is ``parse_vault(path_or_file)``, which returns a ``ParsedVault``: one ``Note`` per
markdown file, the resolved ``Link``s between them, the unresolved links with a reason, and
per-file warnings. Nothing here touches the database, so every rule is unit-testable.

Resolution follows Obsidian: the exact vault path first (with or without ``.md``, then
case-insensitively, then relative to the linking note's folder for markdown links), then the notes
whose file name (or path ending) matches, case-insensitively, chosen by ``pick_nearest`` (the one in
the linking note's own folder, else the one with the shortest path; equal shortest paths are a true
tie, reported as ambiguous), then a unique alias (the importer's own addition: Obsidian itself does
not resolve links by alias).

Besides links, a note's body gives tags (``#tag``, ``#nested/tag``) and typed links from Dataview
inline fields: the full-line ``key:: [[X]]``, the bracketed ``[key:: [[X]]]`` and the
parenthesised ``(key:: [[X]])``.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import os
import posixpath
import re
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import unquote

import yaml

from graphadmin.errors import InputError

# Limits (documented in docs/import.md). A single note over MAX_NOTE_BYTES is skipped with a
# warning; an archive over the others is refused whole.
MAX_NOTE_BYTES = 2 * 1024 * 1024
MAX_ARCHIVE_BYTES = 50 * 1024 * 1024
MAX_UNCOMPRESSED_BYTES = 500 * 1024 * 1024
MAX_FILES = 50_000

NOTE_SUFFIX = ".md"
# Properties with a meaning of their own; any other frontmatter property whose value holds links
# becomes a typed edge named after the property.
RESERVED_PROPERTIES = frozenset(
    {"title", "aliases", "alias", "tags", "tag", "type", "kind", "cssclasses", "cssclass", "publish"}
)
# Obsidian's attachment formats, and other files a vault commonly links to.
ATTACHMENT_SUFFIXES = frozenset(
    ".png .jpg .jpeg .gif .bmp .svg .webp .avif .tif .tiff .ico .heic .mp3 .wav .m4a .ogg .flac .3gp .webm .mp4 "
    ".ogv .mov .mkv .avi .pdf .canvas .base .excalidraw .zip .csv .tsv .json .txt .xlsx .xls .docx .doc .pptx "
    ".ppt .odt .ods .html .htm".split()
)
EDGE_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,99}$")
EDGE_TYPE_NAME_RULE = "A lower-case letter, then up to 99 lower-case letters, digits or underscores (derived_from)."

# A node key is a vault path without ".md" (what the importer makes of a note's path, and where the
# exporter writes it): checked for keys given through the API (agent-written memory).
KEY_MAX_CHARS = 500
_KEY_FORBIDDEN = re.compile(r'[\\:*?"<>|#^\[\]\x00-\x1f\x7f]')
KEY_RULE = (
    "A vault path without .md: names separated by '/', none empty, none starting with '.', without "
    'the characters \\ : * ? " < > | # ^ [ ] or control characters; at most 500 characters.'
)


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be a node key (KEY_RULE), or None when it can."""
    if not key or len(key) > KEY_MAX_CHARS or _KEY_FORBIDDEN.search(key) or key.lower().endswith(NOTE_SUFFIX):
        return KEY_RULE
    if any(not part.strip() or part.startswith(".") or part != part.strip() for part in key.split("/")):
        return KEY_RULE
    return None


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_COMMENT = re.compile(r"%%.*?%%", re.DOTALL)
_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# A markdown link [label](destination "title") is read in parts so a line is scanned in linear time:
# the label by one regex (possessive: the label can only end at its one unpaired ']', so nothing is
# lost by never backtracking), the destination and the rest by _md_destination, which remembers the
# bare run, the next '>' and each tail it has already read (one regex over the whole link re-read the
# rest of the line from every '[': quadratic on a long line of '[a](', docs/import.md).
_MD_LABEL = re.compile(r"(!?)\[((?:[^\[\]\n]++|\[[^\[\]\n]*+\])*+)\]\(")
_MD_SPACES = re.compile(r"\s*+")
_MD_BARE = re.compile(r"[^)\s]++")
_MD_TAIL = re.compile(r"(?:\s++(?:\"[^\"\n]*+\"|'[^'\n]*+'))?\s*+\)")
_INLINE_FIELD = re.compile(r"^\s*(?:[-*+]\s+)?([A-Za-z_][A-Za-z0-9_\- ]{0,98})::\s*(.*)$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
# A body tag: '#' at the start of a line or after whitespace, then letters, digits, '_', '-' and '/'
# (Obsidian's tag characters); '#a#b' is two tags. '# Heading' is a heading: no tag character follows.
_TAG_RUN = re.compile(r"(?<!\S)((?:#[\w/\-]+)+)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
# Dataview's inline field wrappers: [key:: value] (key shown) and (key:: value) (key hidden).
_FIELD_WRAPPERS = {"[": "]", "(": ")"}
# Like Dataview, longer lines are not searched for bracketed fields.
MAX_FIELD_LINE = 32768


class _NoAliasLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors and aliases (``&a`` / ``*a``).

    Refused when the document is composed, before anything is built: a few hundred bytes of nested
    aliases (a "billion laughs") otherwise expand into gigabytes once read. Obsidian never writes them.
    """

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _AliasRefused(f"anchors and aliases are not allowed (line {event.start_mark.line + 1})")
        return super().compose_node(parent, index)


class _AliasRefused(yaml.YAMLError):
    pass


def load_frontmatter(raw: str):
    """The frontmatter's YAML: plain values, lists and mappings only (no tags beyond YAML's, no aliases)."""
    return yaml.load(raw, Loader=_NoAliasLoader)  # a SafeLoader subclass: as safe as yaml.safe_load


# Frontmatter values read as text; a list or mapping is never turned into text.
_SCALARS = (str, int, float, date)


class VaultError(InputError):
    """The whole input is refused (not a vault, unsafe archive, empty vault): nothing is imported.

    An InputError on the upload's ``file`` field (the API's 400); ``str()`` is the reason alone.
    """

    def __init__(self, message: str):
        super().__init__({"file": [message]})
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SourceFile:
    """One file of the vault: its vault-relative POSIX path and how to read its bytes.

    ``read``: reads the note's bytes when called (at most MAX_NOTE_BYTES + 1 of them), so a vault is read
    one note at a time; None for attachments (only their names matter) and for notes skipped before
    reading (``skip_reason``).
    """

    path: str
    read: Callable[[], bytes] | None = None
    skip_reason: str = ""


class TextSpool:
    """Note bodies kept in a temporary file rather than in memory, so a parsed vault holds its notes'
    metadata and links, not their texts. Bodies up to INLINE_CHARS stay in memory (most notes: no file
    is created for a small vault). The file goes away when the spool is closed or collected."""

    INLINE_CHARS = 64 * 1024

    def __init__(self):
        self._file = None

    def keep(self, text: str) -> str | SpooledText:
        if len(text) <= self.INLINE_CHARS:
            return text
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="vault-notes-")
        data = text.encode("utf-8")
        offset = self._file.seek(0, io.SEEK_END)
        self._file.write(data)
        return SpooledText(self, offset, len(data))

    def read(self, offset: int, size: int) -> str:
        if self._file is None:
            raise ValueError("The parsed vault was closed: its spooled note bodies are gone.")
        self._file.seek(offset)
        return self._file.read(size).decode("utf-8")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(frozen=True)
class SpooledText:
    """A note body in a TextSpool: ``read()`` gives it back; ``size`` is its length in UTF-8 bytes."""

    spool: TextSpool
    offset: int
    size: int

    def read(self) -> str:
        return self.spool.read(self.offset, self.size)


def body_text(body: str | SpooledText) -> str:
    """A body as text, read from its spool when it was spooled."""
    return body if isinstance(body, str) else body.read()


def body_size(body: str | SpooledText) -> int:
    """About how many bytes a body holds (its characters when in memory), without reading it."""
    return len(body) if isinstance(body, str) else body.size


@dataclass
class Note:
    """One markdown file as a node: key (path without .md), title, kind, body, aliases, tags, hash.

    ``body``: the text, or where a TextSpool keeps it (``text`` reads it either way)."""

    key: str
    path: str
    title: str
    kind: str
    body: str | SpooledText
    aliases: list[str]
    tags: list[str]
    content_hash: str
    raw_links: list[tuple[str, str, str]] = field(default_factory=list)  # (target text, edge type, style)

    @property
    def text(self) -> str:
        return body_text(self.body)


@dataclass(frozen=True)
class Link:
    """A resolved link: source key -> target key with an edge type."""

    source: str
    target: str
    edge_type: str


NO_SUCH_NOTE = "no such note"
AMBIGUOUS = "ambiguous"
ATTACHMENT_MISSING = "attachment missing"
# The order unresolved links are grouped in (any other reason, such as 'empty link', comes after).
UNRESOLVED_REASONS = (NO_SUCH_NOTE, AMBIGUOUS, ATTACHMENT_MISSING)


@dataclass(frozen=True)
class Unresolved:
    """A link that names no note of the vault, names several, or names an attachment the vault lacks.

    Reported, never dropped silently. ``candidates``: for ``ambiguous``, the notes tied for the link.
    """

    source: str
    target: str
    edge_type: str
    reason: str
    candidates: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "target": self.target,
            "edge_type": self.edge_type,
            "reason": self.reason,
            "candidates": list(self.candidates),
        }


def group_unresolved(unresolved: Iterable[dict]) -> list[dict]:
    """Unresolved links (as dicts) grouped by reason: ``[{"reason", "count", "links"}]``.

    Groups come in the order of UNRESOLVED_REASONS, then any other reason in order of appearance;
    links keep their order; a reason without links has no group.
    """
    groups: dict[str, list[dict]] = {reason: [] for reason in UNRESOLVED_REASONS}
    for item in unresolved:
        groups.setdefault(item["reason"], []).append(item)
    return [{"reason": reason, "count": len(links), "links": links} for reason, links in groups.items() if links]


@dataclass
class ParsedVault:
    """The notes, resolved links, unresolved links, skipped files and warnings of one vault."""

    notes: dict[str, Note]
    links: list[Link]
    unresolved: list[Unresolved]
    skipped: list[str]  # keys of notes present but unreadable: their stored nodes are left alone
    warnings: list[str]
    attachments: int = 0
    attachment_links: int = 0
    missing: dict[str, str] = field(default_factory=dict)  # --create-missing: key -> title of placeholder notes
    spool: TextSpool | None = None  # where the notes' large bodies are (parse_vault)

    def close(self) -> None:
        """Remove the spooled bodies (the notes' texts are no longer readable)."""
        if self.spool is not None:
            self.spool.close()


# ---------------------------------------------------------------------------------------------
# Reading: a folder or a zip, with every safety check before anything is parsed.


def read_source(source: str | Path | BinaryIO, stack: ExitStack | None = None) -> list[SourceFile]:
    """Every non-hidden file of a vault folder or zip (path or file object), safety-checked.

    Nothing is read yet: each note's ``read`` reads it (parse_vault, one note at a time). A zip opened
    here is closed by ``stack`` when given (else when collected)."""
    if not isinstance(source, (str, Path)):
        return read_zip(source)
    path = Path(source)
    if path.is_dir():
        return read_directory(path)
    if path.is_file() and zipfile.is_zipfile(path):
        fh = open(path, "rb")  # noqa: SIM115 - closed by the stack: the notes are read from it later
        if stack is not None:
            stack.callback(fh.close)
        return read_zip(fh)
    if not path.exists():
        raise VaultError(f"{path} does not exist.")
    raise VaultError(f"{path} is neither a directory nor a zip archive.")


def _hidden(parts: Iterable[str]) -> bool:
    # .obsidian (settings), .trash (Obsidian's bin), .git and the like are not notes.
    return any(p.startswith(".") for p in parts)


def _file_reader(full: Path) -> Callable[[], bytes]:
    def read() -> bytes:
        with open(full, "rb") as fh:
            return fh.read(MAX_NOTE_BYTES + 1)  # its real size, whatever stat said

    return read


def read_directory(root: Path) -> list[SourceFile]:
    """Walk a vault folder. A symlink leading out of the vault refuses the import; one inside is skipped."""
    root = root.resolve()
    files: list[SourceFile] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(dirnames) + sorted(filenames):
            full = Path(dirpath) / name
            rel = (rel_dir / name).as_posix()
            if full.is_symlink():
                target = full.resolve()
                if not target.is_relative_to(root):
                    raise VaultError(f"{rel} is a symlink out of the vault (to {target}); refusing to import.")
                if name in filenames and name.lower().endswith(NOTE_SUFFIX):
                    files.append(SourceFile(rel, None, "a symlink (not followed)"))
                continue
            if name not in filenames or name.startswith("."):
                continue
            if len(files) >= MAX_FILES:
                raise VaultError(f"The vault has more than {MAX_FILES} files.")
            if not rel.lower().endswith(NOTE_SUFFIX):
                files.append(SourceFile(rel))  # attachments: only their names matter
            elif full.stat().st_size > MAX_NOTE_BYTES:
                files.append(SourceFile(rel, None, _TOO_BIG))
            else:
                files.append(SourceFile(rel, _file_reader(full)))
    return files


_TOO_BIG = "too large"


def _safe_member_name(name: str) -> str:
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise VaultError(f"Archive entry '{name}' has an absolute path; refusing to import.")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise VaultError(f"Archive entry '{name}' escapes the vault root; refusing to import.")
    return "/".join(parts)


def read_zip(fileobj: BinaryIO) -> list[SourceFile]:
    """Read a zipped vault's directory. Entries escaping the root, symlinks and oversize archives refuse it
    whole; each note is read later, by its ``read``, from ``fileobj`` (which must stay open until then)."""
    fileobj.seek(0, io.SEEK_END)
    if fileobj.tell() > MAX_ARCHIVE_BYTES:
        raise VaultError(f"The archive is larger than {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB.")
    fileobj.seek(0)
    try:
        archive = zipfile.ZipFile(fileobj)
    except zipfile.BadZipFile as exc:
        raise VaultError(f"Not a zip archive: {exc}") from exc
    entries = _zip_entries(archive)
    names = [n for n, _ in entries if not _hidden(n.split("/"))]
    prefix = _common_root(names)
    files = []
    for name, info in entries:
        if _hidden(name.split("/")):
            continue
        rel = name[len(prefix) :] if prefix else name
        if not rel.lower().endswith(NOTE_SUFFIX):
            files.append(SourceFile(rel))
        elif info.file_size > MAX_NOTE_BYTES:
            files.append(SourceFile(rel, None, _TOO_BIG))
        else:
            files.append(SourceFile(rel, _member_reader(archive, info)))
    return files


def _zip_entries(archive: zipfile.ZipFile) -> list[tuple[str, zipfile.ZipInfo]]:
    """(safe name, info) of each file entry; refuses the archive for too many entries, an entry escaping
    the root or a symlink, or headers adding up to more than MAX_UNCOMPRESSED_BYTES."""
    infos = archive.infolist()
    if len(infos) > MAX_FILES:
        raise VaultError(f"The archive has more than {MAX_FILES} entries.")
    entries, total = [], 0
    for info in infos:
        name = _safe_member_name(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise VaultError(f"Archive entry '{info.filename}' is a symlink; refusing to import.")
        if info.is_dir() or not name:
            continue
        total += info.file_size
        if total > MAX_UNCOMPRESSED_BYTES:
            raise VaultError(f"The archive unpacks to more than {MAX_UNCOMPRESSED_BYTES // (1024 * 1024)} MiB.")
        entries.append((name, info))
    return entries


def _member_reader(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Callable[[], bytes]:
    return lambda: _read_member(archive, info)


def zip_extent(fileobj: BinaryIO) -> tuple[int, int] | None:
    """(bytes its notes unpack to, number of notes) of a zipped vault, from its central directory alone
    (nothing is unpacked); None when it is not a zip (the parser refuses it).

    The header sizes are what reading can yield: ``zipfile`` stops an entry at its header's size
    and refuses one whose data does not match it (``_read_member``). A note counts at most
    MAX_NOTE_BYTES + 1, as ``read_zip`` reads it; other files are not read.
    """
    fileobj.seek(0)
    try:
        with zipfile.ZipFile(fileobj) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    finally:
        fileobj.seek(0)
    notes = [
        i
        for i in infos
        if not i.is_dir() and i.filename.lower().endswith(NOTE_SUFFIX) and not _hidden(i.filename.split("/"))
    ]
    return sum(min(i.file_size, MAX_NOTE_BYTES + 1) for i in notes), len(notes)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    """An entry's bytes, at most MAX_NOTE_BYTES + 1 of them (never trust the header's size).

    An entry whose data does not match its header (a size or CRC that lies, a truncated or corrupt
    stream, an unsupported compression) refuses the archive, naming the entry, instead of a 500.
    """
    try:
        with archive.open(info) as member:
            return member.read(MAX_NOTE_BYTES + 1)
    # zipfile's own errors for such entries: BadZipFile (a CRC or size that lies), zlib.error and EOFError (a
    # corrupt or truncated stream), NotImplementedError (a compression method it cannot read), RuntimeError
    # (an encrypted entry).
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        raise VaultError(f"Archive entry '{info.filename}' is damaged or does not match its header: {exc}") from exc


def _common_root(names: list[str]) -> str:
    """'Vault/' when every entry lies in one top folder (a zipped vault folder), else ''."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names):
        return tops.pop() + "/"
    return ""


# ---------------------------------------------------------------------------------------------
# Parsing one note.


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """(frontmatter YAML or None, body). Frontmatter is a leading block between '---' lines."""
    if not text.startswith("---"):
        return None, text
    lines = text.split("\n")
    if lines[0].rstrip() != "---":
        return None, text
    for i in range(1, len(lines)):
        if lines[i].rstrip() in ("---", "..."):
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]).lstrip("\n")
    return None, text


def strip_code(body: str) -> str:
    """The body with fenced code blocks, code spans and %% comments %% blanked: links there are not links."""
    out, fence = [], None
    for line in body.split("\n"):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            out.append("")
            continue
        if fence is not None:
            if (
                match
                and match.group(1)[0] == fence[0]
                and len(match.group(1)) >= len(fence)
                and not line.strip()[len(match.group(1)) :].strip()
            ):
                fence = None
            out.append("")
            continue
        out.append(line)
    text = "\n".join(out)
    text = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def edge_type_name(prop: str) -> str:
    """'Derived From', 'derived-from' and 'derived_from' are all the edge type 'derived_from'."""
    return re.sub(r"[\s\-]+", "_", prop.strip()).lower()


def _wikilink_target(inner: str) -> str:
    # [[Target|shown]] (in tables the pipe is escaped as \|)
    return inner.replace("\\|", "|").split("|", 1)[0].strip()


def inline_fields(line: str) -> list[tuple[int, int, str]]:
    """(start, end, key) of each Dataview bracketed ``[key:: value]`` or parenthesised ``(key:: value)`` field.

    As Dataview reads them: from an opening ``[`` or ``(``, a key without brackets up to ``::``, then
    the value up to the matching closing bracket (nested pairs and backslash escapes respected), so
    ``[depends_on:: [[A]], [[B]]]`` is one field holding two links. Linear (up to a log factor) in the
    line's length: separators, brackets and each bracket depth are indexed once, not rescanned per ``[``.
    """
    separators = []
    at = line.find("::")
    while at >= 0:
        separators.append(at)
        at = line.find("::", at + 1)
    brackets = [i for i, char in enumerate(line) if char in "[]()"]
    fields = []
    for opening, closing in _FIELD_WRAPPERS.items():
        start = line.find(opening)
        if start < 0:
            continue
        depths = _depth_index(line, opening, closing)
        while start >= 0:
            end, key = _inline_field_at(line, start, separators, brackets, depths)
            if end is None:
                start = line.find(opening, start + 1)
                continue
            fields.append((start, end, key))
            start = line.find(opening, end)
    return sorted(fields)


def _depth_index(line: str, opening: str, closing: str) -> tuple[list[int], dict[int, list[int]]]:
    """depth[i]: unescaped openings minus closings before i; where: depth -> every i at that depth, ascending."""
    depth, escaped, running = [0], False, 0
    for char in line:
        if char == "\\":
            escaped = not escaped
        elif escaped:
            escaped = False
        elif char == opening:
            running += 1
        elif char == closing:
            running -= 1
        depth.append(running)
    where: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        where.setdefault(d, []).append(i)
    return depth, where


def _inline_field_at(
    line: str, start: int, separators: list[int], brackets: list[int], depths
) -> tuple[int | None, str]:
    # The first '::' after the opening; the key between them holds no bracket; the value ends at the
    # first closing that takes the depth below the depth where the value starts.
    k = bisect.bisect_left(separators, start + 1)
    if k == len(separators):
        return None, ""
    separator = separators[k]
    b = bisect.bisect_right(brackets, start)
    if b < len(brackets) and brackets[b] < separator:
        return None, ""
    key = line[start + 1 : separator].strip()
    if not key:
        return None, ""
    # The value is read from separator + 2, after a ':', so no backslash run crosses its start and the
    # line-wide escape state equals the one a scan starting there would have.
    depth, where = depths
    value = separator + 2
    below = where.get(depth[value] - 1, [])
    j = bisect.bisect_right(below, value)
    if j == len(below):
        return None, ""
    return below[j], key


def _field_type(key: str) -> str:
    name = edge_type_name(key)
    return name if EDGE_TYPE_NAME.match(name) else "related"


def extract_links(body: str) -> list[tuple[str, str, str]]:
    """(target, edge type, style) for every link of a body: 'wiki' or 'md' style; inline fields typed.

    A link inside a bracketed or parenthesised field takes the field's type; on a line without
    such fields, a full-line ``key:: value`` field types every link of the line (Dataview reads a
    line's full-line field only when it has no bracketed one); any other link is ``related``.
    """
    return _links_of(strip_code(body))


def _links_of(text: str) -> list[tuple[str, str, str]]:
    # extract_links on a body whose code and comments are already blanked.
    links: list[tuple[str, str, str]] = []
    for line in text.split("\n"):
        fields = inline_fields(line) if "::" in line and len(line) <= MAX_FIELD_LINE else []
        index = _field_index(fields)
        line_type = "related"
        if not fields:
            match = _INLINE_FIELD.match(line)
            if match:
                line_type = _field_type(match.group(1))

        for m in _WIKILINK.finditer(line):
            links.append((_wikilink_target(m.group(2)), _type_at(index, m.start(2), line_type), "wiki"))
        for target, position in md_links(line):
            # The destination's position decides: '[std::vector](X.md)' is a link, not a field's value.
            links.append((target, _type_at(index, position, line_type), "md"))
    return links


def md_links(line: str) -> list[tuple[str, int]]:
    """(destination, its position) of each markdown link ``[label](destination "title")`` of one line.

    ``<destination>`` is returned without its angle brackets. Linear in the line's length.
    """
    found: list[tuple[str, int]] = []
    memo = _MdMemo()
    pos = 0
    while (m := _MD_LABEL.search(line, pos)) is not None:
        start = _MD_SPACES.match(line, m.end()).end()
        link = memo.destination(line, start)
        if link is None:
            pos = m.start() + 1
            continue
        target, end = link
        found.append((target, start))
        pos = end
    return found


class _MdMemo:
    """What _md_destination has read of one line, so no part of it is read twice."""

    def __init__(self):
        self.bare = (-1, -1)  # (start, end) of the last bare destination run read
        self.gt_from, self.gt = None, -1  # the first '>' at or after gt_from (-1: none); None: not read
        self.tails: dict[int, int | None] = {}  # tail start -> end of the link, or None: no link

    def tail(self, line: str, at: int) -> int | None:
        if at not in self.tails:
            m = _MD_TAIL.match(line, at)
            self.tails[at] = m.end() if m else None
        return self.tails[at]

    def next_gt(self, line: str, at: int) -> int:
        if self.gt_from is None or at < self.gt_from or -1 < self.gt < at:
            self.gt_from, self.gt = at, line.find(">", at)
        return self.gt

    def destination(self, line: str, start: int) -> tuple[str, int] | None:
        # '<destination>' first, then a bare run without ')' or whitespace, as the one regex tried them.
        if start < len(line) and line[start] == "<":
            gt = self.next_gt(line, start + 1)
            if gt > start + 1 and (end := self.tail(line, gt + 1)) is not None:
                return line[start + 1 : gt], end
        run_start, run_end = self.bare
        if not run_start <= start < run_end:
            m = _MD_BARE.match(line, start)
            if m is None:
                return None
            run_start, run_end = self.bare = (start, m.end())
        end = self.tail(line, run_end)
        return (line[start:run_end], end) if end is not None else None


def _type_at(index, pos: int, line_type: str) -> str:
    # The innermost field holding the position, else the line's type. Fields of one wrapper never
    # overlap (the next is searched from the previous one's end), so per wrapper only the last field
    # starting before the position can hold it: two bisections instead of a scan of every field.
    inside = []
    for starts, run in index:
        i = bisect.bisect_left(starts, pos) - 1
        if i >= 0 and pos < run[i][1]:
            start, end, key = run[i]
            inside.append((end - start, key))
    return _field_type(min(inside)[1]) if inside else line_type


def _field_index(fields: list[tuple[int, int, str]]) -> list[tuple[list[int], list[tuple[int, int, str]]]]:
    # The (sorted) fields split into runs that do not overlap, each with its starts: at most two runs,
    # since at most one field per wrapper holds any position.
    runs: list[list[tuple[int, int, str]]] = []
    for field_ in fields:
        for run in runs:
            if run[-1][1] <= field_[0]:
                run.append(field_)
                break
        else:
            runs.append([field_])
    return [([f[0] for f in run], run) for run in runs]


def extract_tags(body: str) -> list[str]:
    """The body's tags, without '#', in order of appearance, each once (case-insensitively, as Obsidian).

    Read as Obsidian does: ``#tag`` and ``#nested/tag`` at the start of a line or after whitespace,
    with at least one character that is not a digit (``#1984`` is no tag). Not read: code spans,
    fenced code, ``%% comments %%`` and HTML comments; ``# Heading`` (the heading marker) and
    ``[[Note#Heading]]``, ``https://x/#anchor`` (no whitespace before the '#'). A tag written in a
    heading's text (``## Plan #project``) is a tag, as in Obsidian.
    """
    return _tags_of(strip_code(body))


def _tags_of(text: str) -> list[str]:
    # extract_tags on a body whose code and comments are already blanked.
    if "#" not in text:
        return []
    if "<!--" in text:
        text = _HTML_COMMENT.sub(" ", text)
    tags: list[str] = []
    seen: set[str] = set()
    for run in _TAG_RUN.finditer(text):
        for tag in run.group(1).split("#")[1:]:
            tag = tag.rstrip("/")  # '#a/#b' is the tags 'a' and 'b'
            if not tag or tag.isdigit() or tag.lower() in seen:
                continue
            seen.add(tag.lower())
            tags.append(tag)
    return tags


def _strings(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            # Unquoted YAML `[[Note]]` parses as a nested list: read it as the link it was meant to be.
            if isinstance(item, list) and len(item) == 1 and isinstance(item[0], str):
                out.append(f"[[{item[0]}]]")
            elif isinstance(item, _SCALARS):
                out.append(str(item))
        return out
    # A plain value is read as text; a mapping (or anything else) never is.
    return [str(value)] if isinstance(value, _SCALARS) else []


def frontmatter_links(meta: dict) -> list[tuple[str, str, str]]:
    """Typed links from frontmatter properties whose values are wikilinks (or lists of them)."""
    links = []
    for prop, value in meta.items():
        if not isinstance(prop, str) or prop.lower() in RESERVED_PROPERTIES:
            continue
        name = edge_type_name(prop)
        if not EDGE_TYPE_NAME.match(name):
            continue
        for text in _strings(value):
            for m in _WIKILINK.finditer(text):
                links.append((_wikilink_target(m.group(2)), name, "wiki"))
    return links


def _clean_list(value, strip_hash: bool = False) -> list[str]:
    items = []
    for item in _strings(value):
        for part in item.split(",") if strip_hash else [item]:
            part = part.strip()
            if strip_hash:
                part = part.lstrip("#")
            if part and part not in items:
                items.append(part)
    return items


def _merge_tags(frontmatter: list[str], body: list[str]) -> list[str]:
    # Frontmatter tags first, then body tags not already there (tags are case-insensitive).
    seen = {t.lower() for t in frontmatter}
    return frontmatter + [t for t in body if t.lower() not in seen]


def parse_note(path: str, data: bytes, warnings: list[str], spool: TextSpool | None = None) -> Note | None:
    """One note from its vault path and bytes, or None (with a warning) when it cannot be read.

    With a ``spool``, a large body is kept there rather than in the note."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: not UTF-8 ({exc.reason} at byte {exc.start}); skipped.")
        return None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    raw_meta, body = split_frontmatter(text)
    meta: dict = {}
    if raw_meta is not None:
        try:
            loaded = load_frontmatter(raw_meta)
        except _AliasRefused as exc:
            warnings.append(f"{path}: frontmatter refused: {exc}; imported without it.")
            loaded = None
        except yaml.YAMLError as exc:
            warnings.append(f"{path}: frontmatter is not valid YAML ({str(exc).splitlines()[0]}); imported without it.")
            loaded = None
        if isinstance(loaded, dict):
            meta = loaded
        elif loaded is not None:
            warnings.append(f"{path}: frontmatter is not a mapping; imported without it.")
    stripped = strip_code(body)  # links, fields and tags in code and comments do not count
    key = path[: -len(NOTE_SUFFIX)]
    stem = PurePosixPath(key).name
    parts = key.split("/")
    title, kind = meta.get("title"), meta.get("type") or meta.get("kind")
    for name, value in (("title", title), ("type", kind)):
        if value is not None and not isinstance(value, _SCALARS):
            warnings.append(f"{path}: frontmatter '{name}' is a {type(value).__name__}, not text; ignored.")
    title = title if isinstance(title, _SCALARS) else None
    kind = kind if isinstance(kind, _SCALARS) else None
    if not kind:
        kind = parts[0] if len(parts) > 1 else "note"
    note = Note(
        key=key,
        path=path,
        title=str(title).strip()[:500] if title else stem[:500],
        kind=re.sub(r"[^a-z0-9_\-]+", "-", str(kind).strip().lower()).strip("-")[:50] or "note",
        body=spool.keep(body) if spool is not None else body,
        aliases=_clean_list(meta.get("aliases", meta.get("alias"))),
        tags=_merge_tags(_clean_list(meta.get("tags", meta.get("tag")), strip_hash=True), _tags_of(stripped)),
        content_hash=hashlib.sha256(data).hexdigest(),
    )
    note.raw_links = frontmatter_links(meta) + _links_of(stripped)
    return note


# ---------------------------------------------------------------------------------------------
# Resolution.


def pick_nearest(candidates: Iterable[str], source_key: str) -> tuple[str | None, list[str]]:
    """Obsidian's choice among the notes a link's name (or path ending) matches: (key, []) or (None, tied).

    The rule, observed in Obsidian 1.13.7 through ``app.metadataCache.getFirstLinkpathDest``:

    1. the candidate in the linking note's own folder (an ancestor folder counts for nothing);
    2. otherwise the candidate with the shortest vault path (in characters, not folder depth);
    3. several candidates of that shortest length are a true tie (Obsidian's pick among them is not
       stable), reported as ambiguous with the tied notes.

    (An exact vault path wins before this is asked: see ``Resolver.resolve``.)
    """
    pool = sorted(set(candidates))
    if len(pool) <= 1:
        return (pool[0] if pool else None), []
    folder = posixpath.dirname(source_key)
    own = [key for key in pool if posixpath.dirname(key) == folder]
    if len(own) == 1:
        return own[0], []
    pool = own or pool  # two in the own folder (names differing only in case) tie among themselves
    shortest = min(len(key) for key in pool)
    best = [key for key in pool if len(key) == shortest]
    return (best[0], []) if len(best) == 1 else (None, best)


@dataclass(frozen=True)
class Resolution:
    """What a link names: ``key`` when resolved, else ``reason`` (and the tied ``candidates``)."""

    key: str | None
    reason: str = ""
    candidates: tuple[str, ...] = ()


class Resolver:
    """Resolves link text to a note key the way Obsidian does (see the module docstring)."""

    def __init__(self, keys: Iterable[str], aliases: dict[str, list[str]], other_files: Iterable[str]):
        self.keys = set(keys)
        self.by_lower: dict[str, list[str]] = {}
        self.by_name: dict[str, list[str]] = {}  # lowercased file name -> keys: also the path-ending index
        self.by_alias: dict[str, list[str]] = {}
        for key in sorted(self.keys):
            self.by_lower.setdefault(key.lower(), []).append(key)
            self.by_name.setdefault(PurePosixPath(key).name.lower(), []).append(key)
        for key, names in aliases.items():
            for alias in names:
                bucket = self.by_alias.setdefault(alias.strip().lower(), [])
                if key not in bucket:
                    bucket.append(key)
        other_files = list(other_files)
        self.other_files = {f.lower() for f in other_files}
        self.other_names = {PurePosixPath(f).name.lower() for f in other_files}

    def attachment(self, target: str) -> str | None:
        """For a link to a file that is not a note: 'present' or ATTACHMENT_MISSING; None for a note link.

        A file of the vault with that path or name is present; a missing file counts only when its
        suffix is a known attachment format ('Release 1.2' is a note name with a dot).
        """
        suffix = PurePosixPath(target).suffix.lower()
        if not suffix or suffix == NOTE_SUFFIX:
            return None
        low = target.lower()
        if low in self.other_files or PurePosixPath(low).name in self.other_names:
            return "present"
        if suffix in ATTACHMENT_SUFFIXES and self._exact(target) is None:
            return ATTACHMENT_MISSING
        return None

    def _exact(self, path: str) -> str | None:
        if path in self.keys:
            return path
        hits = self.by_lower.get(path.lower(), [])
        return hits[0] if len(hits) == 1 else None

    def _by_name(self, path: str) -> list[str]:
        """Notes named like the link's last part; for 'Folder/Note', those whose path ends so."""
        low = path.lower()
        name = low.rsplit("/", 1)[-1]
        candidates = self.by_name.get(name, [])
        if "/" in low:
            candidates = [k for k in candidates if k.lower().endswith("/" + low)]
        return candidates

    def resolve(self, target: str, source_key: str, style: str) -> Resolution:
        """What ``target``, written in the note ``source_key`` as a 'wiki' or 'md' link, names."""
        path = target.strip().lstrip("/")
        if path.lower().endswith(NOTE_SUFFIX):
            path = path[: -len(NOTE_SUFFIX)]
        if not path:
            return Resolution(None, "empty link")
        # 1. The exact vault path (then, for markdown links, relative to the linking note's folder).
        hit = self._exact(path)
        if hit:
            return Resolution(hit)
        if style == "md" or path.startswith("."):
            relative = posixpath.normpath(posixpath.join(posixpath.dirname(source_key), path))
            if not relative.startswith(".."):
                hit = self._exact(relative)
                if hit:
                    return Resolution(hit)
        # 2. The file name (or path ending for 'Folder/Note'), case-insensitively: own folder, then shortest path.
        hit, tied = pick_nearest(self._by_name(path), source_key)
        if hit:
            return Resolution(hit)
        # 3. A unique alias.
        by_alias = self.by_alias.get(target.strip().lower(), [])
        if len(by_alias) == 1:
            return Resolution(by_alias[0])
        if tied:
            return Resolution(None, AMBIGUOUS, tuple(tied))
        if len(by_alias) > 1:
            return Resolution(None, AMBIGUOUS, tuple(sorted(by_alias)))
        return Resolution(None, NO_SUCH_NOTE)


def normalize_target(raw: str, style: str) -> str | None:
    """The link path without heading, block reference or URL encoding; None for a same-note link or a URL."""
    target = raw.strip()
    if style == "md":
        if _SCHEME.match(target):
            return None  # http:, mailto:, obsidian: ... are not vault notes
        target = unquote(target)
    target = target.split("#", 1)[0].strip()
    return target or None


ProgressFn = Callable[[str, int, int], None]


def parse_vault(
    source: str | Path | BinaryIO, progress: ProgressFn | None = None, create_missing: bool = False
) -> ParsedVault:
    """Read and parse a vault, resolve every link; raises VaultError when the whole input is refused.

    Streamed: the notes are read one at a time (each at most MAX_NOTE_BYTES + 1 bytes, whatever its
    header says) and their large bodies go to a TextSpool, so memory holds one note's bytes at a
    time, not the vault's."""
    with ExitStack() as stack:
        files = read_source(source, stack)
        note_files = [f for f in files if f.path.lower().endswith(NOTE_SUFFIX)]
        if not note_files:
            raise VaultError("The vault holds no markdown notes (.md files).")
        other_files = [f.path for f in files if not f.path.lower().endswith(NOTE_SUFFIX)]
        spool = TextSpool()
        try:
            notes, skipped, warnings = _read_notes(note_files, spool, progress)
        except BaseException:
            spool.close()
            raise
    if not notes:
        spool.close()
        raise VaultError("No note of the vault could be read: " + "; ".join(warnings[:5]))
    links, unresolved, missing, attachment_links = _resolve_links(notes, other_files, create_missing, progress)
    return ParsedVault(
        notes=notes,
        links=links,
        unresolved=unresolved,
        skipped=skipped,
        warnings=warnings,
        attachments=len(other_files),
        attachment_links=attachment_links,
        missing=missing,
        spool=spool,
    )


def _too_big(path: str) -> str:
    return f"{path}: skipped, larger than the note limit of {MAX_NOTE_BYTES:,} bytes."


def _read_notes(
    note_files: list[SourceFile], spool: TextSpool, progress: ProgressFn | None
) -> tuple[dict[str, Note], list[str], list[str]]:
    """Each note read and parsed in turn (its bytes dropped before the next is read): (notes, skipped, warnings)."""
    warnings: list[str] = []
    notes: dict[str, Note] = {}
    skipped: list[str] = []
    for i, f in enumerate(note_files, 1):
        key = f.path[: -len(NOTE_SUFFIX)]
        data = f.read() if f.read is not None else None
        if data is None or len(data) > MAX_NOTE_BYTES:
            skipped.append(key)
            too_big = data is not None or f.skip_reason == _TOO_BIG
            warnings.append(_too_big(f.path) if too_big else f"{f.path}: skipped, {f.skip_reason}.")
        else:
            note = parse_note(f.path, data, warnings, spool)
            if note is None:
                skipped.append(key)
            else:
                notes[note.key] = note
        del data
        if progress:
            progress("read", i, len(note_files))
    return notes, skipped, warnings


def _resolve_links(
    notes: dict[str, Note], other_files: list[str], create_missing: bool, progress: ProgressFn | None
) -> tuple[list[Link], list[Unresolved], dict[str, str], int]:
    """Every note's links resolved: (links, unresolved, placeholders to create, links to present attachments)."""
    resolver = Resolver(notes, {k: n.aliases for k, n in notes.items()}, other_files)
    links: dict[tuple[str, str, str], Link] = {}
    unresolved: list[Unresolved] = []
    missing: dict[str, str] = {}
    attachment_links = 0
    for i, note in enumerate(notes.values(), 1):
        if progress:
            progress("link", i, len(notes))
        for raw, edge_type, style in note.raw_links:
            target = normalize_target(raw, style)
            if target is None:
                continue
            attachment = resolver.attachment(target)
            if attachment == "present":
                attachment_links += 1
                continue
            if attachment == ATTACHMENT_MISSING:
                unresolved.append(Unresolved(note.key, raw, edge_type, ATTACHMENT_MISSING))
                continue
            found = resolver.resolve(target, note.key, style)
            key = found.key
            if key is None:
                if create_missing and found.reason == NO_SUCH_NOTE:
                    key = target[: -len(NOTE_SUFFIX)] if target.lower().endswith(NOTE_SUFFIX) else target
                    key = key.strip().lstrip("/")
                    missing.setdefault(key, PurePosixPath(key).name)
                else:
                    unresolved.append(Unresolved(note.key, raw, edge_type, found.reason, found.candidates))
                    continue
            if key == note.key:
                continue  # a note linking to itself is no edge
            links.setdefault((note.key, key, edge_type), Link(note.key, key, edge_type))
    return list(links.values()), unresolved, missing, attachment_links
