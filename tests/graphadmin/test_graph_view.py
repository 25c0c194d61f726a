"""The graph views: their JSON endpoints (shape, bounds, tenancy, roles) and, in Chromium, the drawing itself.

On the ranked graph ``rg`` (tests/conftest.py):

    a -> b (related, .9)  a -> x (related, .8; x archived)  a -> c (depends_on, .6)  a -> d (derived_from, .3)
    b -> e (related, .5)  c -> e (related, .4)  e -> g (related, .5)  a -> f (related, .7; the edge archived)
"""

import pytest
from django.urls import reverse
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from graphadmin.models import Edge, EdgeType, Node
from graphadmin.notes.neighbourhood import DEFAULT_EDGES, MAX_EDGES, neighbourhood
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare
from ranking.subgraph import injection_subgraph
from tests.browser import chromium, login


def url(rg, key, **params):
    base = reverse("graph-neighbourhood", args=[rg["graph"].pk, rg["nodes"][key].pk])
    return base + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


@pytest.fixture
def injection(rg):
    ctx = assemble_context(
        prepare(
            rg["graph"],
            RetrievalRequest(
                session="s-graph", query="vector search in postgres", start_nodes=[rg["nodes"]["a"].pk], budget=3, k=1
            ),
        )
    )
    return ctx.injection


def ids(rg, *names):
    return [rg["edges"][n].pk for n in names]


# --- The neighbourhood of a node.


def test_neighbourhood_two_hops_strongest_first(client, rg, rita, django_assert_max_num_queries):
    client.force_login(rita)
    # Session, user, graph and role, node; first hop, second hop, nodes, edge types; the request's savepoint pair.
    with django_assert_max_num_queries(10):
        response = client.get(url(rg, "a"))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    data = response.json()
    assert [e["id"] for e in data["edges"]] == ids(rg, "a>b", "a>x", "a>c", "a>d", "b>e", "c>e")
    n = rg["nodes"]
    assert {node["id"]: node["hops"] for node in data["nodes"]} == {
        n["a"].pk: 0,
        n["b"].pk: 1,
        n["x"].pk: 1,
        n["c"].pk: 1,
        n["d"].pk: 1,
        n["e"].pk: 2,
    }  # f only through an archived edge; g three hops away
    first = data["edges"][0]
    assert first == {
        "id": rg["edges"]["a>b"].pk,
        "source": n["a"].pk,
        "target": n["b"].pk,
        "type": "related",
        "weight": 0.9,
        "feedback_weight": 0.5,
        "hops": 1,
        "url": reverse("edge", args=[rg["graph"].pk, rg["edges"]["a>b"].pk]),
    }
    by_id = {node["id"]: node for node in data["nodes"]}
    assert by_id[n["a"].pk]["status"] == "center" and by_id[n["e"].pk]["status"] == "hop2"
    assert by_id[n["x"].pk]["archived"] is True and by_id[n["b"].pk]["url"] == reverse(
        "node", args=[rg["graph"].pk, n["b"].pk]
    )
    assert data["types"] == sorted(EdgeType.objects.filter(graph=rg["graph"]).values_list("name", flat=True))
    assert data["truncated"] is False and data["limit"] == DEFAULT_EDGES  # 40 unless asked (issue 39)


def test_incoming_edges_count_and_one_hop(client, rg, rita):
    client.force_login(rita)
    data = client.get(url(rg, "e", hops=1)).json()
    assert [edge["id"] for edge in data["edges"]] == ids(rg, "b>e", "e>g", "c>e")  # in and out, by weight then id
    assert {node["hops"] for node in data["nodes"]} == {0, 1}


def test_bounded_and_truncated(client, rg, rita):
    client.force_login(rita)
    data = client.get(url(rg, "a", limit=2)).json()
    # Two thirds of the bound for the first hop (one edge), the rest for the second.
    assert [e["id"] for e in data["edges"]] == ids(rg, "a>b", "b>e") and data["truncated"] is True


