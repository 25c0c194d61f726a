"""Vault parsing and Obsidian link resolution: pure functions, no database."""

import io
import os
import zipfile
from pathlib import Path

import pytest

from graphadmin.vault.parse import (
    VaultError,
    extract_links,
    parse_vault,
    read_zip,
    split_frontmatter,
    strip_code,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "vault"


@pytest.fixture(scope="module")
def parsed():
    return parse_vault(FIXTURE)


def links_of(parsed, source):
    return {(link.target, link.edge_type) for link in parsed.links if link.source == source}


def test_every_markdown_file_is_a_note_except_the_unreadable_one(parsed):
    assert sorted(parsed.notes) == [
        "Architecture",
        "Components/Queue",
        "Components/Store",
        "Decisions/Retry Policy",
        "Home",
        "Meeting Notes/Weekly Sync",
        "Projects/Alpha/Plan",
        "Projects/Beta/Plan",
        "Research/Caching Study",
    ]
    assert parsed.skipped == ["Research/latin1"]
    assert parsed.warnings == ["Research/latin1.md: not UTF-8 (invalid continuation byte at byte 3); skipped."]


def test_frontmatter_title_kind_aliases_tags(parsed):
    home = parsed.notes["Home"]
    assert (home.title, home.kind, home.aliases, home.tags) == (
        "Vault home",
        "note",
        ["Start", "Index"],
        ["hub", "overview"],
    )
    assert not home.text.startswith("---") and home.text.startswith("# Home")
    assert parsed.notes["Decisions/Retry Policy"].kind == "decision"  # frontmatter type
    assert parsed.notes["Architecture"].kind == "architecture"  # frontmatter kind
    assert parsed.notes["Meeting Notes/Weekly Sync"].kind == "meeting-notes"  # top folder
    assert parsed.notes["Research/Caching Study"].tags == ["research"]
    assert parsed.notes["Components/Queue"].title == "Queue"  # file name


def test_every_link_form_resolves(parsed):
    assert links_of(parsed, "Home") == {
        ("Architecture", "related"),  # [[X]], [[X#Heading]], ![[X]]
        ("Research/Caching Study", "related"),  # [[Folder/X]], [[X#^block]], alias [[The Cache]]
        ("Decisions/Retry Policy", "related"),  # [[X|shown]]
        ("Components/Queue", "related"),  # [text](Folder/X.md), case-insensitive [[queue]]
        ("Meeting Notes/Weekly Sync", "related"),  # URL-encoded markdown link
        ("Projects/Beta/Plan", "related"),  # [[Plan]]: of two Plan.md outside Home's folder, the shorter path
    }


def test_relative_markdown_link_and_path_suffix(parsed):
    assert links_of(parsed, "Meeting Notes/Weekly Sync") == {
        ("Decisions/Retry Policy", "related"),
        ("Components/Queue", "related"),
    }
    # [[Storage]] is an alias of Components/Store; [[Alpha/Plan]] a unique path suffix.
    assert links_of(parsed, "Projects/Beta/Plan") == {
        ("Components/Store", "related"),
        ("Projects/Alpha/Plan", "related"),
    }


def test_typed_edges_from_frontmatter_and_inline_fields(parsed):
    assert links_of(parsed, "Decisions/Retry Policy") == {
        ("Research/Caching Study", "derived_from"),  # frontmatter and inline field: one edge
        ("Components/Queue", "depends_on"),
        ("Components/Store", "depends_on"),
        ("Architecture", "related"),
    }
    assert links_of(parsed, "Architecture") == {
        ("Components/Queue", "depends_on"),
        ("Components/Store", "depends_on"),
        ("Components/Store", "related"),
        ("Research/Caching Study", "related"),
        ("Home", "related"),  # linked twice: one edge
    }
    assert ("Architecture", "implements") in links_of(parsed, "Components/Queue")


def test_unresolved_are_reported_with_reason(parsed):
    assert [u.as_dict() for u in parsed.unresolved] == [
        {"source": "Home", "target": "Ghost Note", "edge_type": "related", "reason": "no such note", "candidates": []},
        {
            "source": "Decisions/Retry Policy",
            "target": "Old Retry Policy",
            "edge_type": "supersedes",
            "reason": "no such note",
            "candidates": [],
        },
    ]


def test_attachments_code_comments_urls_and_same_note_links_are_not_edges(parsed):
    assert parsed.attachments == 2 and parsed.attachment_links == 2
    targets = {link.target for link in parsed.links} | {u.target for u in parsed.unresolved}
    for ignored in ("Not A Link", "Also Not A Link", "Nowhere", "Hidden Link", "#Home"):
        assert ignored not in targets
    assert not links_of(parsed, "Research/Caching Study")  # its only link is in a ~~~ fence


def test_a_dotted_note_name_is_not_an_attachment(tmp_path):
    (tmp_path / "Release 1.2.md").write_text("notes")
    (tmp_path / "photo.jpg").write_bytes(b"jpg")
    (tmp_path / "A.md").write_text("[[Release 1.2]] [[Release 1.3]] ![[photo.jpg]] [[data.csv]]")
    p = parse_vault(tmp_path)
    assert [(link.source, link.target) for link in p.links] == [("A", "Release 1.2")]
    assert [(u.target, u.reason) for u in p.unresolved] == [
        ("Release 1.3", "no such note"),
        ("data.csv", "attachment missing"),
    ]
    assert p.attachment_links == 1


def test_strip_code_keeps_lines_and_blanks_code():
    body = "a [[X]]\n```\n[[Y]]\n```\n`[[Z]]` and [[W]]"
    assert strip_code(body).split("\n")[2] == ""
    assert [t for t, _, _ in extract_links(body)] == ["X", "W"]


def test_frontmatter_split_and_unquoted_yaml_link():
    meta, body = split_frontmatter("---\na: 1\n---\nbody")
    assert (meta, body) == ("a: 1", "body")
    assert split_frontmatter("no frontmatter") == (None, "no frontmatter")


def test_create_missing_names_placeholders():
    p = parse_vault(FIXTURE, create_missing=True)
    assert set(p.missing) == {"Ghost Note", "Old Retry Policy"}
    assert p.unresolved == []


def _zip(entries: dict, symlink: str | None = None) -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        if symlink:
            info = zipfile.ZipInfo(symlink)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, "/etc/passwd")
    buf.seek(0)
    return buf


