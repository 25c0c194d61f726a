"""Logins: audited in the user's organizations, locked out after repeated failures, strong passwords only."""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from graphadmin import audit
from graphadmin.models import AuditEvent


@pytest.fixture
def log_lines():
    """The JSON lines the configured console handler writes during the test (settings.LOGGING)."""
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    handler.setStream(previous)


def login(client, username, password, **extra):
    return client.post("/accounts/login/", {"username": username, "password": password}, **extra)


@pytest.mark.django_db
def test_a_login_and_a_failed_login_are_in_the_organization_chain(client, acme, ana):
    assert login(client, "ana", "wrong").status_code == 200  # the form again, with its error
    assert login(client, "ana", "pw-ana").status_code == 302
    events = AuditEvent.objects.filter(organization=acme, action__startswith="auth.").order_by("seq")
    assert [(e.action, e.actor, e.payload) for e in events] == [
        ("auth.login_failed", "anonymous", {"user": "ana", "client": "127.0.0.1", "locked_out": False}),
        ("auth.login", "user:ana", {"user": "ana", "client": "127.0.0.1"}),
    ]
    assert audit.verify(acme).ok


@pytest.mark.django_db
def test_the_admin_login_is_audited_too(client, acme, alice):
    alice.is_staff = True
    alice.save()
    client.post("/admin/login/?next=/admin/", {"username": "alice", "password": "nope"})
    assert AuditEvent.objects.filter(organization=acme, action="auth.login_failed").count() == 1


@pytest.mark.django_db
def test_logins_without_an_organization_are_log_lines(client, log_lines):
    get_user_model().objects.create_user("root", password="pw-root")
    request_id = uuid.uuid4().hex
    login(client, "ghost", "x", HTTP_X_REQUEST_ID=request_id)
    response = login(client, "root", "pw-root", HTTP_X_REQUEST_ID=request_id)
    assert response.headers["X-Request-ID"] == request_id
    lines = log_lines()
    failed = next(line for line in lines if line["message"] == "auth.login_failed")
    assert failed["username"] == "ghost" and failed["client"] == "127.0.0.1" and failed["user"] is None
    ok = next(line for line in lines if line["message"] == "auth.login")
    assert ok["username"] == "root" and ok["user"] == "root" and ok["request_id"] == request_id
    assert not AuditEvent.objects.exists()


@pytest.mark.django_db
def test_repeated_failures_lock_the_username_out_with_429(client, acme, ana, settings):
    limit = settings.AXES_FAILURE_LIMIT
    assert [login(client, "ana", "wrong").status_code for _ in range(limit - 1)] == [200] * (limit - 1)
    assert login(client, "ana", "wrong").status_code == 429  # the limit-th failure locks out
    locked = login(client, "ana", "pw-ana")
    assert locked.status_code == 429 and "_auth_user_id" not in client.session  # even the right password
    assert AuditEvent.objects.filter(organization=acme, action="auth.login").count() == 0
    failed = AuditEvent.objects.filter(organization=acme, action="auth.login_failed").order_by("seq")
    assert [e.payload["locked_out"] for e in failed] == [False] * (limit - 1) + [True, True]
    # Another username from the same address is not locked.
    get_user_model().objects.create_user("bob", password="pw-bob")
    assert login(client, "bob", "pw-bob").status_code == 302


@pytest.mark.django_db
def test_weak_passwords_are_refused(client, ana):
    ana.email = "ana.lindqvist@example.com"
    for weak, reason in (
        ("short1", "too short"),
        ("password1234", "too common"),
        ("482910573920", "entirely numeric"),
        ("lindqvist2026", "too similar to the email address"),
    ):
        with pytest.raises(ValidationError, match=reason):
            validate_password(weak, ana)
    client.force_login(ana)
    response = client.post(
        "/accounts/password_change/",
        {"old_password": "pw-ana", "new_password1": "password1234", "new_password2": "password1234"},
    )
    assert response.status_code == 200 and "This password is too common." in response.content.decode()
    ana.refresh_from_db()
    assert ana.check_password("pw-ana")
