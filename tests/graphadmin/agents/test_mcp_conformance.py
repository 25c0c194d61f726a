"""The MCP streamable HTTP endpoint against the protocol's own conformance suite.

``@modelcontextprotocol/conformance`` and the Node 22 it needs are npm packages pinned in
tools/mcp-conformance/ and installed into .local/node/ by ``make conformance-tools`` (which ``make test``
runs). The test starts ``manage.py mcp_server --http`` on a free loopback port, on the test database, and
runs every scenario that applies to a server with its own tools at every spec version the suite lists for
it, with a real DRF token: the suite has no option for a server that needs one, so
tools/mcp-conformance/bearer.mjs, preloaded into its Node, adds ``Authorization: Bearer`` to its requests
to that server and changes nothing else. Without the install the test is skipped, except under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
from django.db import connection

from graphadmin.accounts import create_token
from graphadmin.agents import mcp_server
from tests.conftest import ROOT, stop

NODE_DIR = ROOT / ".local" / "node"
NODE = NODE_DIR / "node_modules" / ".bin" / "node"
CLI = NODE_DIR / "node_modules" / ".bin" / "conformance"
PINNED = ROOT / "tools" / "mcp-conformance"
PRELOAD = PINNED / "bearer.mjs"

# The server scenarios that test what this server is: a streamable HTTP server with its own tools,
# no prompts, resources, completions or logging. The others (tools-call-*, prompts-*, resources-*,
# completion-complete, logging-set-level, elicitation-*, json-schema-2020-12, server-sse-polling,
# server-stateless, ...) call the suite's reference fixtures (tools named test_simple_text,
# test_missing_capability, ...), which only its own example server has (docs/agents.md).
APPLICABLE = (
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "caching",
    "http-header-validation",
    "dns-rebinding-protection",
)
PASSING = {"SUCCESS", "INFO", "SKIPPED"}  # a FAILURE or a WARNING fails the test
ALLOWED_HOST = "graph.example.com"  # a reverse proxy's public name, passed to the server by --allowed-hosts


@pytest.fixture
def conformance():
    """The installed suite; skipped (failed under CI=true) when it is missing or not the pinned one."""
    installed = NODE_DIR / "package-lock.json"
    if not (NODE.exists() and CLI.exists() and installed.exists()):
        reason = "the MCP conformance suite is not installed in .local/node/: run `make conformance-tools` (needs npm)"
    elif installed.read_text() != (PINNED / "package-lock.json").read_text():
        reason = "the MCP conformance suite in .local/node/ is not the pinned one: run `make conformance-tools`"
    else:
        return NODE, CLI
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_server(log: Path, *args: str):
    """``manage.py mcp_server --http`` on a free loopback port, on the test database; yields its URL."""
    port = _free_port()
    env = {**os.environ, "DATABASE_NAME": connection.settings_dict["NAME"]}
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    for name in ("GRAPHADMIN_TOKEN", "MCP_ALLOWED_HOSTS", "MCP_ALLOWED_ORIGINS"):
        env.pop(name, None)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "mcp_server", "--http", "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        break
                except OSError:
                    assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                    time.sleep(0.2)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop(proc)


def scenario_versions(node: Path, cli: Path) -> dict[str, list[str]]:
    """Each server scenario of the installed suite with the spec versions it applies to (``list --server``)."""
    listing = subprocess.run(
        [str(node), str(cli), "list", "--server"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    found = re.findall(r"^\s*-\s+(\S+)\s+\[([^\]]*)\]", listing, re.MULTILINE)
    return {name: re.findall(r"\d{4}-\d{2}-\d{2}", versions) for name, versions in found}


def run_scenario(node: Path, cli: Path, url: str, token: str, scenario: str, version: str, out: Path) -> list[dict]:
    """Run one scenario at one spec version; its checks (``checks.json``), the run's output on failure."""
    env = {**os.environ, "MCP_CONFORMANCE_BEARER": token, "MCP_CONFORMANCE_URL": url}
    proc = subprocess.run(
        [str(node), "--import", PRELOAD.as_uri(), str(cli), "server", "--url", url]
        + ["--scenario", scenario, "--spec-version", version, "--output-dir", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    files = list(out.glob("*/checks.json"))
    assert len(files) == 1, f"{scenario} at {version}: no results (exit {proc.returncode})\n{proc.stdout}{proc.stderr}"
    checks = json.loads(files[0].read_text())
    assert proc.returncode == 0 or any(c["status"] not in PASSING for c in checks), proc.stdout + proc.stderr
    return checks


@pytest.mark.django_db(transaction=True)
def test_the_http_endpoint_passes_the_conformance_suite(conformance, rita, tmp_path):
    node, cli = conformance
    token = create_token(rita)  # a reviewer of acme: every request acts as rita
    versions = scenario_versions(node, cli)
    missing = [name for name in APPLICABLE if not versions.get(name)]
    assert not missing, f"scenarios the pinned suite does not list (renamed?): {missing}"

    failures, ran = [], []
    with live_server(tmp_path / "mcp-http.log", "--allowed-hosts", ALLOWED_HOST) as url:
        for name in APPLICABLE:
            for version in versions[name]:
                checks = run_scenario(node, cli, url, token, name, version, tmp_path / f"{name}-{version}")
                ran.append((name, version, len(checks)))
                assert any(c["status"] == "SUCCESS" for c in checks), f"{name} at {version}: nothing checked"
                failures += [
                    f"{name} at {version}: {c['id']} {c['status']}: {c.get('errorMessage', c['description'])}"
                    for c in checks
                    if c["status"] not in PASSING
                ]
    assert not failures, "\n".join(failures)
    # every applicable scenario at each of its versions; the handshake ones at least at 2025-11-25
    assert {name for name, _, _ in ran} == set(APPLICABLE)
    assert ("server-session-lifecycle", "2025-11-25") in {(n, v) for n, v, _ in ran}
    assert ("http-header-validation", "2026-07-28") in {(n, v) for n, v, _ in ran}


def _initialize(url: str, token: str, **headers) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}", **headers}
    return httpx.post(url, json=body, headers=headers, timeout=10)


@pytest.mark.django_db(transaction=True)
def test_host_and_origin_are_checked_with_the_allowed_names(rita, tmp_path):
    token = create_token(rita)
    args = ("--allowed-hosts", ALLOWED_HOST, "--allowed-origins", f"https://{ALLOWED_HOST}")
    with live_server(tmp_path / "mcp-http.log", *args) as url:
        assert _initialize(url, token).status_code == 200  # Host: 127.0.0.1:PORT
        assert _initialize(url, token, Host=ALLOWED_HOST).status_code == 200  # what the proxy passes on
        assert _initialize(url, token, Host=f"{ALLOWED_HOST}:8443").status_code == 200
        assert _initialize(url, token, Host="evil.example.com").status_code == 421
        allowed = _initialize(url, token, Host=ALLOWED_HOST, Origin=f"https://{ALLOWED_HOST}")
        assert allowed.status_code == 200
        assert _initialize(url, token, Origin="http://evil.example.com").status_code == 403
        assert _initialize(url, "nope", Host=ALLOWED_HOST).status_code == 401  # and still the token


def test_rebinding_protection_holds_on_a_wildcard_bind():
    # The SDK leaves the check off for a server bound to 0.0.0.0; ours keeps it with the loopback names.
    security = mcp_server.transport_security("0.0.0.0", 8765)
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    assert security.allowed_origins == ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    lan = mcp_server.transport_security("10.1.2.3", 9000, ["graph.example.com:8443"], ["https://graph.example.com/"])
    assert lan.allowed_hosts[-2:] == ["10.1.2.3:9000", "graph.example.com:8443"]
    assert lan.allowed_origins[-2:] == ["http://10.1.2.3:9000", "https://graph.example.com"]


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--allowed-hosts", "https://graph.example.com", "allowed host 'https://graph.example.com'"),
        ("--allowed-hosts", "*", "allowed host '*'"),
        ("--allowed-origins", "graph.example.com", "allowed origin 'graph.example.com'"),
    ],
)
def test_a_malformed_allowed_name_stops_the_server_with_its_name(db, option, value, message):
    env = {**os.environ, "DATABASE_NAME": connection.settings_dict["NAME"]}
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    proc = subprocess.run(
        [sys.executable, "manage.py", "mcp_server", "--http", "--port", str(_free_port()), option, value],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert message in proc.stderr


def test_every_tool_declares_its_hints_and_when_to_use_it():
    async def tools():
        return await mcp_server.build_server(http=True).list_tools()

    by_name = {tool.name: tool for tool in anyio.run(tools)}
    assert set(by_name) == {
        "graph_search",
        "graph_context",
        "graph_record_use",
        "graph_improve",
        "graph_explain",
        "graph_remember",
        "graph_link",
        "graph_forget",
    }
    hints = {
        name: (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
        for name, a in ((name, tool.annotations) for name, tool in by_name.items())
    }
    assert hints == {
        "graph_search": (True, False, True, False),
        "graph_explain": (True, False, True, False),
        "graph_context": (False, False, False, False),  # logs a new injection on every call
        "graph_record_use": (False, False, True, False),  # a repeat moves nothing more
        "graph_improve": (False, False, True, False),  # the same outcome again is `duplicate`
        "graph_remember": (False, False, False, False),  # adds a note (with a key: a repeat is `unchanged`)
        "graph_link": (False, False, True, False),  # the same link again `exists`
        "graph_forget": (False, True, True, False),  # archives (gone from retrieval; a rollback restores)
    }
    for tool in by_name.values():
        assert tool.title and tool.description.startswith("Use it "), tool.name
