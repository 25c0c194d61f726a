"""Each framework adapter of graphadmin-client against the real product (pytest-django's live server, the real
Celery worker), run by `make test-clients` (tools/test_clients.sh): for each virtualenv it made (one extra at its
lowest or newest version), clients/python/tests/live_sessions.py runs two sessions at once through one adapter
instance with that virtualenv's Python; this test sees both sessions under their own ids, the note the answer
quoted credited as an implicit use, and the outcome batch applied."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from feedback.models import AgentSession, UpdateBatch, UseEvent
from graphadmin.accounts import create_token

ROOT = Path(__file__).resolve().parents[2]
VENVS = os.environ.get("GRAPHADMIN_CLIENT_VENVS", "").split()
ADAPTER = {
    "langchain": "langchain",
    "langgraph": "langgraph",
    "llamaindex": "llamaindex",
    "openai-agents": "openai_agents",
    "pydantic-ai": "pydantic_ai",
}


def _adapter(venv: str) -> str:
    extra = Path(venv).name.rsplit("-", 1)[0]
    return ADAPTER[extra]


def _wait_for_outcomes(graph, sessions: list[str], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        applied = UpdateBatch.objects.filter(
            graph=graph, kind="outcome", status="applied", trigger_session__external_id__in=sessions
        ).count()
        if applied == len(sessions):
            return
        time.sleep(0.3)
    raise AssertionError(f"no applied outcome batch for each of {sessions} in {timeout}s")


@pytest.mark.skipif(not VENVS, reason="make test-clients runs these (it makes the adapters' virtualenvs)")
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("venv", VENVS or ["none"], ids=lambda v: Path(v).name)
def test_whole_sessions_through_the_adapter(venv, live_server, rg, ada, celery_worker_process):
    graph, ranking = rg["graph"], rg["nodes"]["b"]
    env = {
        **os.environ,
        "GRAPHADMIN_URL": live_server.url,
        "GRAPHADMIN_TOKEN": create_token(ada),
        "GRAPHADMIN_GRAPH": str(graph.pk),
    }
    prefix = Path(venv).name
    run = subprocess.run(
        [
            str(ROOT / venv / "bin" / "python"),
            str(ROOT / "clients/python/tests/live_sessions.py"),
            _adapter(venv),
            prefix,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    answer = json.loads(run.stdout.strip().splitlines()[-1])
    sessions = answer["sessions"]
    # Both sessions reached the server under their own ids, each with the Ranking note among its items.
    assert sorted(AgentSession.objects.filter(graph=graph).values_list("external_id", flat=True)) == sorted(sessions)
    assert all(ranking.key in answer["keys"][s] for s in sessions), answer["keys"]
    _wait_for_outcomes(graph, sessions)
    for session in sessions:
        assert AgentSession.objects.get(graph=graph, external_id=session).outcome == "accepted"
        # The answer text quoted the Ranking note: the server credited it as an implicit use.
        assert UseEvent.objects.filter(session__external_id=session, signal="implicit", node=ranking).exists()
