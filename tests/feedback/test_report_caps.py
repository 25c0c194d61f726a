"""A use report's items and a manual set's values have documented maxima (MAX_REPORT_ITEMS,
MAX_MANUAL_VALUES): above them a 400 naming the field, and nothing written or enqueued
(issue 15 item 9: 30,000 items held a worker 11 s)."""

import pytest
from django.conf import settings

from feedback.models import UpdateBatch, UseEvent
from tests.conftest import queued_work

from .conftest import url

pytestmark = pytest.mark.django_db


def test_too_many_use_items(api, oscar, acme_graph, surfaced, edges, django_capture_on_commit_callbacks):
    items = [{"edge": edges["ab"].pk}] * (settings.MAX_REPORT_ITEMS + 1)
    with django_capture_on_commit_callbacks() as callbacks:
        response = api(oscar).post(url(acme_graph, "s1", "uses"), {"items": items}, format="json")
    assert response.status_code == 400 and "items" in response.json(), response.content
    assert str(settings.MAX_REPORT_ITEMS) in str(response.json()["items"])
    assert not queued_work(callbacks) and not UseEvent.objects.exists()


def test_items_at_the_maximum_are_accepted(api, oscar, acme_graph, surfaced, edges, django_capture_on_commit_callbacks):
    items = [{"edge": edges["ab"].pk}] * settings.MAX_REPORT_ITEMS
    with django_capture_on_commit_callbacks():
        response = api(oscar).post(url(acme_graph, "s1", "uses"), {"items": items}, format="json")
    assert response.status_code == 202, response.content


def test_too_many_manual_values(api, oscar, acme_graph, edges):
    values = [{"edge": edges["ab"].pk, "field": "weight", "value": 0.7}] * (settings.MAX_MANUAL_VALUES + 1)
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/weights/", {"values": values}, format="json")
    assert response.status_code == 400 and "values" in response.json(), response.content
    assert not UpdateBatch.objects.exists()


def test_schema_documents_the_caps(api, alice):
    schema = api(alice).get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    assert schema["UsesRequest"]["properties"]["items"]["maxItems"] == settings.MAX_REPORT_ITEMS
    assert schema["ManualSetRequest"]["properties"]["values"]["maxItems"] == settings.MAX_MANUAL_VALUES
