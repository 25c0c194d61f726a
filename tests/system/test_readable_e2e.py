"""Issue 39 item 5 in headless Chromium, at 390 and 1400 px: every page passes axe-core (vendored in
tests/vendor/axe-core) with no serious or critical violation; no table breaks a word or a number mid-token and a
wide table scrolls in its own box; a skip link, a focus ring of at least 3:1, a favicon; edges named
"A -> type -> B"; jargon behind a glossary; the neighbourhood graph filtered and bounded; chart labels that fit.

The rows are test_desk_e2e's (acme's cast on the ranked graph with three weeks of sessions, a policy change, a
decay run, a load test's sessions and a manual batch).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from feedback.models import WeightHistory
from tests.conftest import HASHING
from tests.system.site import module_site
from tests.system.test_desk_e2e import build_with_load

pytestmark = pytest.mark.browser

AXE = (Path(__file__).resolve().parents[1] / "vendor" / "axe-core" / "axe.min.js").read_text()
WIDTHS = (390, 1400)


_live_server_helper, site, browser = module_site(build_with_load, EMBEDDER=HASHING)


@pytest.fixture(scope="module")
def pages(site, browser):
    """{width: a page logged in as alice (admin) at that width}; axe is injected by the tests (bypass_csp lets
    the test's own script in; the product's pages are checked for CSP refusals elsewhere)."""
    out = {}
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)
        page = context.new_page()
        page.goto(f"{site.url}/accounts/login/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("pw-alice")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{site.url}/", wait_until="domcontentloaded")
        out[width] = page
    yield out
    for page in out.values():
        page.context.close()


def urls(site) -> list[str]:
    g, data = site.data["graph"].pk, site.data
    edge = data["edges"]["a>b"]
    return [
        "/",
        f"/g/{g}/",
        f"/g/{g}/explain/",
        f"/g/{g}/injections/{data['injection'].pk}/",
        f"/g/{g}/nodes/{data['nodes']['a'].pk}/",
        f"/g/{g}/edges/{edge.pk}/",
        f"/g/{g}/sessions/",
        f"/g/{g}/sessions/s-used/",
        f"/g/{g}/batches/",
        f"/g/{g}/batches/{data['batch'].pk}/",
        f"/g/{g}/audit/",
        f"/g/{g}/impact/",
        f"/g/{g}/tune/",
        f"/g/{g}/tune/revisions/1/preview/",
        f"/g/{g}/policy/effects/",
        f"/g/{g}/health/",
        f"/g/{g}/members/",
        "/g/999999/",
    ]


def settle(page):
    """Wait for the page's charts and graph views (they draw after the text)."""
    page.wait_for_load_state("load")
    page.wait_for_function(
        """() => [...document.querySelectorAll('div.chart[data-figure]')].every(c => c.querySelector('svg.main-svg'))
              && [...document.querySelectorAll('section.graph-view')].every(g => g.dataset.state === 'ready')""",
        timeout=20000,
    )


# --------------------------------------------------------------------------------------------------
# axe-core on every page


@pytest.mark.parametrize("width", WIDTHS)
def test_no_serious_or_critical_accessibility_violation_on_any_page(site, pages, width):
    page = pages[width]
    found = {}
    for url in urls(site):
        page.goto(site.url + url)
        settle(page)
        page.add_script_tag(content=AXE)
        result = page.evaluate(
            """async () => { const r = await axe.run(document, { resultTypes: ['violations'] });
                 return r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
                   .map(v => v.id + ' (' + v.impact + '): '
                        + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')); }"""
        )
        if result:
            found[url] = result
    assert found == {}


# --------------------------------------------------------------------------------------------------
# Tables: no word or number broken; a wide table scrolls in its own box

