"""A session id holding any character the context call accepts ("/" included) is reachable through the REST
report endpoints (issue 26, item 6), sent as is or percent-encoded."""

from urllib.parse import quote

import pytest

from feedback.models import PendingReport

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("external_id", ["team/agent/run 7", "a/b", "ends-with/", "ünïcode/✓", "x%2Fy"])
def test_reports_reach_a_session_whose_id_holds_a_slash(api, ada, acme_graph, small_graph, external_id):
    make_session(acme_graph, external_id, [(small_graph["b"], None, True)], ada)
    # As is (a "%" in the id must be encoded: the server decodes the path), and percent-encoded.
    for path_id in {quote(external_id, safe=""), external_id if "%" not in external_id else quote(external_id)}:
        response = api(ada).post(
            f"/api/graphs/{acme_graph.pk}/sessions/{path_id}/uses/",
            {"items": [{"node": small_graph["b"].pk}]},
            format="json",
            HTTP_IDEMPOTENCY_KEY="same",
        )
        assert response.status_code == 202, (path_id, response.content)
    assert PendingReport.objects.get().session.external_id == external_id
    response = api(ada).post(
        f"/api/graphs/{acme_graph.pk}/sessions/{quote(external_id, safe='')}/outcome/",
        {"outcome": "accepted"},
        format="json",
    )
    assert response.status_code == 202, response.content
