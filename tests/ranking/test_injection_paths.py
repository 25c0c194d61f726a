"""The injection page: each candidate's entry and path in words (linked), and why one candidate beat another."""

import pytest

from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare
from ranking.views import component_words


@pytest.fixture
def injection(rg):
    # One vector entry point (k=1), so the others are reached by following edges from it.
    ctx = assemble_context(
        prepare(rg["graph"], RetrievalRequest(session="paths", query="vector search in postgres", k=1, budget=3))
    )
    return ctx.injection


def _candidates(response):
    return {c["rank"]: c for c in response.context["explained"]["candidates"]}


def test_each_candidate_says_how_it_entered_and_its_path(client, rita, rg, injection):
    client.force_login(rita)
    g = rg["graph"].pk
    r = client.get(f"/g/{g}/injections/{injection.pk}/")
    assert r.status_code == 200
    by_rank = _candidates(r)
    entry = by_rank[1]
    assert entry["entry"] == "vector" and entry["entry_text"].startswith("found by its similarity to the question (")
    expanded = [c for c in by_rank.values() if c["entry"] == "expansion"]
    assert expanded
    for c in expanded:
        hops = len(c["path"])
        assert c["entry_text"].endswith(f"{hops} hop{'s' if hops != 1 else ''}")
        # node, edge, node, ... : one edge step per path edge, nodes at both ends, each a link on the page.
        assert [("edge" in s) for s in c["steps"]] == [False, *([True, False] * hops)]
    html = r.content.decode()
    two_hops = next(c for c in expanded if len(c["path"]) == 2)
    for e in two_hops["path"]:
        assert f'href="/g/{g}/edges/{e}/" class="path-edge"' in html
    assert f'href="/g/{g}/nodes/{two_hops["steps"][0]["node"]}/"' in html
    assert "-related-&gt;" in html


def test_why_1_beat_2_by_default_names_components_factors_and_edges(client, rita, rg, injection):
    client.force_login(rita)
    g = rg["graph"].pk
    r = client.get(f"/g/{g}/injections/{injection.pk}/")
    why = r.context["comparison"]["why"]
    assert (r.context["comparison"]["i"], r.context["comparison"]["j"]) == (1, 2)
    top = r.context["comparison"]["components"][0]
    # In plain words (issue 25): both notes by name and rank, the leading component in words.
    by_rank = _candidates(r)
    assert why["summary"].startswith(f"“{by_rank[1]['title']}” (#1) ranks above “{by_rank[2]['title']}” (#2)")
    assert component_words(top["component"]) in why["summary"]
    assert {f["factor"] for f in why["factors"]} >= {"vector", "hops"}
    # Rank 1 entered by vector (no path); rank 2's path edges are "rank 2 only".
    assert [e["id"] for e in why["only_j"]] == by_rank[2]["path"] and not why["only_i"] and not why["shared"]
    assert why["summary"] in r.content.decode()


def test_compare_two_paths_shares_and_differs(client, rita, rg, injection):
    client.force_login(rita)
    g = rg["graph"].pk
    by_rank = _candidates(client.get(f"/g/{g}/injections/{injection.pk}/"))
    # A two-hop candidate and the one-hop candidate it was reached through (their paths share that link).
    # Expansion walks links both ways, so more candidates are one hop away than before: the two shortest
    # paths are no longer a one-hop and a two-hop one, so the pair is picked by the link they share.
    two = next(c for c in by_rank.values() if len(c["path"]) == 2)
    one = next(c for c in by_rank.values() if c["path"] == two["path"][:1])
    assert (len(one["path"]), len(two["path"])) == (1, 2)  # a one-hop and a two-hop candidate
    r = client.get(f"/g/{g}/injections/{injection.pk}/?i={two['rank']}&j={one['rank']}", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    why = r.context["comparison"]["why"]
    shared = [e for e in two["path"] if e in one["path"]]
    assert [e["id"] for e in why["shared"]] == shared
    assert [e["id"] for e in why["only_i"]] == [e for e in two["path"] if e not in one["path"]]
    html = r.content.decode()
    assert "Edges on the two paths" in html and f"rank {two['rank']} only" in html and ">both<" in html


def test_bad_pair_is_named(client, rita, rg, injection):
    client.force_login(rita)
    r = client.get(f"/g/{rg['graph'].pk}/injections/{injection.pk}/?i=1&j=99")
    assert r.status_code == 200 and "j: No candidate at rank 99" in r.content.decode()
    assert r.context["comparison"] is None
