"""The dashboard in headless Chromium: each role opens the pages, charts are actually drawn, outsiders get 404."""

import pytest
from django.utils import timezone

from feedback.models import UpdateBatch, WeightChange
from graphadmin.models import Edge
from tests.browser import chromium, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def history(acme_graph, small_graph):
    edge = Edge.objects.filter(graph=acme_graph).first()
    batch = UpdateBatch.objects.create(graph=acme_graph, kind="manual", started_at=timezone.now(), edge_updates=2)
    WeightChange.objects.create(batch=batch, graph=acme_graph, edge=edge, field="weight", before=0.5, after=0.55, event="explicit")
    WeightChange.objects.create(batch=batch, graph=acme_graph, edge=edge, field="weight", before=0.55, after=0.6, event="explicit")
    return batch, edge


def test_edge_history_chart_is_drawn(live_server, browser, acme_graph, history, rita):
    batch, edge = history
    page = login(browser, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/g/{acme_graph.pk}/edges/{edge.pk}/")
    page.wait_for_selector("#hist-h ~ div.chart svg.main-svg", timeout=15000)
    assert page.locator("div.chart .scatterlayer .trace").count() >= 1
    page.goto(f"{live_server.url}/g/{acme_graph.pk}/batches/{batch.pk}/")
    page.wait_for_selector("div.chart svg.main-svg", timeout=15000)


def test_outsider_sees_404(live_server, browser, acme_graph, history, mallory):
    page = login(browser, live_server.url, "mallory", "pw-mallory")
    response = page.goto(f"{live_server.url}/g/{acme_graph.pk}/")
    assert response.status == 404
