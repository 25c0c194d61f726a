"""manage.py agent_token: a service user's membership created once, a new token each call, role changes audited."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from graphadmin import audit
from graphadmin.api.auth import user_for_key
from graphadmin.models import AuditEvent, Membership


def _token(**options) -> str:
    out = io.StringIO()
    call_command("agent_token", stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue().strip()


@pytest.mark.django_db
def test_creates_looks_up_and_audits(acme):
    key = _token(org="acme", user="eval-agent", role="admin")
    user = get_user_model().objects.get(username="eval-agent")
    assert user_for_key(key) == user and not user.has_usable_password()
    assert Membership.objects.get(user=user, organization=acme).role == "admin"
    granted = AuditEvent.objects.filter(organization=acme, action="membership.grant")
    assert [e.payload for e in granted] == [{"user": "eval-agent", "role": "admin", "before": None}]

    # Tokens are stored hashed: each call prints a new one (the earlier ones stay valid), nothing new audited.
    again = _token(org="acme", user="eval-agent", role="admin")
    assert again != key and user_for_key(again) == user_for_key(key) == user
    assert granted.count() == 1
    assert user_for_key(_token(org="acme", user="eval-agent", role="analyst")) == user
    assert Membership.objects.get(user=user, organization=acme).role == "analyst"
    assert granted.order_by("-seq").first().payload == {"user": "eval-agent", "role": "analyst", "before": "admin"}
    assert audit.verify(acme).ok


@pytest.mark.django_db
def test_unknown_organization_is_refused(acme):
    with pytest.raises(CommandError, match="No organization 'nope'"):
        _token(org="nope", user="eval-agent")
    assert not get_user_model().objects.filter(username="eval-agent").exists()


@pytest.mark.django_db
def test_the_default_role_is_agent(acme):
    _token(org="acme", user="bot")
    assert Membership.objects.get(user__username="bot", organization=acme).role == "agent"
