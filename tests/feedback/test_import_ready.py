"""A graph that says when it is ready (issue 36, item 5): an import over the sync-embedding limit waits for the
embeddings task by default; with --no-wait, the graph's API answer, its overview page, every search and context
answer and the MCP tools' text carry ``vectors_pending`` until it is 0, and reports on a session whose question
was answered meanwhile teach nothing (``graph_not_ready``).

A real Celery worker writes the vectors. To see the graph while they are pending, the test holds a SHARE lock on
the node and edge tables from a second connection, taken once the import has committed and before its task is
sent (an on-commit callback registered first runs first): reads go on, the worker's UPDATEs wait for it.
"""

from __future__ import annotations

import io
import time

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection, transaction

from feedback.models import AgentSession, PendingReport
from feedback.rules import ANSWERED, QUESTION_KIND
from graphadmin import readiness
from graphadmin.accounts import create_token
from graphadmin.models import Edge, EdgeType, Node
from tests.feedback.test_import_api import FIXTURE
from tests.graphadmin.agents.test_mcp_server import ok, with_server

pytestmark = pytest.mark.django_db(transaction=True)
UNIT = [1.0] * django_settings.EMBEDDING_DIM

QUESTION = "How are edges ranked?"


def _import(graph, *options) -> str:
    out = io.StringIO()
    call_command(
        "import_vault", str(FIXTURE), "--graph", graph.slug, "--org", "acme", "--no-progress", *options, stdout=out
    )
    return out.getvalue()


def _missing(graph) -> int:
    return (
        Node.objects.filter(graph=graph, archived=False, embedding=None).count()
        + Edge.objects.filter(graph=graph, archived=False, triplet_embedding=None).count()
    )


@pytest.mark.worker
def test_an_import_over_the_sync_limit_returns_ready(celery_worker_process, settings, acme_graph, api, rita):
    settings.VAULT_IMPORT_SYNC_EMBED_LIMIT = 2  # the fixture vault's 9 notes and their links go to the task
    out = _import(acme_graph)
    assert "by the Celery task on queue 'embeddings'" in out, out
    assert "vectors pending: 0 (the graph is ready)" in out, out
    assert Node.objects.filter(graph=acme_graph).count() == 9
    assert _missing(acme_graph) == 0
    assert api(rita).get(f"/api/graphs/{acme_graph.pk}/").json()["vectors_pending"] == 0


class _Held:
    """A SHARE lock on the node and edge tables in a second connection: reads pass, the worker's UPDATEs wait."""

    def __init__(self):
        self.other = None

    def take(self):
        self.other = connection.copy()
        self.other.connect()
        self.other.set_autocommit(False)
        with self.other.cursor() as cur:
            cur.execute(f"LOCK TABLE {Node._meta.db_table}, {Edge._meta.db_table} IN SHARE MODE")

    def release(self):
        self.other.commit()
        self.other.close()


