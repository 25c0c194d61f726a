"""Issue 17's pages and controls in headless Chromium, as each role: what each sees, what each is refused.

One live server and one set of rows for the whole module (``tests.system.site.live_site``): acme's cast
(alice admin, oscar operator, ana analyst, rita reviewer; passwords ``pw-<name>``) on the ranked graph
of tests/conftest.py, with three weeks of sessions on a simulated clock (a policy change and a decay
run among them) and daily rollups; mallory (globex) must get 404 everywhere. The pages: learning at a
glance (overview), the graph views on node and injection pages (drawing, keyboard, text alternative),
the path in words and "why #1 beat #2", the markdown note with its wikilinks, the session list and a
session, policy restore with its what-if preview, and the per-revision effects. Tests that write (the
restores) come last.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth import get_user_model

from feedback import actions, learning, metrics
from feedback.models import InjectionCandidate
from graphadmin import actions as core_actions
from graphadmin import clock
from graphadmin.embeddings import embed_texts
from graphadmin.models import Edge, EdgeType, Membership, Node, Organization, PolicyRevision
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare
from ranking.subgraph import injection_subgraph
from tests.conftest import EDGES, HASHING, TEXTS
from tests.system.site import module_site

pytestmark = pytest.mark.browser

USERS = {"alice": "admin", "oscar": "operator", "ana": "analyst", "rita": "reviewer"}
ROLE_ORDER = ["reviewer", "analyst", "operator", "admin"]
W0 = datetime.combine(learning.week_start(datetime.now(UTC).date()) - timedelta(weeks=3), time(9), tzinfo=UTC)
NOTE = """# Architecture

The service stores agent memory as a graph in PostgreSQL. Ranking is in [[b|the ranking note]];
see also [[Nowhere to be found]].

