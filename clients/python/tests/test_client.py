"""GraphClient and AsyncGraphClient on the stub server: the same calls, retries, idempotency keys, no Django."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from graphadmin_client import ApiError, ServerError, abstained
from graphadmin_client.client import MAX_RETRY_AFTER


def test_import_loads_httpx_and_no_django_nor_framework():
    code = (
        "import sys, graphadmin_client; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('django', 'rest_framework', 'langchain_core', 'langgraph', 'llama_index', 'agents', 'pydantic_ai')]; "
        "print(bad); assert 'httpx' in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_session_through_the_sync_client(client, stub):
    ctx = client.context(3, "run 1", "how are edges ranked by weight", budget=2)
    assert [i["key"] for i in ctx["items"]] == ["ranking/weights", "ranking/hnsw"] and not abstained(ctx)
    sent = client.report(3, "run 1", uses=[{"node": 11}], response="Edges are ranked by weight.", outcome="accepted")
    assert [r["status"] for r in sent.values()] == ["queued", "queued", "queued"]
    posts = stub.seen("POST")
    assert [p["path"] for p in posts] == [
        "/api/graphs/3/context/",
        "/api/graphs/3/sessions/run%201/uses/",
        "/api/graphs/3/sessions/run%201/response/",
        "/api/graphs/3/sessions/run%201/outcome/",
    ]
    assert posts[0]["json"] == {
        "query": "how are edges ranked by weight",
        "k": 50,
        "session": "run 1",
        "budget_unit": "items",
        "budget": 2,
    }
    assert posts[0]["headers"]["Authorization"] == "Token stub-token"
    keys = [p["headers"]["Idempotency-Key"] for p in posts[1:]]
    assert len(set(keys)) == 3


def test_the_async_client_has_the_same_methods_and_answers(aclient, client, stub):
    sync_names = {n for n in dir(client) if not n.startswith("_")} - {
        "close",
        "base_url",
        "token",
        "retries",
        "backoff",
    }
    async_names = {n for n in dir(aclient) if not n.startswith("_")} - {
        "aclose",
        "base_url",
        "token",
        "retries",
        "backoff",
    }
    assert sync_names == async_names and {"remember", "link", "forget", "report", "explain", "batches"} <= sync_names

    async def run():
        async with aclient as gc:
            a = await gc.context(3, "a", "backups", budget=1)
            b = await gc.remember(3, "We back up nightly.", key="ops/nightly", links=[{"node": "ops/backup"}])
            c = await gc.search(3, "backup", k=2)
            d = await gc.batches(3, "a")
            return a, b, c, d

    a, b, c, d = asyncio.run(run())
    assert a["items"][0]["key"] == "ops/backup" and b["status"] == "created" and len(c["results"]) == 2 and d == []
    assert client.context(3, "a", "backups", budget=1)["items"] == a["items"]
    assert stub.remembered == [{"text": "We back up nightly.", "key": "ops/nightly", "links": [{"node": "ops/backup"}]}]


def test_a_5xx_is_retried_with_the_same_idempotency_key(client, stub):
    stub.fail_next = 2
    assert client.improve(3, "s", "rework")["status"] == "queued"
    tries = stub.seen("POST", "/outcome/")
    assert len(tries) == 3 and len({t["headers"]["Idempotency-Key"] for t in tries}) == 1


def test_a_busy_503_is_retried_after_the_time_it_asks_for(client, aclient, stub, monkeypatch):
    """Retry-After (seconds) is honoured when longer than the backoff (0 here), capped at MAX_RETRY_AFTER."""
    slept = []
    monkeypatch.setattr("graphadmin_client.client.time.sleep", slept.append)
    stub.fail_next, stub.retry_after = 2, "2"
    assert client.improve(3, "s", "rework")["status"] == "queued"
    stub.fail_next, stub.retry_after = 1, "3600"
    assert client.improve(3, "s", "accepted")["status"] == "queued"
    stub.fail_next, stub.retry_after = 1, "Wed, 21 Oct 2026 07:28:00 GMT"  # a date: the backoff alone
    assert client.improve(3, "s", "accepted")["status"] == "queued"
    assert slept == [2.0, 2.0, MAX_RETRY_AFTER, 0.0]

    async def no_wait(seconds):
        slept.append(seconds)

    async def run():
        async with aclient as gc:
            return await gc.improve(3, "s", "rework")

    monkeypatch.setattr("graphadmin_client.client.asyncio.sleep", no_wait)
    stub.fail_next, stub.retry_after = 1, "1"
    assert asyncio.run(run())["status"] == "queued"
    assert slept[-1] == 1.0


def test_retries_spent_raise_server_error_and_a_4xx_is_not_retried(client, stub):
    stub.fail_next = 10
    with pytest.raises(ServerError) as err:
        client.record_response(3, "s", "text")
    assert err.value.status_code == 503 and len(stub.seen("POST")) == 4  # the call and 3 retries
    stub.fail_next = 0
    with pytest.raises(ApiError) as bad:
        client.explain(999)
    assert bad.value.status_code == 404 and len(stub.seen("GET")) == 1


def test_the_stub_refuses_what_the_schema_refuses(client, stub):
    """The stub checks requests against the schema: a body the server would refuse is caught here too."""
    with pytest.raises(ApiError):
        client.link(3, "a", "b", type="x" * 500)
    assert stub.errors and "OpenAPI" in stub.errors[0]
    stub.errors.clear()
