"""Log lines are JSON (LOG_FORMAT, json when DEBUG is off) with their extra= fields, the request id and the user,
in web requests and in Celery tasks (with the task id)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import time
import uuid

import pytest
from django_guid import clear_guid, set_guid
from rest_framework.test import APIClient

from graphadmin.accounts import create_token
from graphadmin.models import AuditEvent
from graphadmin.tasks import verify_audit_chains
from tests.conftest import ROOT
from tests.graphadmin.test_audit_chain import _append_three, _bypass_append_only


@pytest.fixture
def log_lines():
    """The JSON lines the configured console handler writes during the test (settings.LOGGING)."""
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    handler.setStream(previous)


@pytest.mark.django_db
def test_a_web_request_line_has_its_request_id_user_and_extra_fields(log_lines, ana, globex_graph):
    request_id = str(uuid.uuid4())
    client = APIClient()
    response = client.get(
        f"/api/graphs/{globex_graph.pk}/", HTTP_AUTHORIZATION=f"Token {create_token(ana)}", HTTP_X_REQUEST_ID=request_id
    )
    assert response.status_code == 404 and response.headers["X-Request-ID"] == request_id
    line = next(line for line in log_lines() if line["logger"] == "django.request")
    assert line["message"] == f"Not Found: /api/graphs/{globex_graph.pk}/"
    assert line["level"] == "WARNING" and line["status_code"] == 404  # an extra= field, kept
    assert line["request_id"] == request_id
    assert line["user"] == "ana" and line["task_id"] is None


@pytest.mark.django_db
def test_a_request_id_that_is_not_a_uuid_is_replaced(client):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="<script>")
    assert len(response.headers["X-Request-ID"]) == 32 and response.headers["X-Request-ID"] != "<script>"


@pytest.mark.django_db
def test_audit_chain_broken_names_the_organization(log_lines, acme, alice):
    _append_three(acme, alice)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET payload = '{}' WHERE organization_id = %s AND seq = 2", [acme.pk]
    )
    verify_audit_chains.apply()
    line = next(line for line in log_lines() if line["message"] == "audit chain broken")
    assert line["organization"] == "acme" and line["broken_at"] == 2 and line["level"] == "ERROR"
    assert line["task_id"]  # run as a task (eagerly here): its id is on the line
    assert AuditEvent.objects.filter(organization=acme).count() == 3


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_worker_line_has_the_task_id_and_the_request_id_that_enqueued_it(celery_worker_process, acme, alice):
    _append_three(acme, alice)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET payload = '{}' WHERE organization_id = %s AND seq = 2", [acme.pk]
    )
    request_id = uuid.uuid4().hex
    set_guid(request_id)  # as the web request that enqueues a task has it (django-guid's middleware)
    try:
        result = verify_audit_chains.delay()
    finally:
        clear_guid()
    assert result.get(timeout=60)["acme"]["ok"] is False
    deadline = time.monotonic() + 10
    while True:
        lines = [json.loads(x) for x in celery_worker_process.log_path.read_text().splitlines() if x.startswith("{")]
        broken = [x for x in lines if x["message"] == "audit chain broken" and x.get("task_id") == result.id]
        if broken or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert broken, celery_worker_process.log_path.read_text()[-3000:]
    assert broken[0]["request_id"] == request_id and broken[0]["organization"] == "acme"


def test_log_format_text_and_a_bad_value():
    env = {**os.environ, "LOG_FORMAT": "text", "SECRET_KEY": "x"}
    code = (
        "import django; django.setup(); import logging; from django_guid import set_guid; "
        "logging.getLogger('t').warning('hello', extra={'k': 1}); "
        "set_guid('abc'); logging.getLogger('t').warning('again')"
    )
    shell = [sys.executable, "-c", code]
    text = subprocess.run(
        shell,
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "graphadmin.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = text.stderr.rstrip().splitlines()
    assert text.returncode == 0 and lines[-2].endswith("WARNING t hello")  # no request, no task: nothing added
    assert lines[-1].endswith("WARNING t again [request_id=abc]")
    bad = subprocess.run(
        shell,
        cwd=ROOT,
        env={**env, "LOG_FORMAT": "xml", "DJANGO_SETTINGS_MODULE": "graphadmin.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "LOG_FORMAT must be json or text" in bad.stderr
