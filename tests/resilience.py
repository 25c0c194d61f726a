"""Processes the resilience tests start and stop themselves: a Redis broker of their own (never the shared
machine's), a gunicorn web server, a Celery worker and beat, each on the test database.

Ports (this branch's own): web 8106, MCP 8206, Redis 6390 (a broker the tests stop), 6391 (never started:
a broker that is down from the start); under pytest-xdist each worker N adds 10 * N (tests/xdist_worker.py).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from tests import xdist_worker
from tests.conftest import ROOT, stop

_OFFSET = 10 * xdist_worker.index()
WEB_PORT = 8106 + _OFFSET
MCP_PORT = 8206 + _OFFSET
REDIS_PORT = 6390 + _OFFSET
DEAD_REDIS_PORT = 6391 + _OFFSET


def base_env(**extra) -> dict[str, str]:
    """The environment of a process serving the test database: DEBUG off, a test key, the app role."""
    env = dict(os.environ)
    env.update(
        DATABASE_NAME=connection.settings_dict["NAME"],
        DEBUG="0",
        SECRET_KEY=os.environ.get("SECRET_KEY", "test-only-insecure-key"),
        LOG_LEVEL="WARNING",
        LOG_FORMAT="text",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        WEB_CONCURRENCY="1",
        WEB_THREADS="4",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextmanager
def redis_server(port: int = REDIS_PORT):
    """A Redis of this test's own on ``port`` (no persistence); yields a function that stops it; stopped after."""
    assert not port_open(port), f"port {port} is taken: another run's Redis?"
    subprocess.run(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--daemonize", "yes"], check=True
    )
    deadline = time.monotonic() + 10
    while not port_open(port):
        assert time.monotonic() < deadline, "redis-server did not start"
        time.sleep(0.05)

    def shutdown():
        if port_open(port):
            subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True)
            deadline = time.monotonic() + 10
            while port_open(port):
                assert time.monotonic() < deadline, "redis-server did not stop"
                time.sleep(0.05)

    try:
        yield shutdown
    finally:
        shutdown()


def start(cmd: list[str], env: dict, log_path: Path) -> subprocess.Popen:
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log_path = log_path
    return proc


def wait_for(predicate, what: str, timeout: float = 60, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def get(url: str, headers=None, timeout: float = 10) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def send(url: str, body: bytes, headers=None, method="POST", timeout: float = 30) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@contextmanager
def web_server(tmp_path: Path, port: int = WEB_PORT, **env):
    """gunicorn (the product's configuration) on ``port``; yields its base URL once /healthz answers."""
    proc = start(
        [sys.executable, "-m", "gunicorn", "-c", "python:graphadmin.gunicorn_conf", "--bind", f"127.0.0.1:{port}"],
        base_env(**env),
        tmp_path / f"web-{port}.log",
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or port_open(port), "the web server")
        assert proc.poll() is None, proc.log_path.read_text()
        wait_for(lambda: get(url + "/healthz")[0] == 200, "/healthz")
        yield url
    finally:
        stop(proc)


def celery(tmp_path: Path, what: str, name: str, **env) -> subprocess.Popen:
    """A Celery worker (every queue) or beat process on the test database."""
    from django.conf import settings

    cmd = [sys.executable, "-m", "celery", "-A", "graphadmin", what, "--loglevel=INFO"]
    if what == "worker":
        cmd += ["--pool=solo", "--without-heartbeat", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
        cmd += ["-Q", ",".join(settings.WORKER_QUEUES)]
    else:
        cmd += [f"--schedule={tmp_path / 'beat-schedule'}"]
    return start(cmd, base_env(LOG_LEVEL="INFO", **env), tmp_path / f"{name}.log")
