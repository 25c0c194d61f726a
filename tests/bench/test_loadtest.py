"""The load test, small: gunicorn on the test database with the demo graph, the real worker, a few agents.

No timing is asserted (the machine is shared); every request must succeed and every report must be
applied by the worker. The load generator refuses any address but loopback.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from django.db import connection

from bench import loadtest
from feedback.harness.demo import ensure_demo
from tests.conftest import ROOT, stop


def test_refuses_addresses_off_this_machine():
    assert loadtest.loopback_only("http://127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert loadtest.loopback_only("http://localhost:9") == ("localhost", 9)
    for url in ("http://10.0.0.1:8000", "http://192.168.1.5", "https://127.0.0.1:8000", "ftp://127.0.0.1"):
        with pytest.raises(SystemExit):
            loadtest.loopback_only(url)


def test_percentile_is_nearest_rank():
    values = list(range(1, 101))
    assert loadtest.percentile(values, 50) == 50
    assert loadtest.percentile(values, 95) == 95
    assert loadtest.percentile(values, 99) == 99
    assert loadtest.percentile([], 50) is None


def test_section_is_replaced_not_duplicated(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n\n## Other\n\ntext\n")
    loadtest.write_section("## Load test\n\nfirst", doc)
    loadtest.write_section("## Load test\n\nsecond", doc)
    text = doc.read_text()
    assert text.count(loadtest.SECTION_START) == 1 and "second" in text and "first" not in text
    assert text.startswith("# Performance\n\n## Other\n\ntext\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_small_load_test_has_no_errors(celery_worker_process, tmp_path):
    ensure_demo()
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_NAME": connection.settings_dict["NAME"],
        "WEB_CONCURRENCY": "2",
        "ALLOWED_HOSTS": "127.0.0.1",  # other tests of the run may have set it for their own client
    }
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    log = open(tmp_path / "web.log", "w")
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:graphadmin.gunicorn_conf", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5).close()
                break
            except OSError:
                assert web.poll() is None and time.monotonic() < deadline, (tmp_path / "web.log").read_text()
                time.sleep(0.3)
        out = tmp_path / "rows.json"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.loadtest",
                "agents",
                "--url",
                f"http://127.0.0.1:{port}",
                "--agents",
                "1,4",
                "--seconds",
                "5",
                "--max-sessions",
                "8",
                "--json",
                str(out),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        stop(web)
        log.close()
    rows = json.loads(out.read_text())
    assert [r["agents"] for r in rows] == [1, 4]
    for row in rows:
        assert row["errors"] == 0, row["error_samples"]
        assert row["sessions"] > 0
        # Every use report and outcome the 202s promised was applied by the worker.
        assert row["lag_missing"] == 0 and row["lag_n"] >= row["sessions"]
        assert row["context_p50"] is not None and row["lag_p95"] is not None
