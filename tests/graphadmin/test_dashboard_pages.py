"""Dashboard pages answer for members, 404 for other organizations, and need a login."""

import pytest
from django.utils import timezone

from feedback.models import UpdateBatch, WeightChange
from graphadmin import audit
from graphadmin.models import Edge


@pytest.fixture
def history(acme_graph, small_graph, alice):
    edge = Edge.objects.filter(graph=acme_graph).first()
    batch = UpdateBatch.objects.create(graph=acme_graph, kind="manual", started_at=timezone.now(), edge_updates=1)
    WeightChange.objects.create(
        batch=batch, graph=acme_graph, edge=edge, field="weight", before=0.5, after=0.55, event="explicit"
    )
    WeightChange.objects.create(
        batch=batch,
        graph=acme_graph,
        node=small_graph["b"],
        field="feedback_weight",
        before=0.5,
        after=0.6,
        event="accepted",
    )
    audit.append(acme_graph.organization, alice, "test.event", {"n": 1})
    return batch, edge


def _pages(graph, nodes, batch, edge):
    g = graph.pk
    return [
        f"/g/{g}/",
        f"/g/{g}/nodes/{nodes['b'].pk}/",
        f"/g/{g}/edges/{edge.pk}/",
        f"/g/{g}/batches/",
        f"/g/{g}/batches/?kind=manual&status=applied",
        f"/g/{g}/batches/{batch.pk}/",
        f"/g/{g}/audit/",
        f"/g/{g}/audit/?action=test.event&actor=alice",
    ]


def test_reviewer_opens_every_page(client, acme_graph, small_graph, history, rita):
    client.force_login(rita)
    for url in _pages(acme_graph, small_graph, *history):
        response = client.get(url)
        assert response.status_code == 200, url
    page = client.get(f"/g/{acme_graph.pk}/edges/{history[1].pk}/").content.decode()
    assert "history-figure" in page and "vendor/plotly/plotly-basic-4.1.1.min.js" in page


def test_outsider_gets_404_everywhere(client, acme_graph, small_graph, history, mallory):
    client.force_login(mallory)
    for url in _pages(acme_graph, small_graph, *history):
        assert client.get(url).status_code == 404, url


def test_login_required(client, acme_graph, small_graph, history):
    for url in _pages(acme_graph, small_graph, *history):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url


def test_overview_badge_names_broken_seq(client, acme_graph, history, rita):
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute("UPDATE graphadmin_auditevent SET payload = '{}' WHERE action = 'test.event'")
        cur.execute("SET session_replication_role = DEFAULT")
    client.force_login(rita)
    page = client.get(f"/g/{acme_graph.pk}/").content.decode()
    assert "Audit chain broken at seq 2" in page


def test_pages_have_bounded_queries(client, acme_graph, small_graph, history, rita, django_assert_max_num_queries):
    client.force_login(rita)
    for url in _pages(acme_graph, small_graph, *history):
        # 16: the overview, the heaviest, reads whether the graph is ready besides (graphadmin.readiness).
        with django_assert_max_num_queries(16):
            client.get(url)


@pytest.fixture
def injection(rg, alice):
    from graphadmin_client import RetrievalRequest
    from ranking.context import assemble_context
    from ranking.retrieval import prepare

    nodes = rg["nodes"]
    return assemble_context(
        prepare(
            rg["graph"],
            RetrievalRequest(session="s-1", query="vector search in postgres", start_nodes=[nodes["a"].pk], budget=2),
        )
    ).injection


def test_explain_pages(client, rg, injection, rita, mallory):
    g = rg["graph"].pk
    client.force_login(rita)
    listing = client.get(f"/g/{g}/explain/?session=s-1").content.decode()
    assert f"/g/{g}/injections/{injection.pk}/" in listing
    assert f"/g/{g}/injections/{injection.pk}/" in client.get(f"/g/{g}/explain/?node=b").content.decode()
    assert "No injections match" in client.get(f"/g/{g}/explain/?session=nope").content.decode()
    page = client.get(f"/g/{g}/injections/{injection.pk}/?i=1&j=2").content.decode()
    assert "components-figure" in page and "Why rank 1 beat rank 2" in page
    assert f"/g/{g}/nodes/{rg['nodes']['b'].pk}/" in page  # every candidate links to its source text
    assert "Cut (" in page
    partial = client.get(f"/g/{g}/injections/{injection.pk}/?i=1&j=99", HTTP_HX_REQUEST="true").content.decode()
    assert "No candidate at rank 99" in partial and "<html" not in partial
    client.force_login(mallory)
    assert client.get(f"/g/{g}/injections/{injection.pk}/").status_code == 404
    assert client.get(f"/g/{g}/explain/").status_code == 404


def test_overview_counts_come_from_the_rollup_when_there_is_one(client, acme_graph, small_graph, rita):
    from datetime import date

    from feedback import metrics

    client.force_login(rita)
    page = client.get(f"/g/{acme_graph.pk}/").content.decode()
    assert "<dt>Nodes</dt><dd>3</dd>" in page and "as of the metrics rollup" not in page  # live count
    metrics.rollup(acme_graph, date.today())
    small_graph["c"].archived = True
    small_graph["c"].save()
    page = client.get(f"/g/{acme_graph.pk}/").content.decode()
    assert "<dt>Nodes</dt><dd>3</dd>" in page and "as of the metrics rollup" in page  # the rollup's count
