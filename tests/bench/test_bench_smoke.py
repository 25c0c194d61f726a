"""The benchmark at a tiny scale, as a smoke test: it runs end to end and prints its table (no timing asserted)."""

import os
import subprocess
import sys

from django.urls import get_resolver

from bench.run import ACTIONS, PAGES
from feedback import urls as feedback_urls
from graphadmin import urls as graphadmin_urls
from ranking import urls as ranking_urls
from tests.conftest import ROOT


def test_every_dashboard_page_is_benchmarked():
    """A new dashboard route must be added to bench.run.PAGES (the one place its URL is built)."""
    pages = graphadmin_urls.page_urlpatterns + feedback_urls.page_urlpatterns + ranking_urls.page_urlpatterns
    names = {p.name for p in pages if p.name}
    assert names and names == set(PAGES) | ACTIONS
    assert all(get_resolver().reverse_dict.getlist(name) for name in names)


def test_bench_runs_at_tiny_scale():
    env = {**os.environ, "BENCH_DATABASE": "graphadmin_bench_ci", "LOG_LEVEL": "WARNING"}
    env.pop("DATABASE_NAME", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run",
            "--scale",
            "0.005",
            "--iterations",
            "2",
            "--rounds",
            "1",
            "--page-iterations",
            "1",
            "--no-write",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "| path | p50 | p95 | floor (p50) | ratio | target | met |" in out
    for path in (
        "rank 1 hop",
        "rank 2 hops",
        "hybrid search: recall@50",
        "context assembly",
        "use feedback",
        "outcome feedback",
        "decay, all edges",
        "rollback of a",
        "query embedding, one sentence",
        "import embedding, demo vault",
    ):
        assert path in out, path
    for name in PAGES:
        assert f"| dashboard: {name} (" in out, name
    assert "Machine: " in out and "PostgreSQL" in out
