"""Policy history you can act on: preview and restore a previous revision; per revision, the top-used share
before and after it took effect."""

from datetime import UTC, datetime, timedelta

import pytest

from feedback import actions, metrics
from graphadmin import actions as core_actions
from graphadmin import clock
from graphadmin.embeddings import embed_texts
from graphadmin.models import AuditEvent, Node, PolicyRevision
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare
from tests.conftest import HASHING


@pytest.fixture
def revised(rg, alice):
    """r1 (defaults), r2 with a different vector coefficient and learning rate: r1 is the one to restore."""
    core_actions.do_set_policy(rg["graph"], {"coef_vector": 1.2, "learning_rate": 0.3}, actor=alice, note="experiment")
    assemble_context(prepare(rg["graph"], RetrievalRequest(session="w", query="vector search in postgres", budget=2)))
    return rg["graph"]


def test_preview_shows_the_changes_and_the_whatif_and_writes_nothing(client, oscar, revised):
    client.force_login(oscar)
    before = PolicyRevision.objects.filter(graph=revised).count()
    r = client.get(f"/g/{revised.pk}/tune/revisions/1/preview/", HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    assert r.context["changes"] == {"coef_vector": (1.2, 0.6), "learning_rate": (0.3, 0.1)}
    assert r.context["result"]["aggregate"]["injections"] == 1
    html = r.content.decode()
    assert "Restore r1" in html and 'id="restore-whatif-summary"' in html
    assert f'action="/g/{revised.pk}/tune/revisions/1/restore/"' in html
    assert PolicyRevision.objects.filter(graph=revised).count() == before
    # Without htmx it is a page of its own.
    assert "<h1" not in html
    assert client.get(f"/g/{revised.pk}/tune/revisions/1/preview/").status_code == 200


def test_restore_writes_a_new_revision_with_the_old_numbers_audited(client, oscar, revised):
    client.force_login(oscar)
    r1 = PolicyRevision.objects.get(graph=revised, revision=1)
    r = client.post(f"/g/{revised.pk}/tune/revisions/1/restore/", {"note": ""})
    assert r.status_code == 302
    current = revised.current_policy()
    assert current.revision == 3 and current.numbers() == r1.numbers() and current.note == "restore r1"
    event = AuditEvent.objects.filter(action="policy.update").order_by("-seq").first()
    assert event.actor == "user:oscar" and event.payload["revision"] == 3 and event.payload["note"] == "restore r1"
    assert event.payload["changes"]["coef_vector"] == {"before": 1.2, "after": 0.6}
    page = client.get(f"/g/{revised.pk}/tune/").content.decode()
    assert "Restored r1 as r3" in page
    # Restoring what is already in effect changes nothing.
    client.post(f"/g/{revised.pk}/tune/revisions/3/restore/")
    assert revised.current_policy().revision == 3


def test_restore_refuses_bad_input_and_roles(client, rita, ana, oscar, mallory, revised):
    g = revised.pk
    client.force_login(oscar)
    assert client.get(f"/g/{g}/tune/revisions/1/restore/").status_code == 405
    assert client.post(f"/g/{g}/tune/revisions/9/restore/").status_code == 404
    assert client.get(f"/g/{g}/tune/revisions/9/preview/").status_code == 404
    r = client.post(f"/g/{g}/tune/revisions/1/restore/", {"note": "x" * 501}, follow=True)
    assert "note: at most 500 characters" in r.content.decode()
    assert revised.current_policy().revision == 2
    for user, status in ((rita, 403), (ana, 403), (mallory, 404)):
        client.force_login(user)
        assert client.get(f"/g/{g}/tune/revisions/1/preview/").status_code == status
        assert client.post(f"/g/{g}/tune/revisions/1/restore/").status_code == status
    assert revised.current_policy().revision == 2


def test_effects_compare_the_top_used_share_before_and_after(client, settings, acme, ana, alice, rita, mallory):
    """A graph made on day 0 (r1); days 1-2 under r1 where the top item is used; r2 on day 3; days 4-7 without use."""
    settings.EMBEDDER = HASHING
    start = datetime.now(UTC).replace(hour=9, minute=0, second=0, microsecond=0) - timedelta(days=10)
    sim = clock.SimulatedClock(start)
    with clock.using(sim):
        g = core_actions.do_create_graph(acme, "history", "History", actor=alice)
        texts = {"pg": "vector search in postgres with pgvector", "decay": "decay of weights per period"}
        for (key, text), vec in zip(texts.items(), embed_texts(list(texts.values())), strict=True):
            Node.objects.create(graph=g, key=key, title=key, text=text, embedding=vec)
        for day in range(1, 8):
            sim.set(start + timedelta(days=day))
            if day == 3:
                core_actions.do_set_policy(g, {"coef_hop": 0.4}, actor=alice, note="more hops")
                continue
            ctx = assemble_context(
                prepare(g, RetrievalRequest(session=f"d{day}", query="vector search in postgres", budget=2))
            )
            if day < 3:
                top = ctx.injection.candidates.get(rank=1)
                actions.do_record_uses(
                    ctx.injection.session, [actions.UseItem("node", top.node_id, "explicit")], actor=ana
                )
    for day in range(9):
        metrics.rollup(g, (start + timedelta(days=day)).date())
    client.force_login(ana)
    r = client.get(f"/g/{g.pk}/policy/effects/")
    assert r.status_code == 200
    rows = {row["revision"].revision: row for row in r.context["effects"]}
    assert rows[2]["revision"].created_at.date() == (start + timedelta(days=3)).date()
    assert (rows[2]["before"]["sessions"], rows[2]["before"]["used"]) == (2, 2)  # days 1-2 (day 0 made r1)
    assert (rows[2]["after"]["sessions"], rows[2]["after"]["used"]) == (4, 0)  # days 4-7
    assert rows[2]["change"] == pytest.approx(-1.0)
    assert rows[1]["before"] is None
    html = r.content.decode()
    assert "Did each policy revision help?" in html and "▼" in html
    # The tune page loads it as a partial; reviewers may not read it, another organization does not see it.
    assert "policy-effects" in client.get(f"/g/{g.pk}/policy/effects/", HTTP_HX_REQUEST="true").content.decode()
    client.force_login(rita)
    assert client.get(f"/g/{g.pk}/policy/effects/").status_code == 403
    client.force_login(mallory)
    assert client.get(f"/g/{g.pk}/policy/effects/").status_code == 404
