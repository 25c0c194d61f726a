"""Two operators saving the policy or the priorities at once (issue 41, item 2): one wins, the other is told.

Each change names the revision it was made against (``base_revision``: the API field, the tune page's hidden
field). Before, the field did not exist: both saves were written, the second on top of the first, and on the
tune page (which sends every value it shows) the second silently put back what the first had just changed.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from graphadmin.models import AuditEvent, EdgeType, PolicyRevision

from ..feedback.conftest import raw_connection


def _waiting(watcher) -> int:
    return len(
        watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    )


@pytest.mark.django_db(transaction=True)
def test_two_operators_saving_at_once_one_wins_the_other_gets_a_409(acme_graph, oscar, alice):
    url = f"/api/graphs/{acme_graph.pk}/policy/"
    bodies = {
        "oscar": {"learning_rate": 0.2, "base_revision": 1, "note": "learn faster"},
        "alice": {"priorities": {"related": 0.7}, "base_revision": 1, "note": "related first"},
    }
    users = {"oscar": oscar, "alice": alice}
    answers: dict = {}

    def save(name):
        try:
            client = APIClient()
            client.force_authenticate(users[name])
            answers[name] = client.patch(url, bodies[name], format="json")
        finally:
            connection.close()

    # Both requests queue on the graph's row lock (held here), then are let go together: a real race.
    locker, watcher = raw_connection(), raw_connection()
    locker.execute("BEGIN")
    locker.execute("SELECT id FROM graphadmin_graph WHERE id = %s FOR UPDATE", [acme_graph.pk])
    threads = [threading.Thread(target=save, args=(name,)) for name in users]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 30
        while _waiting(watcher) < 2:
            assert time.monotonic() < deadline, answers
            time.sleep(0.02)
    finally:
        locker.execute("COMMIT")
        for thread in threads:
            thread.join(timeout=60)
        locker.close()
        watcher.close()

    statuses = sorted(a.status_code for a in answers.values())
    assert statuses == [201, 409], {k: (a.status_code, a.json()) for k, a in answers.items()}
    winner = next(k for k, a in answers.items() if a.status_code == 201)
    loser = answers[next(k for k in answers if k != winner)].json()
    assert loser["base_revision"] == 1 and loser["current_revision"] == 2 and loser["missed"] == [2]
    assert "revision 2" in loser["detail"] and winner in loser["detail"]
    # Only the winner's change is written, audited once.
    revisions = PolicyRevision.objects.filter(graph=acme_graph).order_by("revision")
    assert list(revisions.values_list("revision", flat=True)) == [1, 2]
    assert AuditEvent.objects.filter(action="policy.update").count() == 1
    current = acme_graph.current_policy()
    if winner == "oscar":
        assert current.learning_rate == 0.2 and EdgeType.objects.get(graph=acme_graph, name="related").priority == 0.0
    else:
        assert current.learning_rate == 0.1 and EdgeType.objects.get(graph=acme_graph, name="related").priority == 0.7


@pytest.mark.django_db
def test_a_base_revision_that_does_not_exist_is_a_400_naming_it(api, acme_graph, oscar):
    r = api(oscar).patch(
        f"/api/graphs/{acme_graph.pk}/policy/", {"learning_rate": 0.2, "base_revision": 7}, format="json"
    )
    assert r.status_code == 400 and "base_revision" in r.json()
    assert acme_graph.current_policy().revision == 1


@pytest.mark.django_db
def test_the_tune_page_does_not_undo_a_change_saved_since_it_was_opened(client, acme_graph, oscar, alice, api):
    client.force_login(oscar)
    page = client.get(f"/g/{acme_graph.pk}/tune/")
    form = page.context["form"]
    assert 'name="base_revision" value="1"' in page.content.decode()
    # alice saves a priority while oscar's page is open
    saved = api(alice).patch(f"/api/graphs/{acme_graph.pk}/policy/", {"priorities": {"related": 0.7}}, format="json")
    assert saved.status_code == 201
    data = {name: form[name].value() for name in form.fields}
    data.update(learning_rate=0.3, note="")  # oscar changes one number; his page still shows related at 0
    response = client.post(f"/g/{acme_graph.pk}/tune/", data, follow=True)
    said = "The policy changed since revision 1: revision 2 was saved meanwhile (by alice)"
    assert said in response.content.decode()
    assert acme_graph.current_policy().revision == 2
    assert EdgeType.objects.get(graph=acme_graph, name="related").priority == 0.7