def test_a_hub_is_bounded(rg, django_assert_max_num_queries):
    g, hub = rg["graph"], rg["nodes"]["g"]
    related = rg["types"]["related"]
    spokes = Node.objects.bulk_create([Node(graph=g, key=f"s{i}", title=f"Spoke {i}") for i in range(MAX_EDGES + 60)])
    Edge.objects.bulk_create(
        [Edge(graph=g, source=hub, target=s, edge_type=related, weight=(i % 100) / 100) for i, s in enumerate(spokes)]
    )
    ring = zip(spokes, spokes[1:] + spokes[:1], strict=True)
    Edge.objects.bulk_create([Edge(graph=g, source=s, target=t, edge_type=related) for s, t in ring])
    with django_assert_max_num_queries(4):
        data = neighbourhood(g.pk, hub.pk)
    assert len(data["edges"]) == MAX_EDGES and data["truncated"] is True
    first = [e for e in data["edges"] if e["hops"] == 1]
    assert len(first) == 100 and [e["weight"] for e in first] == sorted((e["weight"] for e in first), reverse=True)
    assert {e["hops"] for e in data["edges"]} == {1, 2}
    assert len({n["id"] for n in data["nodes"]}) == len(data["nodes"])


def test_filtered_by_edge_type(client, rg, rita):
    client.force_login(rita)
    every = client.get(url(rg, "a", hops=2)).json()
    assert len({e["type"] for e in every["edges"]}) > 1
    kept = every["edges"][0]["type"]
    data = client.get(url(rg, "a", hops=2, type=kept)).json()
    assert data["edges"] and {e["type"] for e in data["edges"]} == {kept} and data["edge_type"] == kept
    one_hop = client.get(url(rg, "a", hops=1)).json()
    filtered = client.get(url(rg, "a", hops=1, type=kept)).json()
    assert [e["id"] for e in filtered["edges"]] == [e["id"] for e in one_hop["edges"] if e["type"] == kept]


