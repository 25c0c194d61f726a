"""graphadmin_client.GraphClient against the real service (pytest-django's live_server) and the real Celery worker."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from feedback.models import AgentSession, UpdateBatch
from graphadmin import actions
from graphadmin.accounts import create_token
from graphadmin.models import Edge, Node
from graphadmin_client import ApiError, GraphClient, ServerError


class CountingTransport(httpx.HTTPTransport):
    """A real HTTP transport that counts the attempts made through it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.attempts = 0

    def handle_request(self, request):
        self.attempts += 1
        return super().handle_request(request)


def _wait_for(gc: GraphClient, graph_id: int, session: str, kind: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [b for b in gc.batches(graph_id, session, kind=kind) if b["status"] == "applied"]
        if found:
            return found[0]
        time.sleep(0.3)
    raise AssertionError(f"no applied {kind} batch for {session} in {timeout}s")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_agent_session_through_the_client(live_server, rg, ada, celery_worker_process):
    graph = rg["graph"]
    # The session credits a note reached along an edge (expansion). The lexical side would fill the 3
    # items with BM25 hits on "ranking weights" (no path): it is tested in tests/ranking/test_lexical.py.
    actions.do_set_policy(graph, {"coef_lexical": 0.0}, actor=ada)
    policy = graph.current_policy()
    lr, alpha, score = policy.learning_rate, policy.ema_alpha, policy.outcome_score("rework")
    before = {
        pk: (w, fw) for pk, w, fw in Edge.objects.filter(graph=graph).values_list("pk", "weight", "feedback_weight")
    }
    node_before = dict(Node.objects.filter(graph=graph).values_list("pk", "feedback_weight"))
    token = create_token(ada)

    with GraphClient(live_server.url, token, timeout=30) as gc:
        hits = gc.search(graph.pk, "vector search with HNSW", k=3)
        assert [h["rank"] for h in hits["results"]] == [1, 2, 3]
        assert set(hits["results"][0]["components"]) == {
            "vector",
            "lexical",
            "hop",
            "persona",
            "recency",
            "feedback",
            "path",
            "priority",
            "memory",
            "exploration",
            "graph",
        }

        # The question only, one vector hit: what follows is reached along the graph's edges.
        ctx = gc.context(graph.pk, "client run 1", "ranking weights", k=1, budget=3)
        assert ctx["session_created"] is True and ctx["mode"] == "retrieve" and len(ctx["items"]) >= 2
        used = next(i for i in ctx["items"] if len(i["path"]) == 1)
        # The agent names the note; the edge that surfaced it is credited too.
        report = gc.record_use(graph.pk, "client run 1", [{"node": used["node"]}])
        assert report["status"] == "queued" and report["idempotency_key"].startswith("uses:")
        reinforce = _wait_for(gc, graph.pk, "client run 1", "reinforce")
        assert (reinforce["edge_updates"], reinforce["node_updates"]) == (1, 1)

        outcome = gc.improve(graph.pk, "client run 1", "rework")
        assert outcome["status"] == "queued"
        batch = _wait_for(gc, graph.pk, "client run 1", "outcome")
        assert gc.improve(graph.pk, "client run 1", "rework") == {"status": "duplicate", "batch": batch["id"]}
        assert gc.improve(graph.pk, "no-such-session", "accepted")["status"] == "unknown_session"

        why = gc.explain(ctx["injection"], i=1, j=2)
        assert why["session"] == "client run 1" and why["comparison"]["i"] == 1
        assert [c["selected"] for c in why["candidates"][:2]] == [True, True]

    # The weights moved by the rules' amounts.
    edge_w, edge_fw = Edge.objects.values_list("weight", "feedback_weight").get(pk=used["edge"])
    w0, fw0 = before[used["edge"]]
    assert edge_w == pytest.approx(w0 + lr * (1 - w0))
    assert edge_fw == pytest.approx(alpha * score + (1 - alpha) * fw0)
    # The used node: reinforced first (feedback_weight, nodes' only weight), then the outcome EMA.
    n0 = node_before[used["node"]]
    reinforced = n0 + lr * (1 - n0)
    assert Node.objects.get(pk=used["node"]).feedback_weight == pytest.approx(alpha * score + (1 - alpha) * reinforced)
    # Every other edge of the graph kept its reinforcement weight: only the used note's path was credited
    # (the session's question node and its learned ``answered`` edges are new rows, the question evidence).
    others = Edge.objects.filter(pk__in=before).exclude(pk=used["edge"])
    assert {pk: w for pk, w in others.values_list("pk", "weight")} == {
        pk: w for pk, (w, _fw) in before.items() if pk != used["edge"]
    }
    assert AgentSession.objects.get(graph=graph, external_id="client run 1").outcome == "rework"


@pytest.mark.django_db(transaction=True)
def test_4xx_raises_with_field_errors_and_is_not_retried(live_server, rg, rita, ada, mallory):
    graph = rg["graph"]
    transport = CountingTransport()
    with GraphClient(live_server.url, create_token(rita), transport=transport, backoff=0) as gc:
        with pytest.raises(ApiError) as bad:
            gc.search(graph.pk, "ranking", k=0)
        assert bad.value.status_code == 400
        assert bad.value.errors == {"k": ["Ensure this value is greater than or equal to 1."]}
        assert transport.attempts == 1

        # A reviewer may not log context nor report feedback: 403, once.
        with pytest.raises(ApiError) as no_context:
            gc.context(graph.pk, "s", "ranking")
        assert no_context.value.status_code == 403
        transport.attempts = 0
        with pytest.raises(ApiError) as forbidden:
            gc.improve(graph.pk, "s", "accepted")
        assert forbidden.value.status_code == 403 and transport.attempts == 1
    with GraphClient(live_server.url, create_token(ada), backoff=0) as gc:
        with pytest.raises(ApiError) as budget:
            gc.context(graph.pk, "s", "ranking", budget=500)
        assert budget.value.errors == {"budget": ["At most 200 items."]}
    assert not AgentSession.objects.exists() and not UpdateBatch.objects.exists()

    # Another organization's graph does not exist for its caller.
    with GraphClient(live_server.url, create_token(mallory), backoff=0) as gc:
        with pytest.raises(ApiError) as foreign:
            gc.context(graph.pk, "s", "ranking")
        assert foreign.value.status_code == 404

    with GraphClient(live_server.url, "not-a-token", backoff=0) as gc:
        with pytest.raises(ApiError) as unauthenticated:
            gc.search(graph.pk, "ranking")
        # Token authentication comes first, so a bad token is a 401 challenge.
        assert unauthenticated.value.status_code == 401
        assert unauthenticated.value.errors == {"detail": "Invalid token."}


def test_connection_errors_are_retried_then_raised():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    transport = CountingTransport()
    with GraphClient(f"http://127.0.0.1:{port}", "t", transport=transport, retries=2, backoff=0) as gc:
        with pytest.raises(httpx.ConnectError):
            gc.explain(1)
    assert transport.attempts == 3


class _Flaky(BaseHTTPRequestHandler):
    """Answers 503 to the first ``failures`` requests, then 200 with the last request's headers and body."""

    failures = 2
    seen: list = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append((self.path, self.headers.get("Idempotency-Key"), json.loads(body)))
        failing = len(type(self).seen) <= type(self).failures
        payload = json.dumps(
            {"detail": "busy"} if failing else {"status": "queued", "task_id": "t", "idempotency_key": "k"}
        )
        self.send_response(503 if failing else 202)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("failures, retries, succeeds", [(2, 3, True), (5, 2, False)])
def test_5xx_is_retried_with_the_same_idempotency_key(failures, retries, succeeds):
    handler = type("Flaky", (_Flaky,), {"failures": failures, "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with GraphClient(f"http://127.0.0.1:{server.server_address[1]}", "t", retries=retries, backoff=0) as gc:
            if succeeds:
                assert gc.improve(3, "run 1", "accepted")["status"] == "queued"
            else:
                with pytest.raises(ServerError) as exc:
                    gc.improve(3, "run 1", "accepted")
                assert exc.value.status_code == 503
    finally:
        server.shutdown()
        server.server_close()
    seen = handler.seen
    assert len(seen) == (failures + 1 if succeeds else retries + 1)
    assert {path for path, _k, _b in seen} == {"/api/graphs/3/sessions/run%201/outcome/"}
    assert len({key for _p, key, _b in seen}) == 1 and seen[0][1]
    assert all(body == {"outcome": "accepted"} for _p, _k, body in seen)
