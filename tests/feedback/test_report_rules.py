"""Who may report on a session, and what: its owner (or an operator), before its outcome, only what it was given.

Session 's1' (fixture ``surfaced``) belongs to the agent ada: b via a->b and c via b->c selected, a cut.
"""

import pytest

from feedback.models import UpdateBatch
from tests.conftest import queued_work

from .conftest import make_session, reload, url

pytestmark = pytest.mark.django_db

REPORTS = {
    "uses": lambda g: {"items": [{"node": g["c"].pk}]},
    "response": lambda g: {"response": "per the note about c"},
    "outcome": lambda g: {"outcome": "accepted"},
}


@pytest.mark.parametrize("what", REPORTS)
@pytest.mark.parametrize("who", ["abe", "ana", "rita"])
def test_only_the_owner_reports_on_a_session(
    request, api, acme_graph, small_graph, surfaced, who, what, django_capture_on_commit_callbacks
):
    """Another agent, an analyst, a reviewer: 403, nothing queued (the analyst's 0.5 -> 0.992 attack)."""
    with django_capture_on_commit_callbacks() as callbacks:
        response = api(request.getfixturevalue(who)).post(
            url(acme_graph, "s1", what), REPORTS[what](small_graph), format="json"
        )
    assert response.status_code == 403, response.data
    assert "belongs to another user" in response.data["detail"] or "may not" in response.data["detail"]
    assert not queued_work(callbacks)


@pytest.mark.parametrize("what", REPORTS)
@pytest.mark.parametrize("who", ["ada", "oscar", "alice"])
def test_owner_operator_and_admin_report(
    request, api, acme_graph, small_graph, surfaced, who, what, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = api(request.getfixturevalue(who)).post(
            url(acme_graph, "s1", what), REPORTS[what](small_graph), format="json"
        )
    assert response.status_code == 202 and response.data["status"] == "queued", response.data
    assert len(queued_work(callbacks)) == 1


def test_a_session_without_owner_is_reported_by_operators_only(api, ada, oscar, acme_graph, small_graph, edges):
    """Sessions older than owners (owner null after the migration)."""
    make_session(acme_graph, "old", [(small_graph["b"], edges["ab"], True)])
    body = {"outcome": "accepted"}
    assert api(ada).post(url(acme_graph, "old", "outcome"), body, format="json").status_code == 403
    assert api(oscar).post(url(acme_graph, "old", "outcome"), body, format="json").status_code == 202


@pytest.mark.parametrize(
    "item, field",
    [
        (lambda g, e: {"node": g["a"].pk}, "node"),  # considered, cut by the budget: never shown
        (lambda g, e: {"edge": e["other"].pk}, "edge"),  # a live edge of the graph on no surfaced path
        (lambda g, e: {"node": e["d"].pk}, "node"),  # a live node the session never met
    ],
)
def test_uses_name_only_what_the_session_was_given(
    api, ada, acme_graph, small_graph, edges, surfaced, item, field, django_capture_on_commit_callbacks
):
    from graphadmin.models import Edge, EdgeType, Node

    d = Node.objects.create(graph=acme_graph, key="d", title="D")
    other = Edge.objects.create(
        graph=acme_graph,
        source=small_graph["c"],
        target=small_graph["a"],
        edge_type=EdgeType.objects.get(graph=acme_graph, name="related"),
    )
    refs = {**edges, "other": other, "d": d}
    body = {"items": [{"node": small_graph["b"].pk}, item(small_graph, refs)]}
    with django_capture_on_commit_callbacks() as callbacks:
        response = api(ada).post(url(acme_graph, "s1", "uses"), body, format="json")
    assert response.status_code == 400, response.data
    message = str(response.data["items"][1][field][0])
    assert "was not given to session 's1'" in message
    assert not queued_work(callbacks) and not UpdateBatch.objects.exists()


def test_uses_of_a_selected_node_and_an_edge_on_its_path_are_accepted(
    api, ada, acme_graph, small_graph, edges, surfaced, eager_tasks, django_capture_on_commit_callbacks
):
    body = {"items": [{"node": small_graph["c"].pk}, {"edge": edges["ab"].pk, "signal": "negative"}]}
    with django_capture_on_commit_callbacks(execute=True):
        response = api(ada).post(url(acme_graph, "s1", "uses"), body, format="json")
    assert response.status_code == 202, response.data
    assert reload(edges["ab"]).weight == pytest.approx(0.45)


@pytest.mark.parametrize(
    "what, body",
    [
        ("uses", {"items": [{"edge": "ab"}]}),
        ("response", {"response": "text"}),
        ("outcome", {"outcome": "rejected"}),
    ],
)
def test_every_report_after_the_outcome_is_a_409(
    api, ada, acme_graph, edges, surfaced, what, body, eager_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = api(ada).post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json")
    assert first.status_code == 202 and reload(surfaced).outcome == "accepted"
    weights = sorted(type(edges["ab"]).objects.values_list("pk", "weight", "feedback_weight"))
    if what == "uses":
        body = {"items": [{"edge": edges["ab"].pk}]}
    with django_capture_on_commit_callbacks() as callbacks:
        late = api(ada).post(url(acme_graph, "s1", what), body, format="json")
    assert late.status_code == 409, late.data
    assert late.data["outcome"] == "accepted" and "takes no more reports" in late.data["detail"]
    assert not queued_work(callbacks)
    assert sorted(type(edges["ab"]).objects.values_list("pk", "weight", "feedback_weight")) == weights
    # The same outcome again is still the idempotent answer, not a conflict.
    again = api(ada).post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json")
    assert again.status_code == 200 and again.data["status"] == "duplicate"


@pytest.mark.parametrize(
    "what, body",
    [
        ("uses", {"items": [{"edge": "ab"}]}),
        ("response", {"response": "text"}),
        ("outcome", {"outcome": "rejected"}),
    ],
)
def test_a_report_after_an_accepted_outcome_still_in_the_outbox_is_a_409(
    api, ada, acme_graph, edges, surfaced, what, body, django_capture_on_commit_callbacks
):
    """Between the outcome's 202 and the worker applying it, the session is already closed."""
    from feedback.models import PendingReport

    with django_capture_on_commit_callbacks():  # the drain is never poked: the outcome stays pending
        first = api(ada).post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json")
    assert first.status_code == 202 and reload(surfaced).outcome is None
    if what == "uses":
        body = {"items": [{"edge": edges["ab"].pk}]}
    late = api(ada).post(url(acme_graph, "s1", what), body, format="json")
    assert late.status_code == 409, late.data
    assert late.data["outcome"] == "accepted" and "takes no more reports" in late.data["detail"]
    assert list(PendingReport.objects.values_list("kind", flat=True)) == ["outcome"]
    # The same outcome again while it waits answers with the first report's key, and stores nothing.
    again = api(ada).post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json")
    assert again.status_code == 202 and again.data["status"] == "queued"
    assert again.data["idempotency_key"] == first.data["idempotency_key"]
    assert PendingReport.objects.count() == 1