@pytest.mark.parametrize(
    "params, field",
    [
        ({"type": "no-such-type"}, "type"),
        ({"hops": 3}, "hops"),
        ({"hops": "two"}, "hops"),
        ({"limit": 0}, "limit"),
        ({"limit": MAX_EDGES + 1}, "limit"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(client, rg, rita, params, field):
    client.force_login(rita)
    response = client.get(url(rg, "a", **params))
    assert response.status_code == 400
    assert list(response.json()) == [field]


# --- The candidate subgraph of an injection.


def test_injection_subgraph_shape(client, rg, rita, injection, django_assert_max_num_queries):
    client.force_login(rita)
    # Session, user, graph and role, injection; candidates, edges, nodes, edge types; the savepoint pair.
    with django_assert_max_num_queries(10):
        response = client.get(reverse("injection-subgraph", args=[rg["graph"].pk, injection.pk]))
    assert response.status_code == 200
    data = response.json()
    candidates = list(injection.candidates.order_by("rank"))
    assert data["kind"] == "injection" and data["candidates"] == len(candidates) and data["truncated"] is False
    assert [p["rank"] for p in data["paths"]] == [c.rank for c in candidates]
    edge_ids = {e["id"] for e in data["edges"]}
    node_ids = {n["id"] for n in data["nodes"]}
    for path, cand in zip(data["paths"], candidates, strict=True):
        assert path["node"] == cand.node_id and path["selected"] == cand.selected
        assert set(path["edges"]) <= edge_ids and path["node"] in node_ids
    by_id = {n["id"]: n for n in data["nodes"]}
    assert by_id[rg["nodes"]["a"].pk]["entry"] == "start"
    selected_nodes = {c.node_id for c in candidates if c.selected}
    assert {n for n, node in by_id.items() if node["status"] == "selected"} == selected_nodes
    on_selected = {e for p in data["paths"] if p["selected"] for e in p["edges"]}
    assert {e["id"] for e in data["edges"] if e["selected"]} == on_selected
    for edge in data["edges"]:
        assert edge["source"] in node_ids and edge["target"] in node_ids
        assert set(edge) >= {"type", "weight", "feedback_weight", "url"}


def test_injection_subgraph_is_bounded_selected_first(rg, injection):
    # Expansion walks links both ways and carries relevance (ranking.scoring.spread), so which link reached
    # which candidate is read from the log; what is checked is the subgraph's rules: the selected candidates'
    # links first, bounded, and flagged selected exactly when on a selected path.
    candidates = list(injection.candidates.order_by("rank"))
    paths = {c.rank: c.features["path"] for c in candidates}
    assert paths[1] == []
    selected_links = [e for c in candidates if c.selected for e in c.features["path"]]
    assert selected_links  # a selected candidate came through a link
    data = injection_subgraph(injection, max_edges=1)
    assert [e["id"] for e in data["edges"]] == selected_links[:1] and data["truncated"] is True
    kept = {e["id"] for e in data["edges"]}
    assert all(set(p["edges"]) <= kept for p in data["paths"])  # only paths whose links all fit the bound
    flags = [p["selected"] for p in data["paths"]]
    assert flags[0] and flags == sorted(flags, reverse=True)  # selected ones first
    whole = injection_subgraph(injection)
    every = {e for path in paths.values() for e in path}
    assert sorted(e["id"] for e in whole["edges"]) == sorted(every)
    assert {e["id"]: e["selected"] for e in whole["edges"]} == {e: e in set(selected_links) for e in every}


# --- Tenancy and roles: as the pages.


@pytest.mark.parametrize("username", ["rita", "ana", "oscar", "alice"])
def test_every_role_of_the_org_reads_them(request, client, rg, injection, username):
    client.force_login(request.getfixturevalue(username))
    assert client.get(url(rg, "a")).status_code == 200
    assert client.get(reverse("injection-subgraph", args=[rg["graph"].pk, injection.pk])).status_code == 200


def test_another_org_gets_404(client, rg, injection, mallory, globex_graph):
    client.force_login(mallory)
    assert client.get(url(rg, "a")).status_code == 404
    assert client.get(reverse("injection-subgraph", args=[rg["graph"].pk, injection.pk])).status_code == 404
    # Nor through a graph of its own: the node and the injection belong to acme's graph.
    assert client.get(reverse("graph-neighbourhood", args=[globex_graph.pk, rg["nodes"]["a"].pk])).status_code == 404
    assert client.get(reverse("injection-subgraph", args=[globex_graph.pk, injection.pk])).status_code == 404


def test_a_node_of_another_graph_is_404(client, rg, alice, acme):
    from graphadmin import actions

    other = actions.do_create_graph(acme, "second", "Second graph", actor=alice)
    client.force_login(alice)
    assert client.get(reverse("graph-neighbourhood", args=[other.pk, rg["nodes"]["a"].pk])).status_code == 404


def test_login_required(client, rg, injection):
    for target in (url(rg, "a"), reverse("injection-subgraph", args=[rg["graph"].pk, injection.pk])):
        response = client.get(target)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_pages_embed_the_views(client, rg, injection, rita):
    client.force_login(rita)
    node_page = client.get(reverse("node", args=[rg["graph"].pk, rg["nodes"]["a"].pk])).content.decode()
    # The page's filters travel in the URL: two hops, every type, 40 edges unless asked.
    assert f'data-graph-url="{url(rg, "a")}?hops=2&amp;type=&amp;limit=40"' in node_page
    assert "vendor/cytoscape/cytoscape.min.js" in node_page
    assert "<table>" in node_page  # the neighbours table stays, the text alternative
    injection_page = client.get(reverse("injection", args=[rg["graph"].pk, injection.pk])).content.decode()
    assert f'data-graph-url="{reverse("injection-subgraph", args=[rg["graph"].pk, injection.pk])}"' in injection_page


# --- In Chromium: the canvas draws the nodes; a click and the keyboard open a node's page.

# Pixels painted on the view's canvases (Cytoscape draws with 2d contexts).
PAINTED = """(root) => [...root.querySelectorAll('canvas')].reduce((sum, c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return sum + n;
}, 0)"""


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def _ready(page, view_id):
    page.wait_for_selector(f"#{view_id}[data-state=ready]", timeout=15000)
    return page.locator(f"#{view_id}")


def _position(page, view_id, element_id, midpoint=False):
    """Page coordinates of a drawn node (or an edge's midpoint)."""
    box = page.locator(f"#{view_id} .graph-canvas").bounding_box()
    point = page.evaluate(
        f"""() => {{ const e = document.getElementById('{view_id}').graph.getElementById('{element_id}');
            return e.{"renderedMidpoint" if midpoint else "renderedPosition"}(); }}"""
    )
    return box["x"] + point["x"], box["y"] + point["y"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_node_view_draws_and_a_click_opens_a_node(live_server, browser, rg, rita):
    g, n = rg["graph"].pk, rg["nodes"]
    page = login(browser, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/g/{g}/nodes/{n['a'].pk}/")
    view = _ready(page, "neighbourhood-graph")
    assert page.evaluate("() => document.getElementById('neighbourhood-graph').graph.nodes().length") == 6
    assert view.evaluate(PAINTED) > 500  # the nodes and edges are on the canvas, not only in the DOM
    assert view.locator(".graph-legend").inner_text().count("related") == 1
    assert view.locator(".graph-list a").count() == 6 + 6  # six nodes, six edges: the linked lists
    x, y = _position(page, "neighbourhood-graph", f"n{n['b'].pk}")
    page.mouse.click(x, y)
    page.wait_for_url(f"{live_server.url}/g/{g}/nodes/{n['b'].pk}/", wait_until="domcontentloaded")
    _ready(page, "neighbourhood-graph")  # graph.json answered: no request in flight when the rows are flushed
    page.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_keyboard_tab_to_the_graph_arrow_and_enter(live_server, browser, rg, rita):
    g, n = rg["graph"].pk, rg["nodes"]
    page = login(browser, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/g/{g}/nodes/{n['a'].pk}/")
    _ready(page, "neighbourhood-graph")
    for _ in range(80):  # Tab through the page until the drawing has the focus
        page.keyboard.press("Tab")
        if page.evaluate("() => document.activeElement.classList.contains('graph-canvas')"):
            break
    else:
        pytest.fail("Tab never reached the graph")
    page.keyboard.press("ArrowRight")  # the first node: a itself
    page.keyboard.press("ArrowRight")  # then its strongest neighbour, b
    status = page.locator("#neighbourhood-graph .graph-status")
    assert status.inner_text().startswith("Ranking (2 of 6)")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/g/{g}/nodes/{n['b'].pk}/", wait_until="domcontentloaded")
    # The list of nodes is reachable and linked too.
    _ready(page, "neighbourhood-graph")
    page.locator("#neighbourhood-graph .graph-list a", has_text="Architecture").first.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/g/{g}/nodes/{n['a'].pk}/", wait_until="domcontentloaded")
    _ready(page, "neighbourhood-graph")  # no request in flight when the test's rows are flushed
    page.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_injection_view_draws_paths_and_an_edge_click_opens_the_edge(live_server, browser, rg, rita, injection):
    g = rg["graph"].pk
    data = injection_subgraph(injection)
    page = login(browser, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/g/{g}/injections/{injection.pk}/")
    view = _ready(page, "injection-graph")
    drawn = page.evaluate("() => document.getElementById('injection-graph').graph.nodes().length")
    assert drawn == len(data["nodes"]) and view.evaluate(PAINTED) > 500
    assert page.evaluate("() => document.getElementById('injection-graph').graph.nodes('.entry').length") >= 1
    assert "entry point" in view.locator(".graph-legend").inner_text()
    # An edge on a selected candidate's path: cut candidates and their edges are behind a toggle (issue 25).
    view.locator(".graph-canvas").scroll_into_view_if_needed()  # below the explanation, which comes first now
    # On a busy machine the page can still move after the graph is drawn (the explanation above it settling), so
    # a click at the position read a moment before can land beside the edge: the position is read again and the
    # click repeated, at most three times; a click that never opens the edge page still fails the test.
    for attempt in range(3):
        edge, (x, y) = _edge_under_pointer(page, "injection-graph", [e for e in data["edges"] if e["selected"]])
        page.mouse.click(x, y)
        try:
            # The click's navigation, not the edge page's own loading (its charts), is what this test is about.
            page.wait_for_url(f"{live_server.url}{edge['url']}", wait_until="commit", timeout=10_000)
            break
        except PlaywrightTimeoutError:
            if attempt == 2:
                raise
    page.close()


def _edge_under_pointer(page, view_id, edges):
    """An edge of ``edges`` and a point of it that the pointer reaches first (hovered, the view marks it), so
    the click lands on that edge and not on a node or another edge drawn over it: the layout's rows follow the
    candidates' order, which ties between runs can change."""
    box = page.locator(f"#{view_id} .graph-canvas").bounding_box()
    for edge in edges:
        for share in (0.5, 0.35, 0.65, 0.2, 0.8):
            point = page.evaluate(
                f"""() => {{ const e = document.getElementById('{view_id}').graph.getElementById('e{edge["id"]}');
                    const s = e.renderedSourceEndpoint(), t = e.renderedTargetEndpoint();
                    return {{x: s.x + {share} * (t.x - s.x), y: s.y + {share} * (t.y - s.y)}}; }}"""
            )
            x, y = box["x"] + point["x"], box["y"] + point["y"]
            page.mouse.move(x, y)
            hovered = f"() => document.getElementById('{view_id}').graph.getElementById('e{edge['id']}')"
            if page.evaluate(hovered + ".hasClass('hover')"):
                return edge, (x, y)
    raise AssertionError(f"no point of the selected edges {[e['id'] for e in edges]} reaches the pointer")
