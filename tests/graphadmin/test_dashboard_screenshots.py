"""Screenshots of every dashboard page on the demo graph, taken in headless Chromium into docs/screenshots/.

They are what the README shows; the test also checks each page answered 200 and drew its charts.
"""

from datetime import date
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from feedback import actions, metrics
from feedback.demo import ensure_demo
from feedback.models import ContextInjection, UpdateBatch, WeightChange
from graphadmin.models import Edge
from ranking import service
from tests.browser import chromium, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _activity(graph):
    """A little real traffic on the demo graph when it has none yet: sessions, uses, an outcome, a rollup."""
    if ContextInjection.objects.filter(graph=graph).exists():
        return
    agent = get_user_model().objects.get(username="analyst")
    for n, query in enumerate(["how are parcels tracked", "why kafka for events", "routing engine dependencies"]):
        ctx = service.assemble_context(graph, session_id=f"demo-{n}", query=query, budget=5)
        used = next((i for i in ctx.selected if i["path"]), ctx.selected[0])
        items = [actions.UseItem("node", used["node"], "explicit")]
        if not used["path"]:  # an edge with history for the edge page: one leaving the used note
            edge = Edge.objects.filter(graph=graph, source_id=used["node"], archived=False).order_by("id").first()
            items += [actions.UseItem("edge", edge.pk, "explicit")] if edge else []
        actions.do_record_uses(ctx.injection.session, items, actor=agent)
        actions.do_apply_outcome(graph, f"demo-{n}", ["accepted", "rework", "rejected"][n], actor=agent)
    metrics.rollup(graph, date.today())


def test_screenshots_of_every_page(live_server, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "demo-screenshots")
    graph, password = ensure_demo()
    _activity(graph)
    g = graph.pk
    injection = ContextInjection.objects.filter(graph=graph).order_by("-id").first()
    batch = UpdateBatch.objects.filter(graph=graph, kind="reinforce").order_by("-id").first()
    # An edge with weight history (moved by path credit or an outcome), so its page has a chart.
    edge = Edge.objects.filter(
        graph=graph, pk__in=WeightChange.objects.filter(graph=graph, edge__isnull=False).values("edge_id")
    ).first()
    pages = {
        "overview": (f"/g/{g}/", True),
        "explain": (f"/g/{g}/explain/", False),
        "injection": (f"/g/{g}/injections/{injection.pk}/?i=1&j=2", True),
        "node": (f"/g/{g}/nodes/{edge.target_id}/", False),
        "edge": (f"/g/{g}/edges/{edge.pk}/", True),
        "tune": (f"/g/{g}/tune/", False),
        "batches": (f"/g/{g}/batches/", False),
        "batch": (f"/g/{g}/batches/{batch.pk}/", True),
        "audit": (f"/g/{g}/audit/", False),
        "impact": (f"/g/{g}/impact/", True),
    }
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        page = login(browser, live_server.url, "admin", password)
        for name, (url, has_chart) in pages.items():
            assert page.goto(live_server.url + url).status == 200, name
            if has_chart:
                page.wait_for_selector("div.chart svg.main-svg", timeout=15000)
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    assert all((SHOTS / f"{name}.png").stat().st_size > 10_000 for name in pages)
