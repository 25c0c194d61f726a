"""API tokens: stored hashed, expiring, revoked by a password change; bad tokens throttled (REST and MCP HTTP)."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from knox.models import AuthToken
from knox.settings import CONSTANTS
from rest_framework.test import APIClient

from graphadmin.accounts import create_token
from graphadmin.api.auth import FailedTokenThrottle, client_address
from graphadmin.models import AuditEvent
from tests.conftest import ROOT, stop


def get(path: str, key: str, **extra):
    return APIClient().get(path, HTTP_AUTHORIZATION=f"Token {key}", **extra)


@pytest.mark.django_db
def test_a_token_is_stored_hashed_and_works(acme_graph, ana):
    key = create_token(ana)
    assert get(f"/api/graphs/{acme_graph.pk}/", key).status_code == 200
    stored = AuthToken.objects.get(user=ana)
    # Only a digest and the key's first characters (the lookup prefix) are kept; the key cannot be read back.
    assert stored.digest != key and len(stored.digest) == 128 and key not in stored.digest
    assert stored.token_key == key[:15] and len(key) == 64
    assert stored.expiry > timezone.now() + timedelta(days=29)  # API_TOKEN_TTL_DAYS, 30 by default


@pytest.mark.django_db
def test_an_expired_token_is_refused(acme_graph, ana):
    key = create_token(ana, ttl=timedelta(seconds=60))
    AuthToken.objects.filter(user=ana).update(expiry=timezone.now() - timedelta(seconds=1))
    response = get(f"/api/graphs/{acme_graph.pk}/", key)
    assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Token"
    assert response.json()["detail"] == "Invalid token."


@pytest.mark.django_db
def test_a_password_change_revokes_every_token_and_is_audited(acme, acme_graph, ana):
    keys = [create_token(ana), create_token(ana)]
    ana.set_password("a-new-long-passphrase-for-ana")
    ana.save()
    assert [get(f"/api/graphs/{acme_graph.pk}/", key).status_code for key in keys] == [401, 401]
    event = AuditEvent.objects.get(organization=acme, action="auth.tokens_revoked")
    assert event.payload == {"user": "ana", "tokens": 2, "reason": "password changed"}
    # Another field saved leaves tokens alone.
    key = create_token(ana)
    ana.first_name = "Ana"
    ana.save()
    assert get(f"/api/graphs/{acme_graph.pk}/", key).status_code == 200


@pytest.mark.django_db
def test_the_password_change_page_revokes_tokens(client, acme_graph, ana):
    key = create_token(ana)
    client.force_login(ana)
    response = client.post(
        "/accounts/password_change/",
        {"old_password": "pw-ana", "new_password1": "correct horse battery", "new_password2": "correct horse battery"},
    )
    assert response.status_code == 302, response.content.decode()
    assert get(f"/api/graphs/{acme_graph.pk}/", key).status_code == 401


@pytest.mark.django_db
def test_create_token_command_prints_a_key_once(ana):
    out = io.StringIO()
    call_command("create_token", "ana", "--days", "2", stdout=out)
    key = out.getvalue().strip()
    token = AuthToken.objects.get(user=ana)
    assert token.token_key == key[:15] and token.expiry < timezone.now() + timedelta(days=2, minutes=1)


@pytest.mark.django_db
def test_bad_tokens_from_one_address_are_answered_429_but_live_tokens_behind_it_still_work(
    acme_graph, ana, monkeypatch
):
    monkeypatch.setattr(FailedTokenThrottle, "THROTTLE_RATES", {"token_failure": "3/minute"})
    good = create_token(ana)
    path = f"/api/graphs/{acme_graph.pk}/"
    assert [get(path, "0" * 64).status_code for _ in range(3)] == [401, 401, 401]
    throttled = get(path, "0" * 64)
    assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) > 0
    assert get(path, "1" * 64).status_code == 429  # guessing is refused, not only slowed
    # Issue 26: the other clients behind the same address (a NAT, a proxy) keep working: a live token's prefix passes.
    assert get(path, good).status_code == 200
    # Another address is not affected, nor are requests without a token (sessions).
    assert get(path, good, REMOTE_ADDR="10.0.0.7").status_code == 200
    session = APIClient()
    session.force_login(ana)
    assert session.get(path).status_code == 200


def test_bad_tokens_on_a_live_prefix_lock_out_that_prefix_from_that_address_only(acme_graph, ana, monkeypatch):
    """Someone who learnt a token's prefix and guesses the rest is stopped too, without locking the token's owner
    out elsewhere."""
    monkeypatch.setattr(FailedTokenThrottle, "THROTTLE_RATES", {"token_failure": "3/minute"})
    good = create_token(ana)
    other = create_token(ana)
    path = f"/api/graphs/{acme_graph.pk}/"
    forged = good[: CONSTANTS.TOKEN_KEY_LENGTH] + "0" * (len(good) - CONSTANTS.TOKEN_KEY_LENGTH)
    assert [get(path, forged).status_code for _ in range(3)] == [401, 401, 401]
    assert get(path, forged).status_code == 429
    assert get(path, good).status_code == 429  # this prefix, from this address, waits out the window
    assert get(path, other).status_code == 200  # another live token from the same address does not
    assert get(path, good, REMOTE_ADDR="10.0.0.8").status_code == 200  # nor does this one from elsewhere


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_mcp_http_answers_429_after_bad_tokens(rita, tmp_path):
    good = create_token(rita)
    port = _free_port()
    env = {**os.environ, "DATABASE_NAME": connection.settings_dict["NAME"], "API_THROTTLE_BAD_TOKENS": "3/minute"}
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    log = open(tmp_path / "mcp.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_server", "--http", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "mcp.log").read_text()
                time.sleep(0.2)

        def post(key):
            return httpx.post(url, json=init, headers={**headers, "Authorization": f"Bearer {key}"}, timeout=10)

        assert post(good).status_code == 200
        assert [post("nope").status_code for _ in range(3)] == [401, 401, 401]
        refused = post("nope")
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
        assert post("n" * 64).status_code == 429  # any token no live token's prefix starts
        assert post(good).status_code == 200  # issue 26: a live token behind the same address keeps working
    finally:
        stop(proc)
        log.close()


def test_the_client_address_behind_a_proxy_is_the_entry_the_proxy_added(rf, settings):
    spoofed = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9", REMOTE_ADDR="127.0.0.1")
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    assert client_address(spoofed) == "203.0.113.9"  # what the client wrote itself is not believed
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    assert client_address(spoofed) == "127.0.0.1"  # no proxy: the peer
