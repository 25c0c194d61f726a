"""The what-if is honest (issue 39, item 1): numbers that change what retrieval finds re-run retrieval for the
logged questions (writing nothing), learning numbers are named in ``not_modelled`` with the reason, never a silent
"0 moved"; the operator picks the sessions (last N, an agent, days); where the first used item ranks, now and
under the draft, with a bootstrap interval; per flipped retrieval, whether the old and new top items were used."""

from datetime import timedelta

import pytest

from feedback import actions
from feedback.models import ContextInjection, InjectionCandidate
from graphadmin import clock
from graphadmin.models import AuditEvent, EdgeStats, NodeStats, PolicyRevision
from graphadmin.models.policy import POLICY_NUMBERS
from graphadmin_client import RetrievalRequest
from ranking import whatif
from ranking.context import assemble_context
from ranking.retrieval import prepare

pytestmark = pytest.mark.django_db


def url(graph):
    return f"/api/graphs/{graph.pk}/whatif/"


@pytest.fixture
def logged(rg, ada, abe, oscar):
    """Four sessions asking from start node a (k=1: the rest is reached along links, up to 2 hops), two of ada's and
    two of abe's, a day apart; each used its #1 item."""
    g, nodes = rg["graph"], rg["nodes"]
    start = clock.now() - timedelta(days=10)
    for n, owner in enumerate([ada, ada, abe, abe]):
        with clock.using(clock.SimulatedClock(start + timedelta(days=n))):
            ctx = assemble_context(
                prepare(
                    g,
                    RetrievalRequest(
                        session=f"s{n}", query="ranking weights", start_nodes=[nodes["a"].pk], k=1, budget=3
                    ),
                ),
                owner=owner,
                role="agent",
            )
            first = ctx.injection.candidates.get(rank=1)
            actions.do_record_uses(
                ctx.injection.session, [actions.UseItem("node", first.node_id, "explicit")], actor=oscar
            )
    return {"start": start, **rg}


def _snapshot():
    return (
        ContextInjection.objects.count(),
        InjectionCandidate.objects.count(),
        PolicyRevision.objects.count(),
        AuditEvent.objects.count(),
        list(NodeStats.objects.order_by("node_id").values_list("surfaced_count", flat=True)),
        list(EdgeStats.objects.order_by("edge_id").values_list("traversed_count", flat=True)),
    )


def test_every_policy_number_is_replayed_or_named_as_not_modelled():
    known = set(whatif.RESCORED) | set(whatif.GENERATION) | set(whatif.GATED) | set(whatif.NOT_MODELLED)
    assert set(POLICY_NUMBERS) | {"ceiling_mode"} <= known


def test_learning_numbers_are_named_not_a_silent_zero(logged, api, rita):
    body = api(rita).post(url(logged["graph"]), {"policy": {"decay_rate": 0.8, "learning_rate": 0.2}}, format="json")
    assert body.status_code == 200, body.content
    body = body.json()
    assert body["replayed"] == []
    assert {m["field"] for m in body["not_modelled"]} == {"decay_rate", "learning_rate"}
    assert all(m["reason"] for m in body["not_modelled"])


def test_max_hops_and_fan_out_re_run_retrieval_and_move_rankings_writing_nothing(logged, api, rita):
    before = _snapshot()
    body = api(rita).post(url(logged["graph"]), {"policy": {"max_hops": 1}, "n": 4}, format="json").json()
    assert body["method"] == "retrieve" and body["retrieved"] == ["max_hops"] and body["not_modelled"] == []
    assert body["selection"]["injections"] == 4 and not body["skipped"]
    # One link per note (a's strongest, to b): c and d, reached from a along weaker links, are no longer found.
    body = api(rita).post(url(logged["graph"]), {"policy": {"fanout_cap": 1}, "n": 4}, format="json").json()
    assert _snapshot() == before
    assert body["method"] == "retrieve" and body["retrieved"] == ["fanout_cap"]
    assert body["aggregate"]["candidates_found_or_lost"] > 0
    for row in body["injections"]:
        assert row["candidates_draft"] < row["candidates"] and row["dropped"] > 0
    # A rescore of the frozen candidates keeps the same sets.
    rescored = api(rita).post(url(logged["graph"]), {"policy": {"coef_hop": 0.21}}, format="json").json()
    assert rescored["method"] == "rescore" and rescored["aggregate"]["candidates_found_or_lost"] == 0


