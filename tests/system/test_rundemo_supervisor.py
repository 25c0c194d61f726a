"""make run keeps serving when a child dies (issue 26, item 3): rundemo's Supervisor restarts the child that
was killed (with a backoff, logged) and leaves the others running. Each child is killed in turn
(SIGKILL, as ``kill -9``): web (gunicorn), worker, beat and the MCP server, the processes ``make run``
starts (``rundemo.children``), on the test database and this branch's ports.
"""

import io
import os
import signal
import time

import pytest

from feedback.management.commands import rundemo
from tests.conftest import ROOT
from tests.resilience import MCP_PORT, WEB_PORT, base_env, get, port_open, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_each_child_killed_in_turn_is_restarted_and_the_others_keep_running(tmp_path, monkeypatch):
    monkeypatch.setattr(rundemo, "RESTART_BACKOFF_S", 0.5)
    env = base_env(CELERY_QUEUE_DIR=str(tmp_path / "queue"), DATABASE_ROLE="app", CELERY_BEAT_SCHEDULE_FILENAME="")
    commands = rundemo.children(f"127.0.0.1:{WEB_PORT}", f"127.0.0.1:{MCP_PORT}")
    commands["worker"] = [*commands["worker"], "--concurrency=1"]
    commands["beat"] = [
        c if not c.startswith("--schedule=") else f"--schedule={tmp_path / 'beat'}" for c in commands["beat"]
    ]
    out = io.StringIO()
    supervisor = rundemo.Supervisor(commands, cwd=ROOT, env=env, out=out)
    supervisor.start_all()
    web = f"http://127.0.0.1:{WEB_PORT}"
    try:
        wait_for(lambda: port_open(WEB_PORT) and port_open(MCP_PORT), "web and MCP to listen", timeout=90)
        for name in ("web", "worker", "beat", "mcp"):
            pids = {n: p.pid for n, p in supervisor.procs.items()}
            os.killpg(supervisor.procs[name].pid, signal.SIGKILL)  # the child and its own workers, as an OOM kill
            supervisor.procs[name].wait(timeout=10)

            def restarted(name=name, old=pids[name]):
                supervisor.tick()
                return supervisor.procs[name].pid != old and supervisor.procs[name].poll() is None

            wait_for(restarted, f"{name} to be restarted", timeout=30, interval=0.1)
            others = {n: p.pid for n, p in supervisor.procs.items() if n != name}
            assert others == {n: pid for n, pid in pids.items() if n != name}  # nobody else was touched
            assert all(p.poll() is None for p in supervisor.procs.values())
            if name == "web":  # the new web server answers once it has started
                wait_for(lambda: port_open(WEB_PORT) and get(web + "/healthz")[0] == 200, "the new web", timeout=60)
            else:
                assert get(web + "/healthz")[0] == 200  # web kept serving while another child died
            time.sleep(0.5)
        wait_for(lambda: port_open(WEB_PORT) and get(web + "/healthz")[0] == 200, "the restarted web", timeout=60)
        wait_for(lambda: port_open(MCP_PORT), "the restarted MCP server", timeout=60)
        assert supervisor.restarts == {"web": 1, "worker": 1, "beat": 1, "mcp": 1}
        log = out.getvalue()
        for name in ("web", "worker", "beat", "mcp"):
            assert f"{name} restarted" in log
        assert "exited with code -9" in log
    finally:
        supervisor.stop(timeout=20)
    assert all(p.poll() is not None for p in supervisor.procs.values())


def test_a_child_dying_again_at_once_waits_longer_each_time():
    supervisor = rundemo.Supervisor({"x": ["false"]}, cwd=ROOT, env=dict(os.environ))
    supervisor.start_all()
    delays = []
    try:
        for _ in range(3):
            supervisor.procs["x"].wait(timeout=5)
            supervisor.tick()
            delays.append(supervisor.restart_at["x"] - time.monotonic())
            supervisor.restart_at["x"] = 0  # due now
            supervisor.tick()
    finally:
        supervisor.stop(timeout=5)
    assert delays[0] < delays[1] < delays[2]
    assert round(delays[1] / delays[0]) == 2
