"""manage.py agent_token: a service user's token and membership, created once, role changes audited."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token

from graphadmin import audit
from graphadmin.models import AuditEvent, Membership


def _token(**options) -> str:
    out = io.StringIO()
    call_command("agent_token", stdout=out, stderr=io.StringIO(), **options)
    return out.getvalue().strip()


@pytest.mark.django_db
def test_creates_looks_up_and_audits(acme):
    key = _token(org="acme", user="eval-agent", role="admin")
    user = get_user_model().objects.get(username="eval-agent")
    assert key == Token.objects.get(user=user).key and not user.has_usable_password()
    assert Membership.objects.get(user=user, organization=acme).role == "admin"
    granted = AuditEvent.objects.filter(organization=acme, action="membership.grant")
    assert [e.payload for e in granted] == [{"user": "eval-agent", "role": "admin", "before": None}]

    assert _token(org="acme", user="eval-agent", role="admin") == key  # the same token, nothing new audited
    assert granted.count() == 1
    assert _token(org="acme", user="eval-agent", role="analyst") == key
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
