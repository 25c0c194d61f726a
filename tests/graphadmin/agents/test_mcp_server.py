"""The MCP server end to end: an MCP client of the same SDK starts ``manage.py mcp_server`` over stdio.

The server is a real subprocess on the test database (like the Celery worker of ``celery_worker_process``);
feedback reports are applied by the real worker. The tests drive only the protocol while the server
runs (no ORM inside the event loop) and check the database afterwards.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import anyio
import pytest
from django.db import connection
from knox.models import AuthToken
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from feedback.models import AgentSession, ContextInjection, UpdateBatch
from graphadmin import actions as graph_actions
from graphadmin.accounts import create_token
from graphadmin.models import Edge, Node
from tests.conftest import ROOT, stop

TOOLS = {
    "graph_search",
    "graph_context",
    "graph_record_use",
    "graph_improve",
    "graph_explain",
    "graph_remember",
    "graph_link",
    "graph_forget",
}


def _env(token: str | None) -> dict:
    env = dict(os.environ)
    env["DATABASE_NAME"] = connection.settings_dict["NAME"]
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    env.pop("GRAPHADMIN_TOKEN", None)
    if token is not None:
        env["GRAPHADMIN_TOKEN"] = token
    return env


def with_server(token: str, script, tmp_path):
    """Start the server over stdio as ``token``'s user, initialize, run ``await script(client)``; return its result."""

    async def main():
        params = StdioServerParameters(
            command=sys.executable, args=["manage.py", "mcp_server"], env=_env(token), cwd=str(ROOT)
        )
        with open(tmp_path / "mcp-server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as client:
                    await client.initialize()
                    return await script(client)

    return anyio.run(main)


def ok(result) -> dict:
    """The tool's JSON answer; fails the test with the server's reason on a tool error."""
    text = result.content[0].text
    assert not result.is_error, text
    return json.loads(text)


def error(result) -> str:
    """The reason of a tool error (isError), without the SDK's "Error executing tool NAME: " prefix."""
    text = result.content[0].text
    assert result.is_error, text
    assert text.startswith("Error executing tool "), text
    return text.split(": ", 1)[1]


async def wait_for_batches(client, injection_id: int, kinds: set[str], timeout: float = 60) -> dict:
    """Poll graph_explain until the session's feedback batches of ``kinds`` are applied by the worker."""
    deadline = time.monotonic() + timeout
    while True:
        body = ok(await client.call_tool("graph_explain", {"injection_id": injection_id}))
        done = {b["kind"] for b in body["feedback_batches"] if b["status"] == "applied"}
        if kinds <= done:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"batches {kinds} not applied in {timeout}s: {body['feedback_batches']}")
        await anyio.sleep(0.3)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_full_agent_session_over_stdio_moves_the_weights(rg, ada, globex_graph, celery_worker_process, tmp_path):
    graph = rg["graph"]
    # The session credits a note reached along an edge (expansion). The lexical side would fill the 3
    # items with BM25 hits on "ranking weights" (no path): it is tested in tests/ranking/test_lexical.py.
    graph_actions.do_set_policy(graph, {"coef_lexical": 0.0}, actor=ada)
    policy = graph.current_policy()
    lr, neg, alpha = policy.learning_rate, policy.negative_rate, policy.ema_alpha
    score = policy.outcome_score("accepted")
    before = {
        pk: (w, fw) for pk, w, fw in Edge.objects.filter(graph=graph).values_list("pk", "weight", "feedback_weight")
    }
    node_before = dict(Node.objects.filter(graph=graph).values_list("pk", "feedback_weight"))
    token = create_token(ada)
    foreign_injection = ContextInjection.objects.create(
        graph=globex_graph,
        session=AgentSession.objects.create(graph=globex_graph, external_id="theirs"),
        policy_revision=globex_graph.current_policy(),
        query="secret",
        mode="hybrid",
        budget_unit="items",
        budget=1,
        spent=0,
        params={},
    )

    async def session(client):
        tools = (await client.list_tools()).tools
        by_name = {t.name: t for t in tools}
        context = ok(
            await client.call_tool(
                "graph_context",
                {
                    "graph_id": graph.pk,
                    "session": "agent-run-1",
                    "query": "ranking weights",
                    "k": 2,
                    "budget": 3,
                },
            )
        )
        # The agent names the notes: one it used (reached along an edge), one it found wrong.
        used = next(i for i in context["items"] if i["path"])
        wrong = next(i for i in context["items"] if i["node"] != used["node"])
        record = ok(
            await client.call_tool(
                "graph_record_use",
                {
                    "graph_id": graph.pk,
                    "session": "agent-run-1",
                    "items": [
                        {"node": used["node"], "signal": "explicit"},
                        {"node": wrong["node"], "signal": "negative"},
                    ],
                },
            )
        )
        reinforced = await wait_for_batches(client, context["injection"], {"reinforce"})
        improve = ok(
            await client.call_tool(
                "graph_improve", {"graph_id": graph.pk, "session": "agent-run-1", "outcome": "accepted"}
            )
        )
        explained = await wait_for_batches(client, context["injection"], {"reinforce", "outcome"})
        why = ok(await client.call_tool("graph_explain", {"injection_id": context["injection"], "node": wrong["node"]}))
        again = ok(
            await client.call_tool(
                "graph_improve", {"graph_id": graph.pk, "session": "agent-run-1", "outcome": "accepted"}
            )
        )
        unknown = ok(
            await client.call_tool(
                "graph_improve", {"graph_id": graph.pk, "session": "never-seen", "outcome": "rejected"}
            )
        )
        assert unknown == {
            "session": "never-seen",
            "status": "unknown_session",
            "reason": "report for an unknown session",
        }
        foreign = error(
            await client.call_tool("graph_context", {"graph_id": globex_graph.pk, "session": "s", "query": "ranking"})
        )
        foreign_explain = error(await client.call_tool("graph_explain", {"injection_id": foreign_injection.pk}))
        # The API's own messages (its serializers validate the tool input).
        invalid = {
            "budget": error(
                await client.call_tool(
                    "graph_context", {"graph_id": graph.pk, "session": "v1", "query": "ranking", "budget": 201}
                )
            ),
            "nothing": error(await client.call_tool("graph_context", {"graph_id": graph.pk, "session": "v1"})),
            "unknown_node": error(
                await client.call_tool("graph_context", {"graph_id": graph.pk, "session": "v1", "start_nodes": [10**9]})
            ),
            # After the outcome the session takes no more reports.
            "closed": error(
                await client.call_tool(
                    "graph_record_use",
                    {"graph_id": graph.pk, "session": "agent-run-1", "items": [{"node": used["node"]}]},
                )
            ),
        }
        return by_name, context, record, reinforced, improve, explained, why, again, foreign, foreign_explain, invalid

    by_name, context, record, reinforced, improve, explained, why, again, foreign, foreign_explain, invalid = (
        with_server(token, session, tmp_path)
    )
    assert invalid["budget"] == 'Invalid input: {"budget": ["At most 200 items."]}'
    assert "Give a query (or a vector), or start nodes." in invalid["nothing"]
    assert "start_nodes" in invalid["unknown_node"] and "Unknown or archived node" in invalid["unknown_node"]
    assert "already has its outcome" in invalid["closed"]

    # The tools, with their documented schemas.
    assert set(by_name) == TOOLS
    assert by_name["graph_context"].input_schema["required"] == ["graph_id", "session"]
    assert by_name["graph_search"].input_schema["properties"]["k"]["maximum"] == 200
    assert by_name["graph_improve"].input_schema["properties"]["outcome"]["enum"] == ["accepted", "rework", "rejected"]
    assert all(by_name[n].description for n in TOOLS)
    assert by_name["graph_search"].annotations.read_only_hint is True
    assert by_name["graph_improve"].annotations.read_only_hint is False

    # graph_context: the question only, three items, logged as an injection of the session.
    assert context["mode"] == "retrieve" and context["spent"] == 3 and len(context["items"]) == 3
    injection = ContextInjection.objects.get(pk=context["injection"])
    assert injection.session.external_id == "agent-run-1" and injection.graph_id == graph.pk
    selected_nodes = set(injection.candidates.filter(selected=True).values_list("node_id", flat=True))
    assert selected_nodes == {item["node"] for item in context["items"]}
    surfaced_edges = {e for item in context["items"] for e in item["path"]}
    used = next(i for i in context["items"] if i["path"])  # as the session chose them
    wrong = next(i for i in context["items"] if i["node"] != used["node"])

    # graph_record_use and graph_improve go through the API's queue: answered "queued", applied by the worker.
    assert record["uses"]["status"] == "queued" and record["uses"]["task_id"]
    assert improve["status"] == "queued"
    assert again == {
        "session": "agent-run-1",
        "status": "duplicate",
        "batch": UpdateBatch.objects.get(kind="outcome").pk,
    }

    # Reinforcement: the used note's path w += lr * (1 - w); the wrong note's last edge w -= neg * w;
    # the rest unchanged.
    up = set(used["path"])
    down = set(wrong["path"][-1:]) - up
    after = {
        pk: (w, fw) for pk, w, fw in Edge.objects.filter(graph=graph).values_list("pk", "weight", "feedback_weight")
    }
    for pk in before:
        w0 = before[pk][0]
        expected = w0 + lr * (1 - w0) if pk in up else (w0 - neg * w0 if pk in down else w0)
        assert after[pk][0] == pytest.approx(expected), pk

    # Outcome EMA on feedback_weight of every surfaced edge (the selected items' paths) and node, nothing else.
    for pk in before:
        expected = alpha * score + (1 - alpha) * before[pk][1] if pk in surfaced_edges else before[pk][1]
        assert after[pk][1] == pytest.approx(expected), pk
    # The notes that were there before (the session's question node is new: the question evidence).
    for pk, fw in Node.objects.filter(graph=graph, pk__in=node_before).values_list("pk", "feedback_weight"):
        w0 = node_before[pk]
        w0 = w0 + lr * (1 - w0) if pk == used["node"] else (w0 - neg * w0 if pk == wrong["node"] else w0)
        expected = alpha * score + (1 - alpha) * w0 if pk in selected_nodes else w0
        assert fw == pytest.approx(expected), pk
    assert AgentSession.objects.get(graph=graph, external_id="agent-run-1").outcome == "accepted"

    # graph_explain: every candidate with components, how it entered and its path, the comparison, and the batches.
    kinds = [(b["kind"], b["status"], b["edge_updates"]) for b in explained["feedback_batches"]]
    assert kinds == [("reinforce", "applied", len(up | down)), ("outcome", "applied", len(surfaced_edges))]
    assert [b["kind"] for b in reinforced["feedback_batches"]] == ["reinforce"]
    assert len(explained["candidates"]) == injection.candidates.count()
    assert set(explained["candidates"][0]["components"]) == {
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
    assert all("entry" in c and "path_text" in c for c in explained["candidates"])
    rank = wrong["rank"]  # compared with the one above it; the top candidate with the runner-up
    assert (why["comparison"]["i"], why["comparison"]["j"]) == ((rank, rank - 1) if rank > 1 else (1, 2))
    assert why["comparison"]["difference"] == pytest.approx(why["comparison"]["total_i"] - why["comparison"]["total_j"])

    # Another organization's graph and injection do not exist for this caller, and nothing was written there.
    assert foreign == f"Graph {globex_graph.pk} not found."
    assert foreign_explain == f"Injection {foreign_injection.pk} not found."
    assert not AgentSession.objects.filter(graph=globex_graph, external_id="s").exists()


@pytest.mark.django_db(transaction=True)
def test_roles_validation_and_revoked_token_are_tool_errors(rg, rita, tmp_path):
    graph, nodes = rg["graph"], rg["nodes"]
    token = create_token(rita)

    async def script(client):
        out = {}
        out["search"] = ok(
            await client.call_tool("graph_search", {"graph_id": graph.pk, "query": "vector search", "k": 3})
        )
        out["k0"] = error(await client.call_tool("graph_search", {"graph_id": graph.pk, "query": "x", "k": 0}))
        out["context"] = error(
            await client.call_tool("graph_context", {"graph_id": graph.pk, "session": "s1", "query": "ranking"})
        )
        out["use"] = error(
            await client.call_tool(
                "graph_record_use", {"graph_id": graph.pk, "session": "s1", "items": [{"node": nodes["a"].pk}]}
            )
        )
        out["improve"] = error(
            await client.call_tool("graph_improve", {"graph_id": graph.pk, "session": "s1", "outcome": "accepted"})
        )
        out["bad_outcome"] = (
            await client.call_tool("graph_improve", {"graph_id": graph.pk, "session": "s1", "outcome": "great"})
        ).is_error
        # Revoked while the server runs: refused from the next call on.
        await anyio.to_thread.run_sync(revoke)
        out["revoked"] = error(await client.call_tool("graph_search", {"graph_id": graph.pk, "query": "vector search"}))
        return out

    def revoke():
        # In a worker thread: no event loop there, so the ORM may run.
        AuthToken.objects.filter(user=rita).delete()
        connection.close()

    out = with_server(token, script, tmp_path)

    hits = out["search"]["results"]
    assert [h["rank"] for h in hits] == [1, 2, 3] and all("components" in h and "vector_score" in h for h in hits)
    # The API's own messages (its serializers validate the tool input).
    assert out["k0"] == 'Invalid input: {"k": ["Ensure this value is greater than or equal to 1."]}'
    # A reviewer may search (read only), not log context nor report feedback.
    assert out["context"].startswith("Permission denied")
    assert out["use"].startswith("Permission denied") and out["improve"].startswith("Permission denied")
    assert out["bad_outcome"] is True
    assert out["revoked"] == "Invalid token (unknown or expired key, or inactive user)."
    # Errors wrote nothing: no session, no injection, no batch.
    assert not AgentSession.objects.filter(graph=graph).exists()
    assert not UpdateBatch.objects.filter(graph=graph).exists()


@pytest.mark.django_db(transaction=True)
def test_bad_or_missing_token_is_refused_at_start(ana):
    create_token(ana)
    for args, env_token, message in (
        (["--token", "not-a-real-token"], None, "Invalid token"),
        ([], None, "No token"),
    ):
        proc = subprocess.run(
            [sys.executable, "manage.py", "mcp_server", *args],
            cwd=ROOT,
            env=_env(env_token),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode != 0
        assert message in proc.stderr
        assert proc.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_streamable_http_needs_a_bearer_token_per_request(rg, rita, tmp_path):
    import httpx
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    graph = rg["graph"]
    token = create_token(rita)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "mcp-http.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "mcp_server", "--http", "--port", str(port)],
        cwd=ROOT,
        env=_env(None),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "mcp-http.log").read_text()
                time.sleep(0.2)

        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        }
        headers = {"Accept": "application/json, text/event-stream"}
        anonymous = httpx.post(url, json=init, headers=headers, timeout=10)
        assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"].startswith("Bearer")
        assert (
            httpx.post(url, json=init, headers={**headers, "Authorization": "Bearer nope"}, timeout=10).status_code
            == 401
        )

        async def main():
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write, read_timeout_seconds=60) as client:
                        await client.initialize()
                        names = {t.name for t in (await client.list_tools()).tools}
                        hits = ok(
                            await client.call_tool(
                                "graph_search", {"graph_id": graph.pk, "query": "vector search", "k": 2}
                            )
                        )
                        refused = error(
                            await client.call_tool(
                                "graph_improve", {"graph_id": graph.pk, "session": "s", "outcome": "accepted"}
                            )
                        )
                        return names, hits, refused

        names, hits, refused = anyio.run(main)
    finally:
        stop(proc)
        log.close()
    assert names == TOOLS
    assert len(hits["results"]) == 2
    assert refused.startswith("Permission denied")  # acting as the bearer token's user (rita, a reviewer)
