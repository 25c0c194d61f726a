"""A request that waited past WEB_QUEUE_BUDGET_MS for a web thread is answered 503 with Retry-After before any
of its work (graphadmin/runtime/admission.py); probes and requests that did not wait are served as usual.

Against real gunicorn (the product's configuration and worker class) with one process of one thread: a client
that sends half of its request holds the thread (gunicorn reads the rest in that thread), so whatever arrives
meanwhile waits in the queue, as under overload.
"""

from __future__ import annotations

import http.client
import json
import socket
import time

import pytest
from django.test import RequestFactory, override_settings

from graphadmin.runtime import admission
from tests.resilience import web_server

BUDGET_MS = 400
HOLD_SECONDS = 2.0


def test_over_budget_needs_a_measured_wait_and_a_budget():
    assert admission.over_budget(0.5, 400)
    assert not admission.over_budget(0.3, 400)
    assert not admission.over_budget(None, 400)  # not under gunicorn: nothing measured
    assert not admission.over_budget(5.0, 0)  # no budget


def test_a_recorded_wait_is_taken_once():
    admission.record_wait(0.9)
    assert admission.take_wait() == 0.9
    assert admission.take_wait() is None  # the thread's next request did not inherit it


@override_settings(WEB_QUEUE_BUDGET_MS=BUDGET_MS, WEB_BUSY_RETRY_AFTER_SECONDS=2)
def test_the_middleware_refuses_only_past_the_budget_and_never_a_probe():
    served = []
    middleware = admission.AdmissionMiddleware(lambda request: served.append(request.path) or "served")
    factory = RequestFactory()
    admission.record_wait(0.1)
    assert middleware(factory.get("/api/graphs/")) == "served"
    admission.record_wait(0.5)
    assert middleware(factory.get("/healthz")) == "served"
    admission.record_wait(0.5)
    refused = middleware(factory.post("/api/graphs/1/context/"))
    assert refused.status_code == 503 and refused["Retry-After"] == "2"
    body = json.loads(refused.content)
    assert body["retry_after"] == 2 and "500 ms" in body["detail"] and "busy" in body["detail"]
    assert served == ["/api/graphs/", "/healthz"]


@override_settings(WEB_QUEUE_BUDGET_MS=BUDGET_MS, WEB_REPORT_QUEUE_BUDGET_MS=4 * BUDGET_MS)
def test_a_sessions_reports_wait_longer_than_a_question_and_no_budget_stays_none():
    middleware = admission.AdmissionMiddleware(lambda request: "served")
    factory = RequestFactory()
    reports = ["uses", "response", "outcome"]
    for name in reports:  # past the question's budget, within the reports': served
        admission.record_wait(0.8)
        assert middleware(factory.post(f"/api/graphs/7/sessions/run/a%2Fb/{name}/", {})) == "served", name
    admission.record_wait(0.8)
    assert middleware(factory.post("/api/graphs/7/context/", {})).status_code == 503
    admission.record_wait(0.8)  # only a POST of a report: a GET of the same path has the question's budget
    assert middleware(factory.get("/api/graphs/7/sessions/s1/uses/")).status_code == 503
    admission.record_wait(1.7)  # past the reports' budget too
    refused = middleware(factory.post("/api/graphs/7/sessions/s1/outcome/", {}))
    assert refused.status_code == 503 and f"{4 * BUDGET_MS} ms" in json.loads(refused.content)["detail"]
    with override_settings(WEB_QUEUE_BUDGET_MS=0):  # 0 turns both off
        admission.record_wait(9.0)
        assert middleware(factory.post("/api/graphs/7/sessions/s1/outcome/", {})) == "served"


def _send(port: int, request: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(request)
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict, bytes]:
    """Status, headers (lower-case names) and body of the one response on the socket (read by http.client)."""
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    sock.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def _get(path: str, accept: str = "application/json") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\nConnection: close\r\n\r\n".encode()


@pytest.mark.django_db(transaction=True)
def test_gunicorn_answers_a_request_that_waited_past_its_budget_with_503(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = web_server(tmp_path, port, WEB_THREADS=1, WEB_QUEUE_BUDGET_MS=BUDGET_MS, WEB_BUSY_RETRY_AFTER_SECONDS=3)
    with server:
        # Nothing waits: an API request is served (401: no token), not refused.
        status, _, _ = _answer(_send(port, _get("/api/graphs/")))
        assert status == 401

        # The one thread held by a half-sent request; an API call, a page and a probe queue behind it.
        slow = _send(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.3)
        api = _send(port, _get("/api/graphs/"))
        page = _send(port, _get("/", accept="text/html"))
        probe = _send(port, _get("/healthz"))
        time.sleep(HOLD_SECONDS)
        slow.sendall(b"Connection: close\r\n\r\n")
        assert _answer(slow)[0] == 200

        status, headers, body = _answer(api)
        assert status == 503 and headers["retry-after"] == "3", body
        answer = json.loads(body)
        assert answer["retry_after"] == 3 and "busy" in answer["detail"] and "nothing was written" in answer["detail"]
        assert headers.get("x-request-id")  # refused after the request got its id, for the log line

        status, headers, body = _answer(page)
        assert status == 503 and headers["retry-after"] == "3"
        assert b"Busy for a moment" in body and "content-security-policy" in headers

        assert _answer(probe)[0] == 200  # a probe is never refused

        # The queue drained: the next request is served again.
        assert _answer(_send(port, _get("/api/graphs/")))[0] == 401
    text = (tmp_path / f"web-{port}.log").read_text()
    assert "busy: GET /api/graphs/ waited" in text and f"(budget {BUDGET_MS} ms)" in text