```
code keeps [[b]] as text
```
"""


def at_least(role: str, needed: str) -> bool:
    return ROLE_ORDER.index(role) >= ROLE_ORDER.index(needed)


def _session(graph, actor, name, at, *, use_rank=None, outcome=None, owner=None, **kwargs):
    with clock.using(clock.SimulatedClock(at)):
        ctx = assemble_context(
            prepare(graph, RetrievalRequest(session=name, query="vector search in postgres", **kwargs)), owner=owner
        )
        if use_rank is not None:
            node = next(c.node_id for c in ctx.injection.candidates.all() if c.selected and c.rank == use_rank)
            actions.do_record_uses(ctx.injection.session, [actions.UseItem("node", node, "explicit")], actor=actor)
        if outcome:
            actions.do_apply_outcome(graph, name, outcome, actor=actor)
    return ctx.injection


def build() -> dict:
    """The cast, the ranked graph (its note ``a`` in markdown with links) and three weeks of history."""
    User = get_user_model()
    acme = Organization.objects.create(slug="acme", name="Acme")
    globex = Organization.objects.create(slug="globex", name="Globex")
    users = {}
    for name, role in [*USERS.items(), ("mallory", "admin")]:
        users[name] = User.objects.create_user(username=name, password=f"pw-{name}")
        Membership.objects.create(user=users[name], organization=globex if name == "mallory" else acme, role=role)
    with clock.using(clock.SimulatedClock(W0 - timedelta(weeks=1))):
        graph = core_actions.do_create_graph(acme, "memory", "Acme memory", actor=users["alice"])
        core_actions.do_create_graph(globex, "memory", "Globex memory", actor=users["mallory"])
        texts = {**TEXTS, "a": ("Architecture", NOTE)}
        vectors = embed_texts([f"{t}\n{x}" for t, x in texts.values()])
        nodes = {
            key: Node.objects.create(graph=graph, key=key, title=title, text=text, embedding=vec, archived=key == "x")
            for (key, (title, text)), vec in zip(texts.items(), vectors, strict=True)
        }
        types = {t.name: t for t in EdgeType.objects.filter(graph=graph)}
        edges = {
            f"{s}>{t}": Edge.objects.create(
                graph=graph,
                source=nodes[s],
                target=nodes[t],
                edge_type=types[kind],
                weight=w,
                archived=(s, t) == ("a", "f"),
            )
            for s, t, kind, w in EDGES
        }
        # Two notes no retrieval reaches, linked: the decay run has an edge to decay.
        far = [Node.objects.create(graph=graph, key=f"far-{n}", title=f"Far {n}", text="unreached") for n in (1, 2)]
        Edge.objects.create(graph=graph, source=far[0], target=far[1], edge_type=types["related"], weight=0.8)
    ana, oscar = users["ana"], users["oscar"]
    _session(graph, ana, "s-used", W0, use_rank=1, outcome="accepted", budget=3)
    _session(graph, ana, "s-rework", W0 + timedelta(days=1), outcome="rework", budget=3)
    with clock.using(clock.SimulatedClock(W0 + timedelta(days=8))):
        core_actions.do_set_policy(graph, {"coef_vector": 1.1}, actor=oscar, note="more similarity")
    _session(graph, ana, "s-later", W0 + timedelta(days=9), use_rank=1, outcome="accepted", budget=3)
    decay_at = W0 + timedelta(days=15)
    with clock.using(clock.SimulatedClock(decay_at)):
        assert actions.do_decay(graph, actor="task:test", now=decay_at).edge_updates > 0
    injection = _session(
        graph, ana, "s-graph", W0 + timedelta(days=16), start_nodes=[nodes["a"].pk], budget=6, k=1
    )  # one hit per entry side: the others are reached along edges, with paths (the budget leaves room for
    # the note earlier sessions used for this question, which their evidence now brings in)
    for n in range(17):
        metrics.rollup(graph, (W0 + timedelta(days=n)).date())
    return {"graph": graph, "nodes": nodes, "edges": edges, "injection": injection, "users": users}


_live_server_helper, site, browser = module_site(build, EMBEDDER=HASHING)


def _ready(page, view_id):
    page.wait_for_selector(f"#{view_id}[data-state=ready]", timeout=15000)
    return page.locator(f"#{view_id}")


def _status(page, url, method="GET"):
    """The status of a same-origin request from the page (with its CSRF token for a POST)."""
    return page.evaluate(
        """async ([url, method]) => {
            const c = document.cookie.split('; ').find(c => c.startsWith('csrftoken='));
            const headers = method === 'POST' && c ? {'X-CSRFToken': c.split('=')[1]} : {};
            return (await fetch(url, {method, headers, redirect: 'manual'})).status;
        }""",
        [url, method],
    )


# --------------------------------------------------------------------------------------------------
# Learning at a glance (overview): every member


@pytest.mark.parametrize("username", list(USERS))
def test_learning_at_a_glance_chart_marks_and_table(site, as_user, username):
    g = site.data["graph"].pk
    page = as_user(username)
    assert page.goto(f"{site.url}/g/{g}/").status == 200
    section = page.locator("#learning-glance")
    section.locator("div.chart svg.main-svg").first.wait_for(timeout=15000)
    # Two lines drawn (share and mean score), and one line per mark: the policy change and the decay run.
    assert section.locator("g.scatterlayer g.trace").count() == 2
    assert section.locator(".shapelayer path").count() == 2
    labels = section.locator("g.annotation").all_text_contents()
    assert [t.strip() for t in labels] == ["policy r2", "decay"]
    # The text alternative: one row per week, the same figures and the marks in words.
    rows = section.locator("#learning-table tbody tr")
    assert rows.count() == 4  # from the first week with a session (W0) to this one
    weeks = {r.locator("td").first.inner_text(): r.inner_text() for r in rows.all()}
    first = weeks[W0.date().isoformat()].split("\t")
    assert first[1:6] == ["2", "1", "50%", "2", "0.75"]
    assert "policy r2 (more similarity)" in weeks[(W0 + timedelta(weeks=1)).date().isoformat()]
    assert "decay, period" in weeks[(W0 + timedelta(weeks=2)).date().isoformat()]
    effects = section.get_by_role("link", name="Did each policy revision help?")
    assert effects.count() == (1 if at_least(USERS[username], "analyst") else 0)


# --------------------------------------------------------------------------------------------------
# The node page: graph view (drawing, keyboard, list), the note as markdown with its wikilinks


@pytest.mark.parametrize("username", list(USERS))
def test_node_page_graph_view_keyboard_and_note(site, as_user, username):
    g, n = site.data["graph"].pk, site.data["nodes"]
    page = as_user(username)
    assert page.goto(f"{site.url}/g/{g}/nodes/{n['a'].pk}/").status == 200
    view = _ready(page, "neighbourhood-graph")
    # The six notes, and the question nodes of the sessions that used one of them (their learned
    # ``answered`` edges, the question evidence, are drawn like any edge).
    answered = page.evaluate(
        "() => document.getElementById('neighbourhood-graph').graph.edges()"
        ".filter(e => e.data('type') === 'answered').map(e => e.data('source'))"
    )
    questions = len(set(answered))
    assert page.evaluate("() => document.getElementById('neighbourhood-graph').graph.nodes().length") == 6 + questions
    # The text alternative: every drawn node and edge as a link.
    assert view.locator(".graph-list a").count() == (6 + questions) + (6 + len(answered))
    # The note: markdown rendered, the resolved wikilink a link to its node, the unresolved one marked,
    # the code block kept as text.
    note = page.locator(".note-body")
    assert note.locator("h1", has_text="Architecture").count() == 1
    assert note.locator("span.wikilink.unresolved", has_text="Nowhere to be found").count() == 1
    assert "code keeps [[b]] as text" in note.locator("pre").inner_text()
    assert not page.locator(".note-source pre").is_visible()  # the markdown source: folded away
    # Keyboard: Tab reaches the drawing, arrows move, Enter opens the node.
    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.classList.contains('graph-canvas')"):
            break
    else:
        pytest.fail("Tab never reached the graph")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert view.locator(".graph-status").inner_text().startswith(f"Ranking (2 of {6 + questions})")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{site.url}/g/{g}/nodes/{n['b'].pk}/", wait_until="domcontentloaded")
    # Back on a, the wikilink leads to the note it names.
    page.goto(f"{site.url}/g/{g}/nodes/{n['a'].pk}/")
    page.locator(".note-body").get_by_role("link", name="the ranking note").click()
    page.wait_for_url(f"{site.url}/g/{g}/nodes/{n['b'].pk}/", wait_until="domcontentloaded")
    _ready(page, "neighbourhood-graph")  # its graph.json answered: nothing in flight after the test


# --------------------------------------------------------------------------------------------------
# The injection page: candidate graph, the path in words, why #1 beat #2 and the compare control


@pytest.mark.parametrize("username", list(USERS))
def test_injection_page_paths_in_words_and_why(site, as_user, username):
    g, injection = site.data["graph"].pk, site.data["injection"]
    page = as_user(username)
    assert page.goto(f"{site.url}/g/{g}/injections/{injection.pk}/").status == 200
    view = _ready(page, "injection-graph")
    data = injection_subgraph(injection)
    assert page.evaluate("() => document.getElementById('injection-graph').graph.nodes().length") == len(data["nodes"])
    assert page.evaluate("() => document.getElementById('injection-graph').graph.nodes('.entry').length") >= 1
    assert view.locator(".graph-list a").count() >= len(data["nodes"])
    # Each candidate says how it entered and, when it came along edges, its path in words.
    given = page.get_by_role("table", name="Candidates given to the agent")
    text = given.inner_text()
    assert "found by its similarity to the question" in text and "vector: " not in text  # words, not code names
    # Expansion walks links both ways (a backlink reads "<-type-"), so which hit a candidate was reached from
    # depends on the carried relevance; the path is told in words either way.
    assert "reached by following edges from an entry point: from " in text
    assert "-related-> " in text or " <-related-" in text
    assert given.locator("a.path-edge").count() >= 1
    # Why #1 beat #2 (shown by default), then another pair through the compare control (htmx).
    comparison = page.locator("#comparison")
    assert comparison.get_by_role("heading", name="Why rank 1 beat rank 2").count() == 1
    assert comparison.locator("p.why-summary").inner_text()
    page.get_by_label("Rank j").select_option("3")
    page.get_by_role("button", name="Compare").click()
    comparison.get_by_role("heading", name="Why rank 1 beat rank 3").wait_for(timeout=10000)
    assert page.url.endswith(f"/injections/{injection.pk}/")  # swapped in place, no navigation


# --------------------------------------------------------------------------------------------------
# Sessions: the filterable list and one session's story


@pytest.mark.parametrize("username", list(USERS))
def test_session_list_filters_and_a_session_page(site, as_user, username):
    g = site.data["graph"].pk
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sessions").click()
    page.wait_for_url(f"**/g/{g}/sessions/", wait_until="domcontentloaded")
    assert page.locator("#session-list tbody tr").count() == 4
    page.get_by_label("Outcome").select_option("accepted")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**outcome=accepted**", wait_until="domcontentloaded")
    assert page.locator("#session-list tbody tr").count() == 2
    page.get_by_label("Outcome").select_option("none")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**outcome=none**", wait_until="domcontentloaded")
    assert page.locator("#session-list tbody tr").count() == 1
    page.get_by_role("link", name="s-graph").click()
    page.wait_for_url(f"**/g/{g}/sessions/s-graph/", wait_until="domcontentloaded")
    timeline = page.get_by_role("list", name="What happened in this session, in time order")
    assert "vector search in postgres" in timeline.inner_text()
    page.goto(f"{site.url}/g/{g}/sessions/s-used/")
    text = page.get_by_role("list", name="What happened in this session, in time order").inner_text()
    assert "Use report" in text and "Outcome: accepted" in text and text.count("Batch #") == 2
    # From the session to its injection.
    injection = InjectionCandidate.objects.filter(graph=site.data["graph"], injection__session__external_id="s-used")
    injection_id = injection.values_list("injection_id", flat=True).first()
    page.get_by_role("link", name=f"injection #{injection_id}").first.click()
    page.wait_for_url(f"**/g/{g}/injections/{injection_id}/", wait_until="domcontentloaded")
    _ready(page, "injection-graph")


# --------------------------------------------------------------------------------------------------
# What the roles below operator are refused; what another organization gets


@pytest.mark.parametrize("username", ["ana", "rita"])
def test_below_operator_no_restore_and_effects_for_analysts(site, as_user, username):
    g = site.data["graph"].pk
    role = USERS[username]
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/")
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Edge types & policy").count() == 0
    assert page.goto(f"{site.url}/g/{g}/tune/").status == 403
    assert page.goto(f"{site.url}/g/{g}/tune/revisions/1/preview/").status == 403
    page.goto(f"{site.url}/g/{g}/sessions/")  # a page of ours, for the CSRF cookie
    revisions = PolicyRevision.objects.filter(graph_id=g).count()
    assert _status(page, f"{site.url}/g/{g}/tune/revisions/1/restore/", "POST") == 403
    assert PolicyRevision.objects.filter(graph_id=g).count() == revisions
    # The per-revision effects: analysts read them on their own page; reviewers are refused.
    response = page.goto(f"{site.url}/g/{g}/policy/effects/")
    if at_least(role, "analyst"):
        assert response.status == 200
        table = page.locator("#policy-effects table")
        assert table.locator("tbody tr").count() == 2 and "r2" in table.inner_text()
        assert page.get_by_role("link", name="Edge types & policy").count() == 0  # no restore offered
    else:
        assert response.status == 403


def test_another_organization_gets_404_on_every_page_and_control(site, as_user):
    d = site.data
    g, injection = d["graph"].pk, d["injection"].pk
    page = as_user("mallory")
    for url in [
        f"/g/{g}/",
        f"/g/{g}/nodes/{d['nodes']['a'].pk}/",
        f"/g/{g}/nodes/{d['nodes']['a'].pk}/graph.json",
        f"/g/{g}/injections/{injection}/",
        f"/g/{g}/injections/{injection}/?i=1&j=3",
        f"/g/{g}/injections/{injection}/graph.json",
        f"/g/{g}/sessions/",
        f"/g/{g}/sessions/s-used/",
        f"/g/{g}/tune/",
        f"/g/{g}/tune/revisions/1/preview/",
        f"/g/{g}/policy/effects/",
    ]:
        assert page.goto(site.url + url).status == 404, url
    page.goto(f"{site.url}/")
    assert _status(page, f"{site.url}/g/{g}/tune/revisions/1/restore/", "POST") == 404


# --------------------------------------------------------------------------------------------------
# Operators and admins: the effects on the tune page, preview restoring, then restore (these write: last)


@pytest.mark.parametrize("username", ["oscar", "alice"])
def test_operator_sees_effects_previews_and_restores(site, as_user, username):
    g = site.data["graph"]
    # An experiment to undo: r1's numbers differ from it in coef_vector.
    core_actions.do_set_policy(g, {"coef_vector": 1.3}, actor=site.data["users"]["alice"], note="experiment")
    before = g.current_policy().revision
    page = as_user(username)
    page.goto(f"{site.url}/g/{g.pk}/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Edge types & policy").click()
    page.wait_for_url(f"**/g/{g.pk}/tune/", wait_until="domcontentloaded")
    page.wait_for_selector("#policy-effects table")  # the per-revision share, loaded by htmx
    assert "r2" in page.locator("#policy-effects").inner_text()
    page.get_by_role("link", name="Preview restoring r1").click()
    page.wait_for_selector("#restore-whatif-summary")
    preview = page.locator("#restore-preview")
    assert "coef_vector" in preview.inner_text() and "Replayed" in preview.inner_text().replace("replayed", "Replayed")
    assert g.current_policy().revision == before  # the preview wrote nothing
    page.get_by_role("button", name="Restore r1").click()
    page.wait_for_selector(f"text=Restored r1 as r{before + 1}")
    current = g.current_policy()
    assert (
        current.revision == before + 1
        and current.coef_vector == PolicyRevision.objects.get(graph=g, revision=1).coef_vector
    )
