"""graph_remember, graph_link and graph_forget through the official MCP client, against ``manage.py
mcp_server`` over stdio on the test database (tests/graphadmin/agents/test_mcp_server.py's harness)."""

from __future__ import annotations

import pytest

from feedback.models import UpdateBatch
from graphadmin.accounts import create_token
from graphadmin.models import Edge, Node
from tests.graphadmin.agents.test_mcp_server import error, ok, with_server


@pytest.mark.django_db(transaction=True)
def test_an_agent_remembers_links_and_forgets_through_mcp(acme_graph, small_graph, globex_graph, ada, tmp_path):
    graph = acme_graph

    async def script(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        hints = {
            name: (a.read_only_hint, a.destructive_hint, a.idempotent_hint)
            for name, a in ((n, tools[n].annotations) for n in ("graph_remember", "graph_link", "graph_forget"))
        }
        out = {"hints": hints}
        out["created"] = ok(
            await client.call_tool(
                "graph_remember",
                {
                    "graph_id": graph.pk,
                    "text": "The staging database is reset every Sunday night; see [[a]].",
                    "key": "ops/staging-reset",
                    "session": "mcp-1",
                    "links": [{"node": "b", "type": "depends_on"}],
                },
            )
        )
        out["again"] = ok(
            await client.call_tool(
                "graph_remember",
                {
                    "graph_id": graph.pk,
                    "text": "The staging database is reset every Sunday night; see [[a]].",
                    "key": "ops/staging-reset",
                },
            )
        )
        out["link"] = ok(
            await client.call_tool(
                "graph_link", {"graph_id": graph.pk, "source": "ops/staging-reset", "target": small_graph["c"].pk}
            )
        )
        out["not_mine"] = error(
            await client.call_tool("graph_forget", {"graph_id": graph.pk, "nodes": [small_graph["a"].pk]})
        )
        out["too_many"] = error(
            await client.call_tool("graph_remember", {"graph_id": graph.pk, "text": "x", "links": [{"node": "a"}] * 21})
        )
        out["foreign"] = error(await client.call_tool("graph_remember", {"graph_id": globex_graph.pk, "text": "x"}))
        out["forget"] = ok(
            await client.call_tool("graph_forget", {"graph_id": graph.pk, "nodes": [out["created"]["node"]]})
        )
        return out

    out = with_server(create_token(ada), script, tmp_path)
    assert out["hints"] == {
        "graph_remember": (False, False, False),
        "graph_link": (False, False, True),
        "graph_forget": (False, True, True),
    }
    created = out["created"]
    assert created["status"] == "created" and created["batch"] and created["key"] == "ops/staging-reset"
    node = Node.objects.get(pk=created["node"])
    assert node.created_by == ada and "session:mcp-1" in node.source
    assert out["again"]["status"] == "unchanged" and out["again"]["batch"] is None
    assert out["link"]["status"] == "created"
    assert "Permission denied" in out["not_mine"]
    assert "Invalid input" in out["too_many"] and "links" in out["too_many"]
    assert "not found" in out["foreign"]
    assert out["forget"]["nodes"] == [node.pk]
    node.refresh_from_db()
    assert node.archived
    assert set(Edge.objects.filter(source=node).values_list("target__key", flat=True)) == {"a", "b", "c"}
    kinds = list(UpdateBatch.objects.filter(graph=graph).order_by("pk").values_list("kind", flat=True))
    assert kinds == ["memory", "memory", "memory"]
    assert UpdateBatch.objects.get(pk=created["batch"]).trigger_session.external_id == "mcp-1"
