"""Node text as markdown: nothing unsafe passes, wikilinks resolve as the vault importer resolves them.

The renderer (graphadmin.notes.text) is tested without a database; the lookup (graphadmin.notes.links)
against nodes imported from tests/fixtures/samename_vault, where two notes share the name 'Standup'.
"""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.urls import reverse

from feedback.imports import do_import_vault
from graphadmin.models import Node
from graphadmin.notes.links import node_resolver, render_node_text
from graphadmin.notes.text import UNRESOLVED_TITLE, NoteLink, NoteRef, note_refs, render, sanitize
from graphadmin.vault.parse import parse_vault

SAMENAME = Path(__file__).resolve().parents[2] / "fixtures" / "samename_vault"
HASHING = "graphadmin.embeddings.HashingEmbedder"


def nothing(refs):
    return {}


def table(**links):
    """A resolve that knows the given wiki targets: table(Event_Bus='/x/') knows [[Event Bus]]."""
    known = {
        NoteRef(name.replace("_", " "), "wiki"): NoteLink(href, name.replace("_", " ")) for name, href in links.items()
    }
    return lambda refs: {r: known[r] for r in refs if r in known}


# --- Sanitising: no raw HTML, scripts, styles, handlers or script URLs reach the page.

ATTACKS = [
    "<script>alert('x')</script>",
    "<style>body{display:none}</style>",
    '<img src=x onerror="alert(1)">',
    '<a href="javascript:alert(1)" onclick="alert(2)">click</a>',
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    "[click](vbscript:msgbox(1))",
    "[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](javascript:alert(1))",
    '<div style="background:url(javascript:alert(1))">x</div>',
    "<iframe src='https://evil.example'></iframe>",
    "[[<script>alert(1)</script>]]",
    "[[Note|<img src=x onerror=alert(1)>]]",
    '<svg><a xlink:href="javascript:alert(1)">x</a></svg>',
]


