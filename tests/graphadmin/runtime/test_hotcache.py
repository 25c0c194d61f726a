"""The per-process cache of tokens, graph roles and policies (graphadmin.runtime.hotcache): used on the next call, and
never past a change of what it holds (revocation, expiry, a deactivated user, a role, a policy revision)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from feedback.models import ContextInjection
from graphadmin import actions
from graphadmin.accounts import create_token, do_revoke_tokens
from graphadmin.models import Membership
from graphadmin.runtime import hotcache

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cached(settings):
    settings.HOT_CACHE_SECONDS = 5
    hotcache.clear()
    yield
    hotcache.clear()


def client(key: str) -> APIClient:
    return APIClient(HTTP_AUTHORIZATION=f"Token {key}")


def context(c: APIClient, graph, session="s-1", query="ranking weights"):
    return c.post(f"/api/graphs/{graph.pk}/context/", {"session": session, "query": query}, format="json")


def lookups(queries) -> dict[str, int]:
    """How many of the captured statements were the three lookups the cache keeps."""
    sql = [q["sql"] for q in queries]
    return {
        "token": sum("knox_authtoken" in s for s in sql),
        "role": sum('"graphadmin_membership"' in s and '"graphadmin_graph"' in s for s in sql),
        "policy": sum('FROM "graphadmin_policyrevision"' in s for s in sql),
    }


def test_the_second_call_looks_nothing_up_again(rg, ada):
    c = client(create_token(ada))
    with CaptureQueriesContext(connection) as first:
        assert context(c, rg["graph"], "s-1").status_code == 201
    with CaptureQueriesContext(connection) as second:
        assert context(c, rg["graph"], "s-2").status_code == 201
    assert all(lookups(first).values()), lookups(first)  # the first call did look each of them up
    assert lookups(second) == {"token": 0, "role": 0, "policy": 0}


def test_off_with_zero_seconds(rg, ada, settings):
    settings.HOT_CACHE_SECONDS = 0
    c = client(create_token(ada))
    assert context(c, rg["graph"], "s-1").status_code == 201
    with CaptureQueriesContext(connection) as second:
        assert context(c, rg["graph"], "s-2").status_code == 201
    assert all(lookups(second).values()), lookups(second)


def test_a_revoked_token_stops_at_the_next_call(acme_graph, ana):
    key = create_token(ana)
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 200
    do_revoke_tokens(ana, actor="test", reason="test")
    response = client(key).get(f"/api/graphs/{acme_graph.pk}/")
    assert response.status_code == 401 and response.json()["detail"] == "Invalid token."


def test_a_token_deleted_by_logout_stops_at_the_next_call(acme_graph, ana):
    key = create_token(ana)
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 200
    ana.auth_token_set.get().delete()  # knox's logout view deletes the request's token like this
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 401


def test_a_cached_token_is_refused_at_its_expiry(acme_graph, ana, monkeypatch):
    key = create_token(ana, ttl=timedelta(minutes=10))
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 200
    later = timezone.now() + timedelta(minutes=11)
    monkeypatch.setattr(timezone, "now", lambda: later)  # the clock, not the product: the token has expired
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 401


def test_a_deactivated_user_is_refused_at_the_next_call(acme_graph, ana):
    key = create_token(ana)
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 200
    ana.is_active = False
    ana.save(update_fields=["is_active"])
    assert client(key).get(f"/api/graphs/{acme_graph.pk}/").status_code == 401


def test_a_role_change_and_a_revoked_membership_are_seen_at_the_next_call(rg, acme, oscar, alice):
    c = client(create_token(oscar))
    assert context(c, rg["graph"], "s-1").status_code == 201
    actions.do_grant_role(acme, oscar, "reviewer", actor=alice)
    assert context(c, rg["graph"], "s-2").status_code == 403  # reviewers only read
    actions.do_revoke_role(Membership.objects.get(user=oscar, organization=acme), actor=alice)
    assert context(c, rg["graph"], "s-3").status_code == 404  # no longer a member: the graph is not there


def test_a_policy_revision_is_used_by_the_next_context_call(rg, ada, alice):
    c = client(create_token(ada))
    first = context(c, rg["graph"], "s-1").json()
    assert ContextInjection.objects.get(pk=first["injection"]).policy_revision.revision == 1
    actions.do_set_policy(rg["graph"], {"hop_decay": 0.5}, actor=alice)
    second = context(c, rg["graph"], "s-2").json()
    assert second["policy_revision"] == 2
    assert ContextInjection.objects.get(pk=second["injection"]).policy_revision.revision == 2


def test_an_edge_type_priority_change_is_used_by_the_next_call(rg, ada, alice):
    c = client(create_token(ada))
    body = {"start_nodes": [rg["nodes"]["a"].pk], "query": "ranking"}
    url = f"/api/graphs/{rg['graph'].pk}/rank/"
    before = {r["edge"]: r["components"]["priority"] for r in c.post(url, body, format="json").json()["results"]}
    actions.do_update_edge_type(rg["types"]["depends_on"], actor=alice, priority=0.9)
    after = {r["edge"]: r["components"]["priority"] for r in c.post(url, body, format="json").json()["results"]}
    changed = rg["edges"]["a>c"].pk
    assert after[changed]["raw"] == pytest.approx(0.9) and before[changed]["raw"] == pytest.approx(0.0)


def test_a_change_published_by_another_process_drops_the_entries(rg, ada):
    c = client(create_token(ada))
    assert context(c, rg["graph"], "s-1").status_code == 201
    cache.set(hotcache.VERSION_KEY, "another process changed something", timeout=None)
    with CaptureQueriesContext(connection) as second:
        assert context(c, rg["graph"], "s-2").status_code == 201
    assert all(lookups(second).values()), lookups(second)


def test_an_entry_older_than_its_lifetime_is_looked_up_again(rg, ada, monkeypatch):
    c = client(create_token(ada))
    assert context(c, rg["graph"], "s-1").status_code == 201
    later = hotcache.time.monotonic() + 6  # HOT_CACHE_SECONDS is 5
    monkeypatch.setattr(hotcache.time, "monotonic", lambda: later)
    with CaptureQueriesContext(connection) as second:
        assert context(c, rg["graph"], "s-2").status_code == 201
    assert all(lookups(second).values()), lookups(second)


def test_nothing_is_kept_from_a_transaction_that_rolls_back(acme_graph, alice):
    assert acme_graph.current_policy().revision == 1
    with pytest.raises(RuntimeError), transaction.atomic():
        actions.do_set_policy(acme_graph, {"hop_decay": 0.5}, actor=alice)
        assert acme_graph.current_policy().revision == 2  # read inside: the database's answer, not kept
        raise RuntimeError("roll back")
    assert acme_graph.current_policy().revision == 1
