"""Notes that share a name, body tags, bracketed inline fields, unresolved links by reason: pure, no database.

The tie-break cases are the fixture Obsidian 1.13.7 was observed on (``getFirstLinkpathDest``):
own folder first, then the shortest path string; equal shortest paths are a true tie.
"""

from pathlib import Path

import pytest

from graphadmin.vault.parse import (
    Resolver,
    extract_links,
    extract_tags,
    group_unresolved,
    inline_fields,
    parse_vault,
    pick_nearest,
)

SAMENAME = Path(__file__).resolve().parents[2] / "fixtures" / "samename_vault"


@pytest.fixture(scope="module")
def parsed():
    return parse_vault(SAMENAME)


def links_of(parsed, source):
    return {(link.target, link.edge_type) for link in parsed.links if link.source == source}


# --- The resolution rule.


@pytest.mark.parametrize(
    ("candidates", "source", "expected"),
    [
        # The linking note's own folder wins, over a shorter path elsewhere.
        (["zzzz/Note", "a/b/Note", "b/Note"], "zzzz/src", "zzzz/Note"),
        (["zzzz/Note", "a/b/Note", "b/Note"], "a/b/src", "a/b/Note"),
        # Otherwise the shortest path string: a/b/Note (8) over zzzz/Note (9), so not the fewest folders.
        (["zzzz/Note", "a/b/Note"], "src", "a/b/Note"),
        (["zzzz/Note", "a/b/Note", "b/Note", "aaaaaaaa/Note"], "src", "b/Note"),
        # An ancestor folder counts for nothing: zzzz/deep/ does not prefer zzzz/Note.
        (["zzzz/Note", "a/b/Note", "b/Note"], "zzzz/deep/src", "b/Note"),
        # One candidate is the answer wherever the link is.
        (["Team A/Standup"], "Org/Overview", "Team A/Standup"),
    ],
)
def test_pick_nearest_own_folder_then_shortest_path(candidates, source, expected):
    assert pick_nearest(candidates, source) == (expected, [])


def test_pick_nearest_reports_a_true_tie_with_only_the_tied_notes():
    assert pick_nearest(["bb/Tie", "aa/Tie"], "src") == (None, ["aa/Tie", "bb/Tie"])
    assert pick_nearest(["bb/Tie", "aa/Tie", "ccc/Tie"], "x/src") == (None, ["aa/Tie", "bb/Tie"])
    assert pick_nearest([], "src") == (None, [])
    # Two in the own folder (names differing only in case) tie among themselves.
    assert pick_nearest(["a/Plan", "a/plan", "b/Plan"], "a/src") == (None, ["a/Plan", "a/plan"])


def test_an_exact_vault_path_wins_before_the_tie_break():
    resolver = Resolver(["Note", "a/b/Note", "b/Note"], {}, [])
    assert resolver.resolve("Note", "a/b/src", "wiki").key == "Note"  # even beside a/b/Note
    assert resolver.resolve("b/Note", "a/b/src", "wiki").key == "b/Note"  # over the own-folder ending a/b/Note


def test_a_path_ending_uses_the_same_rule():
    resolver = Resolver(["x/b/Note", "yy/b/Note", "b/Other"], {}, [])
    assert resolver.resolve("b/Note", "x/b/src", "wiki").key == "x/b/Note"  # own folder
    assert resolver.resolve("b/Note", "x/b/src", "wiki").reason == ""
    assert resolver.resolve("B/NOTE", "src", "wiki").key == "x/b/Note"  # shorter, case-insensitive
    tie = Resolver(["x/b/Note", "y/b/Note"], {}, []).resolve("b/Note", "src", "wiki")
    assert (tie.key, tie.reason, tie.candidates) == (None, "ambiguous", ("x/b/Note", "y/b/Note"))
    assert Resolver(["x/b/Note"], {}, []).resolve("c/Note", "src", "wiki").reason == "no such note"


def test_a_unique_alias_still_resolves_a_tie_and_shared_aliases_are_ambiguous():
    resolver = Resolver(
        ["a/Plan", "b/Plan", "c/Roadmap"], {"c/Roadmap": ["Plan"], "a/Plan": ["Roadmap"], "b/Plan": ["Roadmap"]}, []
    )
    assert resolver.resolve("Plan", "src", "wiki").key == "c/Roadmap"
    shared = Resolver(["a/One", "b/Two"], {"a/One": ["Same"], "b/Two": ["Same"]}, []).resolve("Same", "src", "wiki")
    assert (shared.reason, shared.candidates) == ("ambiguous", ("a/One", "b/Two"))


# --- The fixture vault: two Standup.md, linked from both folders and from a third.


def test_same_named_notes_resolve_to_the_one_beside_the_link(parsed):
    assert links_of(parsed, "Team A/Week 1") == {("Team A/Standup", "related")}
    assert links_of(parsed, "Team B/Week 1") == {("Team B/Standup", "related")}
    # From a third folder the two paths are equally long: a true tie, reported with both candidates.
    ambiguous = [u.as_dict() for u in parsed.unresolved if u.reason == "ambiguous"]
    assert ambiguous == [
        {
            "source": "Org/Overview",
            "target": "Standup",
            "edge_type": "related",
            "reason": "ambiguous",
            "candidates": ["Team A/Standup", "Team B/Standup"],
        }
    ]
    assert links_of(parsed, "Org/Overview") == {("Team A/Standup", "related")}  # [[Team A/Standup]]: the exact path