def test_rrf_k_re_runs_retrieval(logged, api, rita):
    body = api(rita).post(url(logged["graph"]), {"policy": {"rrf_k": 60}}, format="json").json()
    assert body["method"] == "retrieve" and body["retrieved"] == ["rrf_k"]
    assert body["selection"]["injections"] == 4 and not body["skipped"]


def test_the_operator_picks_the_sessions(logged, api, rita):
    client, g = api(rita), logged["graph"]
    assert client.post(url(g), {"n": 3}, format="json").json()["selection"]["sessions"] == 3
    mine = client.post(url(g), {"agent": "abe"}, format="json").json()
    assert {r["session"] for r in mine["injections"]} == {"s2", "s3"}
    day = (logged["start"] + timedelta(days=1)).date().isoformat()
    one_day = client.post(url(g), {"since": day, "until": day}, format="json").json()
    assert [r["session"] for r in one_day["injections"]] == ["s1"]


def test_first_used_rank_with_an_interval_and_flips_with_their_uses(logged, api, rita):
    g = logged["graph"]
    same = api(rita).post(url(g), {"policy": {"coef_hop": 0.2000001}}, format="json").json()
    f = same["first_used_rank"]
    assert f["injections"] == 4 and f["sessions"] == 4 and f["current"] == 1.0 and f["difference"] == 0.0
    assert f["interval"] == [0.0, 0.0]
    # Similarity to the question weighs ten times more: the best vector hit passes the used #1 (a lexical hit).
    body = api(rita).post(url(g), {"policy": {"coef_vector": 5.0}}, format="json").json()
    f = body["first_used_rank"]
    assert body["flipped"], body["injections"]
    assert f["draft"] > f["current"] == 1.0 and f["difference"] > 0
    lo, hi = f["interval"]
    assert lo <= f["difference"] <= hi
    for row in body["flipped"]:
        assert row["top_now_used"] is True and row["top_draft_used"] is False


def test_bootstrap_interval_is_seeded_and_needs_two_sessions():
    assert whatif.bootstrap_interval({"a": [1.0]}) is None
    values = {"a": [1.0, 2.0], "b": [0.0], "c": [3.0]}
    lo, hi = whatif.bootstrap_interval(values)
    assert lo <= 1.5 <= hi and whatif.bootstrap_interval(values) == (lo, hi)


def test_the_page_names_what_it_cannot_model_and_takes_a_selection(client, logged, oscar):
    from graphadmin.models import EdgeType

    g = logged["graph"]
    client.force_login(oscar)
    current = g.current_policy()
    data = {name: getattr(current, name) for name in POLICY_NUMBERS}
    data.update(ceiling_mode=current.ceiling_mode, decay_rate=0.8, max_hops=1, whatif_n=2, whatif_agent="abe")
    for et in EdgeType.objects.filter(graph=g):
        data[f"priority_{et.pk}"] = et.priority
    body = client.post(f"/g/{g.pk}/tune/preview/", data).content.decode()
    assert "retrieval re-run" in body and "of 2 logged session(s) of abe" in body
    assert "<code>decay_rate</code>" in body and "Not modelled here" in body
    data["whatif_agent"] = "nobody"
    assert "No session of this graph belongs to" in client.post(f"/g/{g.pk}/tune/preview/", data).content.decode()
    # The form: the numbers under plain headings, one line of help each.
    page = client.get(f"/g/{g.pk}/tune/").content.decode()
    for heading in ("Finding candidates", "Following links", "Scoring a note", "Learning from use", "Forgetting"):
        assert f"<legend>{heading}</legend>" in page
    assert "Links followed at most <code>max_hops</code>" in page
