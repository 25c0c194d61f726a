"""Import work is bounded: no YAML alias bomb, no text made of non-scalars, link scanning linear in a line.

The linear scanner is checked against the regex it replaced (kept here as the reference) on random
bracket soups, and its cost per byte is compared at two sizes with a wide margin: a complexity guard,
not a benchmark.
"""

import random
import re
import time

import pytest

from graphadmin.vault.parse import extract_links, inline_fields, md_links, parse_note

BOMB = """---
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
title: *h
tags: *h
---
Body with [[Target]].
"""


def test_a_yaml_alias_bomb_is_refused_naming_the_note():
    warnings = []
    note = parse_note("bombs/laughs.md", BOMB.encode(), warnings)
    assert note.title == "laughs" and note.tags == [] and note.aliases == []
    assert [t for t, _type, _style in note.raw_links] == ["Target"]  # the body is still read
    assert len(warnings) == 1
    assert warnings[0].startswith("bombs/laughs.md: frontmatter refused: anchors and aliases are not allowed")


def test_a_single_anchor_is_refused_too():
    warnings = []
    note = parse_note("n.md", b"---\ntitle: &t Hello\nalias: *t\n---\nx\n", warnings)
    assert note.title == "n" and "anchors and aliases" in warnings[0]


def test_non_scalars_are_never_stringified():
    data = b"---\ntitle: {a: 1, b: [2, 3]}\ntype: [x, y]\ntags: {k: v}\naliases: {k: v}\nrelated: {k: '[[X]]'}\n---\n"
    warnings = []
    note = parse_note("folder/n.md", data, warnings)
    assert note.title == "n" and note.kind == "folder"
    assert note.tags == [] and note.aliases == [] and note.raw_links == []
    assert "folder/n.md: frontmatter 'title' is a dict, not text; ignored." in warnings
    assert "folder/n.md: frontmatter 'type' is a list, not text; ignored." in warnings
    # Plain values still read as text.
    note = parse_note("n.md", b"---\ntitle: 1984\ntags: 7\ntype: 2026-01-02\n---\n", [])
    assert (note.title, note.tags, note.kind) == ("1984", ["7"], "2026-01-02")


# The single regex the scanner replaced (quadratic: it re-read the rest of the line from every '[').
_OLD_MDLINK = re.compile(
    r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+(?:\"[^\"\n]*\"|'[^'\n]*'))?\s*\)"
)


def _old_md_links(line):
    out = []
    for m in _OLD_MDLINK.finditer(line):
        target = m.group(3)
        if target.startswith("<") and target.endswith(">"):
            target = target[1:-1]
        out.append((target, m.start(3)))
    return out


def _old_inline_fields(line):
    # The per-'[' scan inline_fields replaced.
    fields = []
    for opening, closing in {"[": "]", "(": ")"}.items():
        start = line.find(opening)
        while start >= 0:
            end, key = None, ""
            separator = line.find("::", start + 1)
            key = line[start + 1 : separator].strip() if separator >= 0 else ""
            if separator >= 0 and key and not any(c in key for c in "[]()"):
                depth, escaped = 0, False
                for i in range(separator + 2, len(line)):
                    char = line[i]
                    if char == "\\":
                        escaped = not escaped
                        continue
                    if escaped:
                        escaped = False
                        continue
                    if char == opening:
                        depth += 1
                    elif char == closing:
                        depth -= 1
                        if depth < 0:
                            end = i + 1
                            break
            if end is None:
                start = line.find(opening, start + 1)
                continue
            fields.append((start, end, key))
            start = line.find(opening, end)
    return sorted(fields)


SOUP = ["[", "]", "(", ")", "<", ">", ":", "::", '"', "'", " ", "a", "b.md", "!", "\\", "|", "[[", "]]", "](", "k:: "]
# Without whitespace or ')': a destination never ends, the case the old link regex was quadratic on.
DENSE = ["[", "]", "(", "<", "a", "](", "!", ":", "[a](", "]("]


def _soup(rng, size, alphabet=SOUP):
    parts, length = [], 0
    while length < size:
        part = rng.choice(alphabet)
        parts.append(part)
        length += len(part)
    return "".join(parts)[:size]


def test_the_linear_scanners_read_what_the_old_ones_read():
    rng = random.Random(15)
    for _ in range(3000):
        line = _soup(rng, rng.randint(0, 60), rng.choice([SOUP, DENSE]))
        assert md_links(line) == _old_md_links(line), line
        assert inline_fields(line) == _old_inline_fields(line), line


def _seconds_per_byte(lines):
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for line in lines:
            extract_links(line)
        best = min(best, time.perf_counter() - start)
    return best / sum(len(line) for line in lines)


@pytest.mark.parametrize("alphabet", [SOUP, DENSE], ids=["soup", "dense"])
@pytest.mark.parametrize("seed", [1, 2])
def test_link_scanning_is_linear_in_the_line_on_bracket_soups(seed, alphabet):
    rng = random.Random(seed)
    small = [_soup(rng, 2_000, alphabet) for _ in range(16)]  # the same bytes in total as one large line
    large = [_soup(rng, 32_000, alphabet)]
    ratio = _seconds_per_byte(large) / _seconds_per_byte(small)
    # 16 times the line length: a quadratic scan costs about 16 times as much per byte; linear about 1.
    assert ratio < 4, f"per-byte cost grew {ratio:.1f}x from 2 KB to 32 KB lines"


@pytest.mark.parametrize("unit", ["[a](", "[](", "]([", "[x](<", "[a:: "])
def test_a_16_kb_line_of_repeated_openers_is_quick(unit):
    """Each of these took 2.5 to 8 s per 16 KB line with the old patterns."""
    line = unit * (16_384 // len(unit))
    start = time.perf_counter()
    assert extract_links(line) == []
    assert time.perf_counter() - start < 1.0