def test_unresolved_links_carry_their_reason_and_group_by_it(parsed):
    assert sorted((u.source, u.target, u.reason) for u in parsed.unresolved) == [
        ("Org/Overview", "Retro", "no such note"),
        ("Org/Overview", "Standup", "ambiguous"),
        ("Org/Overview", "org-chart.png", "attachment missing"),
    ]
    assert parsed.attachment_links == 1  # ![[board.png]] is in the vault
    groups = group_unresolved(u.as_dict() for u in parsed.unresolved)
    assert [(g["reason"], g["count"], [link["target"] for link in g["links"]]) for g in groups] == [
        ("no such note", 1, ["Retro"]),
        ("ambiguous", 1, ["Standup"]),
        ("attachment missing", 1, ["org-chart.png"]),
    ]


def test_group_unresolved_keeps_the_order_and_skips_empty_reasons():
    items = [
        {"source": "a", "target": "x.png", "edge_type": "related", "reason": "attachment missing", "candidates": []},
        {"source": "a", "target": "/", "edge_type": "related", "reason": "empty link", "candidates": []},
        {"source": "b", "target": "Y", "edge_type": "related", "reason": "no such note", "candidates": []},
        {"source": "a", "target": "Z", "edge_type": "related", "reason": "no such note", "candidates": []},
    ]
    groups = group_unresolved(items)
    assert [(g["reason"], g["count"]) for g in groups] == [
        ("no such note", 2),
        ("attachment missing", 1),
        ("empty link", 1),
    ]
    assert [link["source"] for link in groups[0]["links"]] == ["b", "a"]
    assert group_unresolved([]) == []


def test_create_missing_never_guesses_a_tie_nor_makes_a_missing_attachment(tmp_path):
    p = parse_vault(SAMENAME, create_missing=True)
    assert set(p.missing) == {"Retro"}
    assert sorted(u.reason for u in p.unresolved) == ["ambiguous", "attachment missing"]


# --- Body tags.


def test_body_tags_in_text_and_headings_not_in_code_comments_or_links(parsed):
    assert parsed.notes["Org/Conventions"].tags == [
        "planning",  # frontmatter first; #Planning in the body is the same tag
        "in-title",
        "status/active",
        "review",
        "decision",
        "y1984",
        "one",
        "two",
    ]


@pytest.mark.parametrize(
    ("body", "tags"),
    [
        ("#tag and #nested/tag/deep", ["tag", "nested/tag/deep"]),
        ("# Heading\n## Sub heading\n#NotAHeading", ["NotAHeading"]),  # '# ' is a heading; '#x' is a tag
        ("## Plan #project", ["project"]),  # a tag in a heading's text is a tag, as in Obsidian
        ("`#span` and ``#double``", []),
        ("```\n#fenced\n```\n~~~\n#tilde\n~~~\nafter #yes", ["yes"]),
        ("%% #hidden %% <!-- #html --> #shown", ["shown"]),
        ("x#y (#p) [[N#h]] http://x.y/#z \\#e #2024", []),
        ("#a#b #c/#d #Tag #tag", ["a", "b", "c", "d", "Tag"]),
        ("tab\t#t1 nbsp\u00a0#t2 ideographic\u3000#t3 #日本語", ["t1", "t2", "t3", "日本語"]),
    ],
)
def test_extract_tags(body, tags):
    assert extract_tags(body) == tags


# --- Dataview's bracketed and parenthesised inline fields.


def test_bracketed_and_parenthesised_fields_type_their_links(parsed):
    assert links_of(parsed, "Org/Fields") == {
        ("Team A/Standup", "decided_by"),  # [decided_by:: [[X]]]
        ("Org/Overview", "related"),  # the plain link beside it
        ("Team B/Week 1", "depends_on"),  # (depends_on:: [[X]]), the key hidden
        ("Org/Conventions", "blocks"),  # [blocks:: [[A]], [[B]]]: both typed
        ("Org/Overview", "blocks"),
        ("Team A/Week 1", "supersedes"),  # the full-line form
        ("Org/Conventions", "informs"),
        ("Team B/Standup", "related"),  # outside the field on the same line
        ("Org/Conventions", "related"),  # [std::vector](Conventions.md): a markdown link, not a field
    }


def test_inline_fields_spans():
    line = "a [x:: [[A]]] b (Hidden Key:: [[B]] (nested)) c [no key] [[C]] [k:: \\] still inside]"
    assert [(line[s:e], k) for s, e, k in inline_fields(line)] == [
        ("[x:: [[A]]]", "x"),
        ("(Hidden Key:: [[B]] (nested))", "Hidden Key"),
        ("[k:: \\] still inside]", "k"),
    ]
    assert inline_fields("[[A]] :: [[B]]") == []  # brackets in the key: no field
    assert inline_fields("[open:: [[A]]") == []  # never closed


def test_field_forms_in_extract_links():
    body = "\n".join(
        [
            "[Derived From:: [[A]]] and (depends-on:: [[B]], [[C]]) then [[D]]",
            "derived_from:: [[E]] [[F]]",
            "[derived_from:: [[G]]] wins over the full-line form:: [[H]]",
            "[bad key!:: [[I]]]",
            "`[code:: [[J]]]`",
        ]
    )
    assert extract_links(body) == [
        ("A", "derived_from", "wiki"),
        ("B", "depends_on", "wiki"),
        ("C", "depends_on", "wiki"),
        ("D", "related", "wiki"),
        ("E", "derived_from", "wiki"),
        ("F", "derived_from", "wiki"),
        ("G", "derived_from", "wiki"),
        ("H", "related", "wiki"),
        ("I", "related", "wiki"),
    ]


def test_lines_longer_than_dataview_reads_have_no_bracketed_fields(monkeypatch):
    from graphadmin.vault import parse

    monkeypatch.setattr(parse, "MAX_FIELD_LINE", 20)
    assert extract_links("[x:: [[A]]]") == [("A", "x", "wiki")]
    assert extract_links("[x:: [[A]]] and then some more") == [("A", "related", "wiki")]