CELLS_BROKEN = r"""() => {
  // Every word (a run without spaces) of every visible table cell: drawn on more than one line means broken.
  const broken = [];
  for (const cell of document.querySelectorAll('main td, main th')) {
    if (!cell.offsetParent) continue;  // inside a closed <details>
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest('details:not([open]) > :not(summary)')) continue;
      const re = /\S{2,}/g;
      let m;
      while ((m = re.exec(node.data))) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_tables_never_break_a_word_or_number_and_scroll_in_their_box(site, pages, width):
    page = pages[width]
    broken, wide = {}, {}
    for url in urls(site):
        page.goto(site.url + url)
        page.wait_for_load_state("load")
        words = page.evaluate(CELLS_BROKEN)
        if words:
            broken[url] = words[:5]
        if page.evaluate("() => document.documentElement.scrollWidth") > width:
            wide[url] = page.evaluate("() => document.documentElement.scrollWidth")
    assert broken == {} and wide == {}
    if width == 390:
        # The injection page's candidate table is wider than a phone: it scrolls sideways, and takes focus so a
        # keyboard can scroll it.
        g = site.data["graph"].pk
        page.goto(f"{site.url}/g/{g}/injections/{site.data['injection'].pk}/")
        page.wait_for_load_state("load")
        table = page.locator("table.candidates").first
        assert table.evaluate("t => t.scrollWidth > t.clientWidth && getComputedStyle(t).overflowX === 'auto'")
        assert table.get_attribute("tabindex") == "0"
        before = table.evaluate("t => t.scrollLeft")
        table.evaluate("t => t.scrollBy(200, 0)")
        assert table.evaluate("t => t.scrollLeft") > before


# --------------------------------------------------------------------------------------------------
# Skip link, focus ring, favicon


def _luminance(rgb: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize("width", WIDTHS)
def test_skip_link_focus_ring_and_favicon(site, pages, width):
    page = pages[width]
    g = site.data["graph"].pk
    page.goto(f"{site.url}/g/{g}/")
    page.keyboard.press("Tab")
    skip = page.evaluate(
        "() => ({ text: document.activeElement.textContent.trim(), href: document.activeElement.getAttribute('href'),"
        " top: document.activeElement.getBoundingClientRect().top })"
    )
    assert skip["text"] == "Skip to content" and skip["href"] == "#main" and skip["top"] >= 0  # shown when focused
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
    # The focus ring of a link, a button and a field: at least 3:1 against the page's white.
    page.keyboard.press("Tab")
    for selector in ("a[href]", "button", "input, select"):
        page.locator(f"main {selector}").first.focus()
        page.keyboard.press("Shift+Tab")
        page.keyboard.press("Tab")  # keyboard focus: :focus-visible applies
        style = page.evaluate(
            "() => { const s = getComputedStyle(document.activeElement);"
            " return { color: s.outlineColor, width: parseFloat(s.outlineWidth), style: s.outlineStyle }; }"
        )
        assert style["style"] != "none" and style["width"] >= 2, (selector, style)
        assert contrast(style["color"], "rgb(255, 255, 255)") >= 3, (selector, style)
    icon = page.evaluate("() => document.querySelector('link[rel=icon]').href")
    response = page.request.get(icon)
    assert response.status == 200 and response.headers["content-type"].startswith("image/")
    assert page.request.get(f"{site.url}/favicon.ico").status == 200  # redirected to the same file


# --------------------------------------------------------------------------------------------------
# Plain names, glossary, neighbourhood, chart labels


def test_batch_changes_name_edges_and_jargon_is_explained(site, pages):
    page = pages[1400]
    g = site.data["graph"].pk
    edge = site.data["edges"]["a>b"]
    change = WeightHistory.objects.filter(graph_id=g, edge__isnull=False).select_related("batch").first()
    page.goto(f"{site.url}/g/{g}/batches/{change.batch_id}/")
    text = page.locator("main").inner_text()
    assert not re.search(r"\bedge \d+\b", text), "a batch names its edges, never by id"
    manual = page.goto(f"{site.url}/g/{g}/batches/{site.data['batch'].pk}/")
    assert manual.status == 200
    assert f"{edge.source.title} -> {edge.edge_type.name} -> {edge.target.title}" in page.locator("main").inner_text()
    # The injection page: no bare jargon outside the glossary, which explains each term.
    page.goto(f"{site.url}/g/{g}/injections/{site.data['injection'].pk}/")
    glossary = page.locator("details.glossary")
    assert glossary.count() == 1
    outside = page.evaluate(
        "() => { const m = document.querySelector('main').cloneNode(true);"
        " m.querySelectorAll('details.glossary, script').forEach(e => e.remove()); return m.innerText; }"
    )
    for word in ("BM25", "Kendall", "entry point (vector)"):
        assert word not in outside, word
    glossary.locator("summary").click()
    for term in ("Triplet", "BM25", "Kendall τ", "Entry point", "Reciprocal rank"):
        assert term in glossary.inner_text(), term


@pytest.mark.parametrize("width", WIDTHS)
def test_neighbourhood_is_filtered_by_hops_and_type_and_bounded(site, pages, width):
    page = pages[width]
    g, node = site.data["graph"].pk, site.data["nodes"]["a"]
    page.goto(f"{site.url}/g/{g}/nodes/{node.pk}/")
    view = page.locator("#neighbourhood-graph")
    page.wait_for_selector("#neighbourhood-graph[data-state=ready]", timeout=15000)
    assert "limit=40" in view.get_attribute("data-graph-url")
    every = page.evaluate("() => document.getElementById('neighbourhood-graph').graph.edges().length")
    assert 0 < every <= 40
    form = page.locator("#neighbourhood-filters")
    form.get_by_label("Hops").select_option("1")
    form.get_by_label("Edge type").select_option("related")
    form.get_by_role("button", name="Show").click()
    page.wait_for_selector("#neighbourhood-graph[data-state=ready]", timeout=15000)
    shown = page.evaluate("() => document.getElementById('neighbourhood-graph').graph.edges().map(e => e.data('type'))")
    assert shown and set(shown) == {"related"}
    assert "hops=1" in page.url and "type=related" in page.url


LABELS_CLEAR = """() => {
  const hit = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const bad = [];
  for (const chart of document.querySelectorAll('div.chart')) {
    const svg = chart.querySelector('svg.main-svg').getBoundingClientRect();
    const legend = chart.querySelector('g.legend');
    const lb = legend ? legend.getBoundingClientRect() : null;
    for (const t of chart.querySelectorAll('g.xtick text, g.ytick text')) {
      const r = t.getBoundingClientRect();
      if (!r.width) continue;
      if (r.left < svg.left - 1 || r.right > svg.right + 1 || r.top < svg.top - 1 || r.bottom > svg.bottom + 1
          || (lb && hit(r, lb))) bad.push(chart.dataset.figure + ': ' + t.textContent);
    }
  }
  return bad;
}"""


@pytest.mark.parametrize("width", WIDTHS)
def test_chart_labels_fit_clear_of_the_legend(site, pages, width):
    page = pages[width]
    g = site.data["graph"].pk
    bad = {}
    for url in (f"/g/{g}/injections/{site.data['injection'].pk}/", f"/g/{g}/", f"/g/{g}/impact/"):
        page.goto(site.url + url)
        settle(page)
        labels = page.evaluate(LABELS_CLEAR)
        if labels:
            bad[url] = labels[:5]
    assert bad == {}