class Elements(HTMLParser):
    """The elements and attributes a browser would build from the HTML (escaped text is text)."""

    def __init__(self, html):
        super().__init__()
        self.tags, self.attrs = [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend((tag, name, value or "") for name, value in attrs)


@pytest.mark.parametrize("attack", ATTACKS)
def test_no_raw_html_passes(attack):
    html = render(f"Before\n\n{attack}\n\nafter", nothing)
    found = Elements(html)
    assert set(found.tags) <= {"p", "a", "span"}, html
    for _tag, name, value in found.attrs:
        assert not name.startswith("on") and name != "style", html
        if name == "href":
            assert not re.match(r"\s*(javascript|vbscript|data):", value, re.I), html
    assert "<p>Before</p>" in html and "<p>after</p>" in html


def test_raw_html_is_shown_as_text():
    html = render("<b>bold</b> and <script>alert(1)</script>", nothing)
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "&lt;script&gt;" in html


def test_the_sanitiser_alone_strips_what_markdown_would_never_emit():
    # Belt and braces: even HTML that did not come from the parser is reduced to the allow-list.
    dirty = '<p onclick="x()">a<script>alert(1)</script><a href="javascript:x()">b</a><a href="/g/1/">c</a></p>'
    assert (
        sanitize(dirty) == '<p>a<a rel="noopener noreferrer">b</a><a href="/g/1/" rel="noopener noreferrer">c</a></p>'
    )


def test_markdown_is_rendered():
    html = render("# Title\n\nSome *emphasis*, **strong**, ~~gone~~.\n\n- one\n- two\n\n> quoted", nothing)
    for piece in ("<h1>Title</h1>", "<em>emphasis</em>", "<strong>strong</strong>", "<s>gone</s>", "<li>one</li>"):
        assert piece in html
    assert "<blockquote>" in html


def test_web_links_are_kept_and_images_become_links():
    html = render("[site](https://example.com/a) ![chart](https://example.com/c.png) ![local](board.png)", nothing)
    assert '<a href="https://example.com/a" rel="noopener noreferrer">site</a>' in html
    assert '<a class="image-link" href="https://example.com/c.png" rel="noopener noreferrer">Image: chart</a>' in html
    assert f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">local</span>' in html
    assert "<img" not in html


# --- Code: kept as code, links in it are not links.


def test_code_blocks_are_kept_and_their_links_are_not_links():
    text = "```python\nprint('[[Event Bus]]') < 2\n```\n\n    indented [[Event Bus]]\n\nA span `[[Event Bus]]`."
    asked = []
    html = render(text, lambda refs: asked.extend(refs) or {})
    assert "<pre><code class=\"language-python\">print('[[Event Bus]]') &lt; 2\n</code></pre>" in html
    assert "<pre><code>indented [[Event Bus]]\n</code></pre>" in html
    assert "<code>[[Event Bus]]</code>" in html
    assert asked == [] and "wikilink" not in html


# --- Wikilinks and embeds.


def test_wikilinks_resolved_with_alias_heading_and_embed():
    text = "[[Event Bus]], [[Event Bus|the bus]], [[Event Bus#Design]], ![[Event Bus]] and [[Event Bus#^b1|block]]."
    asked = []

    def resolve(refs):
        asked.append(refs)
        return table(Event_Bus="/g/1/nodes/7/")(refs)

    html = render(text, resolve)
    assert asked == [[NoteRef("Event Bus", "wiki")]]  # one call, each target once
    link = '<a class="wikilink" href="/g/1/nodes/7/" title="Event Bus" rel="noopener noreferrer">'
    assert f"{link}Event Bus</a>" in html
    assert f"{link}the bus</a>" in html
    assert f"{link}Event Bus &gt; Design</a>" in html
    assert f"{link}block</a>" in html
    assert (
        '<a class="wikilink embed" href="/g/1/nodes/7/" title="Embedded note: Event Bus" rel="noopener noreferrer">'
        "Event Bus</a>" in html
    )
    assert "[[" not in html


def test_unresolved_wikilinks_are_marked():
    html = render("See [[Retro]], [[Retro|the retro]] and ![[org-chart.png]].", nothing)
    span = f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">'
    assert f"{span}Retro</span>" in html
    assert f"{span}the retro</span>" in html
    assert f"{span}org-chart.png</span>" in html
    assert "<a " not in html


def test_escaped_pipe_in_a_table_and_a_heading_of_the_same_note():
    html = render("| a |\n|---|\n| [[Event Bus\\|EB]] |\n\nUp to [[#Intro]].", table(Event_Bus="/n/7/"))
    assert '<td><a class="wikilink" href="/n/7/" title="Event Bus" rel="noopener noreferrer">EB</a></td>' in html
    assert '<span class="wikilink">Intro</span>' in html


def test_markdown_links_to_notes_are_resolved_too():
    refs = note_refs("[std](Conventions.md), [x](Other%20Note.md#part), [w](https://e.com), [t](#top)")
    assert refs == [NoteRef("Conventions.md", "md"), NoteRef("Other Note.md", "md")]
    html = render(
        "[std](Conventions.md) and [gone](Nowhere.md)",
        lambda refs: {NoteRef("Conventions.md", "md"): NoteLink("/n/3/", "Conventions")},
    )
    assert '<a class="wikilink" href="/n/3/" title="Conventions" rel="noopener noreferrer">std</a>' in html
    assert f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">gone</span>' in html


def test_no_links_no_lookup():
    assert render("Plain text, `[[code]]`.", lambda refs: pytest.fail("resolve called")) == (
        "<p>Plain text, <code>[[code]]</code>.</p>\n"
    )


# --- Resolution against the graph: the importer's rules, one query.


@pytest.fixture
def vault_graph(acme_graph, settings):
    settings.EMBEDDER = HASHING
    do_import_vault(acme_graph, parse_vault(SAMENAME), actor="command:test")
    return {n.key: n for n in Node.objects.filter(graph=acme_graph)}


def page(graph, node):
    return reverse("node", args=[graph.pk, node.pk])


def test_same_name_resolves_to_the_note_beside_it(acme_graph, vault_graph, django_assert_num_queries):
    week_a, week_b = vault_graph["Team A/Week 1"], vault_graph["Team B/Week 1"]
    with django_assert_num_queries(1):
        html = render_node_text(week_a)
    assert f'href="{page(acme_graph, vault_graph["Team A/Standup"])}"' in html
    assert f'href="{page(acme_graph, vault_graph["Team B/Standup"])}"' in render_node_text(week_b)


def test_ties_and_missing_notes_stay_unresolved(acme_graph, vault_graph, django_assert_num_queries):
    overview = vault_graph["Org/Overview"]
    with django_assert_num_queries(1):
        html = render_node_text(overview)
    span = f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">'
    assert f"{span}Standup</span>" in html  # two notes named Standup, neither beside Overview: a tie
    assert f"{span}Retro</span>" in html
    assert f"{span}org-chart.png</span>" in html
    assert f'href="{page(acme_graph, vault_graph["Team A/Standup"])}"' in html  # [[Team A/Standup]], the exact path


def test_every_resolved_link_is_an_edge_the_importer_made(acme_graph, vault_graph):
    """The page and the importer agree: a body link the page resolves is an out-edge of the note."""
    for key, node in vault_graph.items():
        hrefs = set(re.findall(r'class="wikilink[^"]*" href="([^"]+)"', render_node_text(node)))
        targets = {page(acme_graph, e.target) for e in node.out_edges.filter(archived=False).select_related("target")}
        assert hrefs <= targets, key
    fields = render_node_text(vault_graph["Org/Fields"])
    assert (
        f'href="{page(acme_graph, vault_graph["Org/Conventions"])}" title="Conventions" ' in fields
    )  # (Conventions.md)
    assert "[ignored:: [[Overview]]]" in fields  # in a code span: text


def test_case_aliases_and_api_nodes(acme_graph, django_assert_num_queries):
    target = Node.objects.create(graph=acme_graph, key="adr-001", title="ADR 001", aliases=['Event "Bus" Choice'])
    Node.objects.create(graph=acme_graph, key="gone", title="Gone", archived=True)
    other = Node.objects.create(graph=acme_graph, key="Notes/Event Bus", title="Event Bus")
    source = Node.objects.create(
        graph=acme_graph,
        key="src",
        title="Source",
        text='[[ADR-001]], [[event "bus" choice]], [[event bus]], [[notes/EVENT BUS.md]] and [[gone]].',
    )
    resolve = node_resolver(acme_graph.pk, source.key)
    with django_assert_num_queries(1):
        links = resolve(note_refs(source.text))
    assert {ref.path: link.href for ref, link in links.items()} == {
        "ADR-001": page(acme_graph, target),
        'event "bus" choice': page(acme_graph, target),
        "event bus": page(acme_graph, other),
        "notes/EVENT BUS.md": page(acme_graph, other),
    }  # an archived node is no link target


def test_links_never_cross_graphs(acme_graph, globex_graph):
    Node.objects.create(graph=globex_graph, key="Secret", title="Secret")
    source = Node.objects.create(graph=acme_graph, key="src", title="Source", text="[[Secret]]")
    assert UNRESOLVED_TITLE in render_node_text(source)


# --- The node page.


def test_node_page_shows_the_rendered_note(client, acme_graph, vault_graph, rita):
    node = Node.objects.create(
        graph=acme_graph,
        key="Org/Guide",
        title="Guide",
        text="# Guide\n\nAsk at the [[Standup]] or read [[Overview|the overview]]. [[Retro]]\n\n"
        "<script>alert(1)</script>\n\n```sql\nselect 1 where '[[Overview]]' <> '';\n```\n",
    )
    client.force_login(rita)
    response = client.get(page(acme_graph, node))
    assert response.status_code == 200
    html = response.content.decode()
    body = html[html.index('<div class="note-body">') : html.index("</div>", html.index('<div class="note-body">'))]
    assert "<h1>Guide</h1>" in body
    assert f'<a class="wikilink" href="{page(acme_graph, vault_graph["Org/Overview"])}"' in body
    assert f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">Standup</span>' in body  # a tie from Org/
    assert f'<span class="wikilink unresolved" title="{UNRESOLVED_TITLE}">Retro</span>' in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in html
    assert "<pre><code class=\"language-sql\">select 1 where '[[Overview]]' &lt;&gt; '';" in body
    assert '<pre class="note-text">' in html  # the markdown source stays one click away