def test_zip_with_one_top_folder_is_the_vault():
    p = parse_vault(_zip({"MyVault/A.md": "[[B]]", "MyVault/sub/B.md": "text"}))
    assert sorted(p.notes) == ["A", "sub/B"] and [(link.source, link.target) for link in p.links] == [("A", "sub/B")]


@pytest.mark.parametrize("name", ["../evil.md", "a/../../evil.md", "/abs.md", "C:/win.md"])
def test_zip_slip_refused(name):
    with pytest.raises(VaultError, match="escapes|absolute"):
        read_zip(_zip({"ok.md": "x", name: "x"}))


def test_zip_symlink_refused():
    with pytest.raises(VaultError, match="symlink"):
        read_zip(_zip({"ok.md": "x"}, symlink="link.md"))


def test_oversized_note_is_a_warning(monkeypatch):
    from graphadmin.vault import parse

    monkeypatch.setattr(parse, "MAX_NOTE_BYTES", 10)
    p = parse_vault(_zip({"small.md": "tiny", "big.md": "x" * 11}))
    assert sorted(p.notes) == ["small"] and p.skipped == ["big"] and "larger than" in p.warnings[0]


def test_oversized_archive_refused(monkeypatch):
    from graphadmin.vault import parse

    monkeypatch.setattr(parse, "MAX_UNCOMPRESSED_BYTES", 100)
    with pytest.raises(VaultError, match="unpacks to more than"):
        read_zip(_zip({"a.md": "x" * 200}))


def test_empty_vault_and_bad_paths(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "image.png").write_bytes(b"png")
    with pytest.raises(VaultError, match="no markdown notes"):
        parse_vault(tmp_path / "empty")
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(VaultError, match="neither a directory nor a zip"):
        parse_vault(tmp_path / "file.txt")
    with pytest.raises(VaultError, match="does not exist"):
        parse_vault(tmp_path / "nope")


def test_symlink_out_of_the_vault_refused(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A.md").write_text("a")
    (tmp_path / "secret.md").write_text("secret")
    os.symlink(tmp_path / "secret.md", vault / "leak.md")
    with pytest.raises(VaultError, match="symlink out of the vault"):
        parse_vault(vault)


def test_symlink_inside_the_vault_is_skipped_with_a_warning(tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A.md").write_text("[[B]]")
    os.symlink(vault / "A.md", vault / "B.md")
    p = parse_vault(vault)
    assert list(p.notes) == ["A"] and p.skipped == ["B"]
    assert p.warnings == ["B.md: skipped, a symlink (not followed)."]
    assert [u.reason for u in p.unresolved] == ["no such note"]