@pytest.mark.worker
def test_with_no_wait_every_answer_carries_the_count_until_it_is_0(
    celery_worker_process, settings, acme_graph, api, oscar, ada, client, tmp_path
):
    settings.VAULT_IMPORT_SYNC_EMBED_LIMIT = 2
    held = _Held()
    with transaction.atomic():
        transaction.on_commit(held.take)  # before the import's own on-commit send of the embeddings task
        out = _import(acme_graph, "--no-wait")
    try:
        total = _missing(acme_graph)
        assert total > 9, total  # every note and link is waiting for the task
        assert f"vectors pending: {total} (--no-wait" in out, out

        graph_url = f"/api/graphs/{acme_graph.pk}/"
        assert api(oscar).get(graph_url).json()["vectors_pending"] == total
        listed = api(oscar).get("/api/graphs/").json()["results"]
        assert [g["vectors_pending"] for g in listed if g["id"] == acme_graph.pk] == [total]
        agent = api(ada)
        answer = agent.post(f"{graph_url}context/", {"session": "early", "query": QUESTION}, format="json")
        assert answer.status_code == 201, answer.content
        assert answer.json()["vectors_pending"] == total
        search = agent.post(f"{graph_url}search/", {"query": QUESTION}, format="json").json()
        assert search["vectors_pending"] == total
        client.force_login(oscar)
        page = client.get(f"/g/{acme_graph.pk}/").content.decode()
        assert f'id="vectors-pending">{total}<' in page and "Not ready" in page

        async def early(mcp):
            context = await mcp.call_tool(
                "graph_context", {"graph_id": acme_graph.pk, "session": "mcp-early", "query": QUESTION}
            )
            search = await mcp.call_tool("graph_search", {"graph_id": acme_graph.pk, "query": QUESTION})
            return context.content[0].text, search.content[0].text

        texts = with_server(create_token(ada), early, tmp_path)
        for text in texts:
            assert f"This graph is not ready: {total} notes and links have no vector yet" in text, text
            assert f'"vectors_pending": {total}' in text, text

        # A session answered now teaches nothing, and says why; nothing is stored for the worker.
        first = answer.json()["items"][0]["node"]
        used = agent.post(f"{graph_url}sessions/early/uses/", {"items": [{"node": first}]}, format="json")
        assert used.json()["status"] == "graph_not_ready" and used.json()["vectors_pending"] == total, used.content
        outcome = agent.post(f"{graph_url}sessions/early/outcome/", {"outcome": "accepted"}, format="json")
        assert outcome.json()["status"] == "graph_not_ready", outcome.content
        assert not PendingReport.objects.filter(session__external_id="early").exists()
        assert AgentSession.objects.get(graph=acme_graph, external_id="early").vectors_pending == total
        # An answer from start nodes alone does not depend on vectors: its session is not marked.
        agent.post(f"{graph_url}context/", {"session": "by-start", "start_nodes": [first]}, format="json")
        assert AgentSession.objects.get(graph=acme_graph, external_id="by-start").vectors_pending == 0
    finally:
        held.release()

    # The worker writes the vectors: every answer carries the count, which only falls, until it is 0.
    seen = [total]
    deadline = time.monotonic() + 120
    while seen[-1]:
        assert time.monotonic() < deadline, f"still {seen[-1]} vectors pending"
        before = readiness.vectors_pending(acme_graph.pk)
        from_graph = api(oscar).get(graph_url).json()["vectors_pending"]
        from_context = agent.post(
            f"{graph_url}context/", {"session": f"poll-{len(seen)}", "query": QUESTION}, format="json"
        ).json()["vectors_pending"]
        after = readiness.vectors_pending(acme_graph.pk)
        assert before >= from_graph >= from_context >= after, (before, from_graph, from_context, after)
        assert from_context <= seen[-1]
        seen.append(after)
        time.sleep(0.05)
    assert _missing(acme_graph) == 0

    # Ready: no notice, and a session answered now learns.
    ready = agent.post(f"{graph_url}context/", {"session": "late", "query": QUESTION}, format="json").json()
    assert ready["vectors_pending"] == 0
    reported = agent.post(
        f"{graph_url}sessions/late/uses/", {"items": [{"node": ready["items"][0]["node"]}]}, format="json"
    )
    assert reported.status_code == 202 and reported.json()["status"] == "queued", reported.content

    async def late(mcp):
        result = await mcp.call_tool(
            "graph_context", {"graph_id": acme_graph.pk, "session": "mcp-late", "query": QUESTION}
        )
        return ok(result)

    body = with_server(create_token(ada), late, tmp_path)
    assert body["vectors_pending"] == 0 and "notice" not in body


def test_rows_no_task_writes_are_pending_but_no_build(small_graph, acme_graph, api, ada, client, oscar):
    """Nodes and edges created without a vector (small_graph, as the REST API makes them) are counted, but no
    embeddings task is writing them: the answers say so, and a session answered then still teaches."""
    graph_url = f"/api/graphs/{acme_graph.pk}/"
    assert readiness.readiness(acme_graph.pk) == readiness.Readiness(pending=5, building=False)
    agent = api(ada)
    answer = agent.post(
        f"{graph_url}context/", {"session": "s", "query": "note a", "start_nodes": [small_graph["a"].pk]}, format="json"
    ).json()
    assert answer["vectors_pending"] == 5
    assert AgentSession.objects.get(graph=acme_graph, external_id="s").vectors_pending == 0
    used = agent.post(f"{graph_url}sessions/s/uses/", {"items": [{"node": answer["items"][0]["node"]}]}, format="json")
    assert used.status_code == 202 and used.json()["status"] == "queued", used.content
    client.force_login(oscar)
    page = client.get(f"/g/{acme_graph.pk}/").content.decode()
    assert 'id="vectors-pending">5<' in page and "no task writing them" in page and "Not ready" not in page


def test_question_evidence_edges_are_never_pending(small_graph, acme_graph):
    assert readiness.EVIDENCE_EDGE_TYPE == ANSWERED  # the core's copy of feedback's name
    answered = EdgeType.objects.create(graph=acme_graph, name=ANSWERED)
    question = Node.objects.create(graph=acme_graph, key="q", kind=QUESTION_KIND, title="q", embedding=UNIT)
    Edge.objects.create(graph=acme_graph, source=question, target=small_graph["a"], edge_type=answered)
    # small_graph's 3 nodes and 2 edges; the question has its vector and its evidence edge none by design.
    assert readiness.vectors_pending(acme_graph.pk) == 5
    Node.objects.filter(graph=acme_graph).update(embedding=UNIT)
    Edge.objects.filter(graph=acme_graph).exclude(edge_type=answered).update(triplet_embedding=UNIT)
    assert readiness.pending_of([acme_graph.pk, acme_graph.pk + 1000]) == {acme_graph.pk: 0, acme_graph.pk + 1000: 0}
