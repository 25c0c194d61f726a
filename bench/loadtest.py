"""Load test of a running service: simulated agents over HTTP, and the feedback lag they see.

Two measurements, both against a server on this machine (loopback addresses only; every loop is
bounded in count and in time and stops by itself):

    # N concurrent agents, each running sessions of context (question only) -> use report -> outcome
    .venv/bin/python -m bench.loadtest agents --url http://127.0.0.1:8000 --agents 1,4,16,64 --seconds 20
    # feedback throughput: use reports posted at a fixed rate, 202 -> applied time of each
    .venv/bin/python -m bench.loadtest feedback --url http://127.0.0.1:8000 --rate 100 --seconds 20

``make loadtest`` runs the first against ``make run`` and writes its table and plot into
docs/performance.md ("Load test" section).

Feedback lag is the time from the client receiving the 202 of a report to the report's update batch
being committed and visible to a reader: a probe thread polls ``feedback_updatebatch`` every 20 ms
for the idempotency keys the 202s returned (one indexed query per poll, on its own connection), and
the first poll that sees a key stamps it. The probe reads the database directly, so the load test
runs on the service's machine with the service's environment (``DATABASE_URL`` or the embedded
server). Before it starts, the load test waits for ``/readyz`` (database, migrations, broker and a
worker's heartbeat), so a missing worker is an error, not a lag.
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import os
import random
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "demo" / "questions.json"
PERF_DOC = ROOT / "docs" / "performance.md"
PLOT = ROOT / "docs" / "loadtest.png"
SECTION_START = "<!-- loadtest:start -->"
SECTION_END = "<!-- loadtest:end -->"
# Hard limits, whatever the arguments: a run never outlives them.
MAX_SECONDS_PER_STEP = 120
MAX_AGENTS = 64
MAX_RATE = 500
LAG_TIMEOUT = 30.0


def loopback_only(url: str) -> tuple[str, int]:
    """(host, port) of ``url``; refuses anything but a loopback address (this is a load generator)."""
    parsed = urlparse(url)
    if parsed.scheme != "http" or not parsed.hostname:
        raise SystemExit(f"--url must be http://HOST:PORT on this machine, not '{url}'")
    host = parsed.hostname
    addresses = {info[4][0] for info in socket.getaddrinfo(host, parsed.port or 80, proto=socket.IPPROTO_TCP)}
    if not addresses or not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        raise SystemExit(f"--url must be a loopback address (127.0.0.0/8, ::1), not {host} ({sorted(addresses)})")
    return host, parsed.port or 80


class Http:
    """One keep-alive HTTP/1.1 connection with a token (stdlib: the client must cost the shared cores little)."""

    def __init__(self, host: str, port: int, token: str = "", timeout: float = 30.0):
        self.host, self.port, self.timeout = host, port, timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Token {token}"
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body=None) -> tuple[int, object, float]:
        """(status, decoded JSON or None, milliseconds). Status 0: the connection failed."""
        data = json.dumps(body).encode() if body is not None else None
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            started = time.perf_counter()
            try:
                self.conn.request(method, path, body=data, headers=self.headers)
                response = self.conn.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException):
                self.close()
                if attempt == 2:
                    return 0, None, (time.perf_counter() - started) * 1000
                continue  # a keep-alive connection the server closed: once more on a new one
            elapsed = (time.perf_counter() - started) * 1000
            if response.getheader("Connection", "").lower() == "close":
                self.close()
            try:
                payload = json.loads(raw) if raw else None
            except ValueError:
                payload = None
            return response.status, payload, elapsed
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def cpu_by_process() -> dict[tuple[str, str, str], float]:
    """CPU seconds (user + system) used so far by each of this checkout's processes, keyed by (role, pid,
    start time): web (gunicorn), worker (celery worker), db (the embedded PostgreSQL's processes). Read from
    /proc; empty elsewhere.

    CPU per session is what a 2-core budget is spent on whatever else runs on the machine: the load test
    reports it next to the wall-clock figures, which a busy shared machine inflates. Counted per process
    (``cpu_spent``), not as role totals: a database backend that exits during the run (a persistent
    connection's idle timeout) would otherwise take everything it used before the run out of the total."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    postmaster = None
    pid_file = ROOT / ".local" / "pgdata" / "postmaster.pid"
    if pid_file.exists():
        postmaster = pid_file.read_text().split("\n", 1)[0].strip()
    found = {}
    proc = Path("/proc")
    if not proc.exists():
        return {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            ppid, cpu, started = fields[1], (int(fields[11]) + int(fields[12])) / tick, fields[19]
            if postmaster and (entry.name == postmaster or ppid == postmaster):
                found["db", entry.name, started] = cpu
                continue
            if os.readlink(entry / "cwd") != str(ROOT):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if "gunicorn" in cmd:
            found["web", entry.name, started] = cpu
        elif "celery" in cmd and " worker" in cmd:
            found["worker", entry.name, started] = cpu
    return found


def cpu_spent(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds per role between two ``cpu_by_process`` readings: each process's growth (a process started
    meanwhile counts whole). A process that exited meanwhile is not counted: what it used during the run is
    lost (an undercount, never the negative total the role sums gave)."""
    spent = {"web": 0.0, "worker": 0.0, "db": 0.0}
    for key, cpu in after.items():
        spent[key[0]] += cpu - before.get(key, 0.0)
    return spent


def percentile(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered))) - 1))]


# ------------------------------------------------------------------------------------------------
# The service's side: token, graph, readiness, and the lag probe (reads the database)


def setup_django() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")
    os.environ.setdefault("DEBUG", "1")  # the harness's own process: no SECRET_KEY needed to read settings
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def agent_token(org: str, user: str) -> str:
    """The load-test agent's token (role agent in ``org``: it owns its sessions), through ``manage.py agent_token``."""
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("agent_token", org=org, user=user, role="agent", stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def wait_ready(host: str, port: int, timeout: float = 60.0) -> dict:
    """Wait until ``/readyz`` answers 200; raise SystemExit with its last answer otherwise."""
    client = Http(host, port, timeout=5)
    deadline = time.monotonic() + timeout
    status, body = 0, None
    while time.monotonic() < deadline:
        status, body, _ = client.request("GET", "/readyz")
        if status == 200:
            client.close()
            return body or {}
        time.sleep(0.5)
    client.close()
    raise SystemExit(f"The service is not ready (GET /readyz answered {status}: {body})")


def find_graph(client: Http, org: str, slug: str) -> int:
    status, body, _ = client.request("GET", "/api/graphs/?limit=1000")
    if status != 200:
        raise SystemExit(f"GET /api/graphs/ answered {status}: {body}")
    rows = body["results"] if isinstance(body, dict) else body
    for g in rows:
        if g.get("slug") == slug and g.get("organization") == org:
            return g["id"]
    raise SystemExit(f"No graph '{slug}' visible to the load-test agent (is this `make run`'s demo?)")


class LagProbe(threading.Thread):
    """Stamps each idempotency key when its update batch is first seen committed (polls every ``interval``)."""

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True, name="lag-probe")
        self.interval = interval
        self.lock = threading.Lock()
        self.sent: dict[str, float] = {}  # key -> wall time of the 202
        self.seen: dict[str, float] = {}  # key -> wall time of the first poll that saw its batch
        self.stopping = threading.Event()

    def add(self, key: str, at: float) -> None:
        with self.lock:
            self.sent[key] = at

    def pending(self) -> list[str]:
        with self.lock:
            return [k for k in self.sent if k not in self.seen]

    def run(self):
        import psycopg
        from django.conf import settings

        from graphadmin.runtime.embedded_db import ensure_database

        db = ensure_database(settings.DATABASES["default"])
        params = {
            "host": db.get("HOST") or None,
            "port": db.get("PORT") or None,
            "user": db.get("USER") or None,
            "password": db.get("PASSWORD") or None,
            "dbname": db["NAME"],
            "autocommit": True,
        }
        with psycopg.connect(**{k: v for k, v in params.items() if v is not None}) as conn:
            while not self.stopping.is_set():
                keys = self.pending()
                if keys:
                    rows = conn.execute(
                        "SELECT idempotency_key FROM feedback_updatebatch WHERE idempotency_key = ANY(%s)", [keys]
                    ).fetchall()
                    now = time.time()
                    with self.lock:
                        for (key,) in rows:
                            self.seen.setdefault(key, now)
                time.sleep(self.interval)

    def drain(self, timeout: float = LAG_TIMEOUT) -> None:
        """Wait (at most ``timeout``) until every sent key was seen, then stop polling."""
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stopping.set()
        self.join(timeout=5)

    def lags_ms(self) -> tuple[list[float], int]:
        """(lags in ms of the keys seen, count of keys never seen)."""
        with self.lock:
            lags = [(self.seen[k] - t) * 1000 for k, t in self.sent.items() if k in self.seen]
            return lags, len(self.sent) - len(lags)


# ------------------------------------------------------------------------------------------------
# Agents


def load_questions() -> list[str]:
    return [q["q"] for q in json.loads(QUESTIONS.read_text())["questions"]]


@dataclass
class StepResult:
    agents: int
    seconds: float = 0.0
    sessions: int = 0
    errors: int = 0
    # Context calls the service refused as busy (503 with Retry-After: it waited past WEB_QUEUE_BUDGET_MS for a
    # thread); the agent waits as told and starts a new session. Not errors: the service said so in time.
    shed: int = 0
    error_samples: list = field(default_factory=list)
    context_ms: list = field(default_factory=list)
    lag_ms: list = field(default_factory=list)
    lag_missing: int = 0
    cpu_ms_per_session: dict = field(default_factory=dict)

    def row(self) -> dict:
        def r(v):
            return None if v is None else round(v, 1)

        return {
            "agents": self.agents,
            "sessions": self.sessions,
            "seconds": round(self.seconds, 1),
            "sessions_per_s": round(self.sessions / self.seconds, 2) if self.seconds else 0.0,
            "context_p50": r(percentile(self.context_ms, 50)),
            "context_p95": r(percentile(self.context_ms, 95)),
            "context_p99": r(percentile(self.context_ms, 99)),
            "errors": self.errors,
            "shed": self.shed,
            "lag_n": len(self.lag_ms),
            "lag_p50": r(percentile(self.lag_ms, 50)),
            "lag_p95": r(percentile(self.lag_ms, 95)),
            "lag_missing": self.lag_missing,
            "cpu_ms_per_session": self.cpu_ms_per_session,
            "error_samples": self.error_samples[:5],
        }


def agent_loop(client: Http, graph_id: int, questions, probe: LagProbe, result: StepResult, lock, stop_at, budget, rng):
    """One agent: sessions of context -> uses -> outcome until the step's time or session budget runs out."""
    base = f"/api/graphs/{graph_id}/sessions"
    while time.monotonic() < stop_at:
        with lock:
            if budget[0] <= 0:
                return
            budget[0] -= 1
        session = f"load-{uuid.uuid4().hex[:12]}"
        status, body, ms = client.request(
            "POST",
            f"/api/graphs/{graph_id}/context/",
            {"session": session, "query": rng.choice(questions), "budget": 5},
        )
        if status == 503 and isinstance(body, dict) and "retry_after" in body:
            with lock:
                result.shed += 1
            time.sleep(body["retry_after"])
            continue
        ok = status in (200, 201) and isinstance(body, dict)
        calls = []
        if ok:
            nodes = list(dict.fromkeys(item["node"] for item in body.get("items", [])))
            used = [{"node": n, "signal": "explicit"} for n in nodes[:2]]
            if len(nodes) > 2 and rng.random() < 0.3:
                used.append({"node": nodes[-1], "signal": "negative"})
            if used:
                calls.append(("uses", {"items": used}))
            calls.append(("outcome", {"outcome": rng.choice(["accepted", "accepted", "rework", "rejected"])}))
        failures = [] if ok else [("context", status, body)]
        stamps = []
        for name, payload in calls:
            st, answer, _ = _report(client, f"{base}/{session}/{name}/", payload)
            if st == 202 and isinstance(answer, dict) and answer.get("idempotency_key"):
                stamps.append(answer["idempotency_key"])
                probe.add(answer["idempotency_key"], time.time())
            else:
                failures.append((name, st, answer))
        with lock:
            if ok:
                result.context_ms.append(ms)
            if failures:
                result.errors += len(failures)
                result.error_samples.extend(str(f)[:300] for f in failures)
            else:
                result.sessions += 1


def _report(client: Http, path: str, payload: dict, attempts: int = 5):
    """A report sent as an agent sends it: again after the Retry-After of a busy 503 (it was not accepted)."""
    for _ in range(attempts - 1):
        status, answer, ms = client.request("POST", path, payload)
        if not (status == 503 and isinstance(answer, dict) and "retry_after" in answer):
            return status, answer, ms
        time.sleep(answer["retry_after"])
    return client.request("POST", path, payload)


def run_agents(host, port, token, graph_id, n, seconds, max_sessions, seed=0) -> StepResult:
    """``n`` agents for ``seconds`` (at most ``max_sessions`` sessions in all); then the lag of their reports."""
    questions = load_questions()
    result = StepResult(agents=n)
    probe = LagProbe()
    probe.start()
    lock = threading.Lock()
    budget = [max_sessions]
    started = time.monotonic()
    stop_at = started + min(seconds, MAX_SECONDS_PER_STEP)
    clients = [Http(host, port, token) for _ in range(n)]
    threads = [
        threading.Thread(
            target=agent_loop,
            args=(
                clients[i],
                graph_id,
                questions,
                probe,
                result,
                lock,
                stop_at,
                budget,
                random.Random(seed * 1000 + i),
            ),
            daemon=True,
        )
        for i in range(n)
    ]
    cpu_before = cpu_by_process()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=MAX_SECONDS_PER_STEP + 60)
    result.seconds = time.monotonic() - started
    for c in clients:
        c.close()
    probe.drain()
    spent = cpu_spent(cpu_before, cpu_by_process())
    result.cpu_ms_per_session = {k: _cpu_ms(v, result.sessions) for k, v in spent.items()}
    result.lag_ms, result.lag_missing = probe.lags_ms()
    return result


# ------------------------------------------------------------------------------------------------
# Feedback throughput: use reports at a fixed rate


def run_feedback(host, port, token, graph_id, rate, seconds, senders=8, seed=0) -> dict:
    """Post use reports at ``rate`` per second for ``seconds``: each a first report of one context item.

    Sessions are made first (one context each, budget 10, question only); each report then uses one
    item of one session not reported yet, so every report is a real reinforcement batch. Reports
    are sent on a fixed schedule (open loop) by ``senders`` threads, whatever the server's pace.
    """
    rate = min(rate, MAX_RATE)
    seconds = min(seconds, MAX_SECONDS_PER_STEP)
    total = int(rate * seconds)
    rng = random.Random(seed)
    questions = load_questions()
    # Sessions: ten items each, so total/10 contexts (made by a few threads in parallel).
    work: list[tuple[str, int]] = []
    work_lock = threading.Lock()
    need_sessions = max(1, total // 10 + 1)

    def make_sessions(count, wrng):
        client = Http(host, port, token)
        for _ in range(count):
            session = f"lag-{uuid.uuid4().hex[:12]}"
            status, body, _ = client.request(
                "POST",
                f"/api/graphs/{graph_id}/context/",
                {"session": session, "query": wrng.choice(questions), "budget": 10},
            )
            if status in (200, 201):
                nodes = dict.fromkeys(item["node"] for item in body.get("items", []))
                with work_lock:
                    work.extend((session, node) for node in nodes)
        client.close()

    makers = [
        threading.Thread(target=make_sessions, args=(need_sessions // 4 + 1, random.Random(seed + i)), daemon=True)
        for i in range(4)
    ]
    prep_started = time.monotonic()
    for t in makers:
        t.start()
    for t in makers:
        t.join(timeout=MAX_SECONDS_PER_STEP * 3)
    prep_seconds = time.monotonic() - prep_started
    rng.shuffle(work)
    work = work[:total]
    if len(work) < total:
        raise SystemExit(f"Only {len(work)} session items for {total} reports")

    probe = LagProbe()
    probe.start()
    errors: list = []
    post_ms: list[float] = []
    start = time.monotonic() + 0.5
    cursor = [0]
    cursor_lock = threading.Lock()

    def sender():
        client = Http(host, port, token)
        while True:
            with cursor_lock:
                i = cursor[0]
                if i >= total:
                    break
                cursor[0] += 1
            due = start + i / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            session, node = work[i]
            path = f"/api/graphs/{graph_id}/sessions/{session}/uses/"
            status, body, ms = _report(client, path, {"items": [{"node": node, "signal": "explicit"}]})
            if status == 202 and isinstance(body, dict) and body.get("idempotency_key"):
                probe.add(body["idempotency_key"], time.time())
                post_ms.append(ms)
            else:
                errors.append((status, str(body)[:200]))
        client.close()

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    cpu_before = cpu_by_process()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds * 3 + 60)
    sent_seconds = time.monotonic() - start
    probe.drain()
    cpu_ms = {k: _cpu_ms(v, total) for k, v in cpu_spent(cpu_before, cpu_by_process()).items()}
    applied_at = sorted(probe.seen.values())
    lags, missing = probe.lags_ms()
    span = (applied_at[-1] - applied_at[0]) if len(applied_at) > 1 else 0.0
    return {
        "rate_asked": rate,
        "reports": total,
        "sent_seconds": round(sent_seconds, 2),
        "sent_per_s": round(total / sent_seconds, 1) if sent_seconds else 0,
        "applied": len(lags),
        "never_applied": missing,
        "applied_per_s": round(len(lags) / span, 1) if span else None,
        "errors": len(errors),
        "error_samples": errors[:5],
        "post_p50_ms": _r(percentile(post_ms, 50)),
        "post_p95_ms": _r(percentile(post_ms, 95)),
        "lag_p50_ms": _r(percentile(lags, 50)),
        "lag_p95_ms": _r(percentile(lags, 95)),
        "lag_p99_ms": _r(percentile(lags, 99)),
        "lag_max_ms": _r(max(lags) if lags else None),
        "session_prep_seconds": round(prep_seconds, 1),
        "cpu_ms_per_report": cpu_ms,
        "load_average": round(os.getloadavg()[0], 1),
    }


def _r(v):
    return None if v is None else round(v, 1)


def _cpu_ms(seconds: float, reports: int):
    return round(seconds * 1000 / reports, 2) if seconds >= 0 and reports else None


# ------------------------------------------------------------------------------------------------
# Report: the table and plot in docs/performance.md


def table(rows: list[dict]) -> str:
    lines = [
        "| agents | sessions | sessions/s | context p50 ms | p95 ms | p99 ms | busy 503 | errors | feedback lag p50 ms "
        "| p95 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['agents']} | {r['sessions']} | {r['sessions_per_s']} | {r['context_p50']} | {r['context_p95']} "
            f"| {r['context_p99']} | {r.get('shed', 0)} | {r['errors']} | {r['lag_p50']} | {r['lag_p95']} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    n = [r["agents"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for key, label in (("context_p50", "context p50"), ("context_p95", "context p95"), ("context_p99", "p99")):
        left.plot(n, [r[key] or 0 for r in rows], marker="o", label=label)
    left.axhline(100, color="grey", linestyle=":", label="p95 target")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("concurrent agents")
    left.set_ylabel("ms (log scale)")
    left.set_title("context latency")
    left.legend(fontsize=8)
    right.plot(n, [r["sessions_per_s"] for r in rows], marker="o", color="tab:green", label="sessions/s")
    right.set_xscale("log", base=2)
    right.set_xlabel("concurrent agents")
    right.set_ylabel("sessions/s")
    twin = right.twinx()
    twin.plot(n, [(r["lag_p95"] or 0) / 1000 for r in rows], marker="s", color="tab:red", label="lag p95 (s)")
    twin.axhline(2, color="grey", linestyle=":")
    twin.set_ylabel("feedback lag p95, s (target 2 s: dotted)")
    right.set_title("throughput and feedback lag")
    right.legend(loc="upper left", fontsize=8)
    twin.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_section(body: str, path: Path = PERF_DOC) -> None:
    """Replace the text between the load-test markers of docs/performance.md (appended the first time)."""
    text = path.read_text()
    block = f"{SECTION_START}\n{body.strip()}\n{SECTION_END}"
    if SECTION_START in text and SECTION_END in text:
        head, rest = text.split(SECTION_START, 1)
        _, tail = rest.split(SECTION_END, 1)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    for name in ("agents", "feedback"):
        p = sub.add_parser(name)
        p.add_argument("--url", default="http://" + os.environ.get("RUN_ADDR", "127.0.0.1:8000"))
        p.add_argument("--org", default="demo")
        p.add_argument("--graph", default="demo", help="The graph's slug (default: make run's demo graph).")
        p.add_argument("--user", default="loadtest-agent")
        p.add_argument("--seconds", type=float, default=20.0)
        p.add_argument("--json", default="", help="Also write the results to this file.")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--skip-ready", action="store_true", help="Do not wait for /readyz first.")
    a = sub.choices["agents"]
    a.add_argument("--agents", default="1,4,16,64", help="Comma-separated N (at most 64).")
    a.add_argument("--max-sessions", type=int, default=2000, help="Sessions per step, at most.")
    a.add_argument("--write", action="store_true", help="Write the table and plot into docs/performance.md.")
    f = sub.choices["feedback"]
    f.add_argument("--rate", type=float, default=100.0, help="Use reports per second (at most 500).")
    f.add_argument("--senders", type=int, default=8)
    args = parser.parse_args(argv)

    host, port = loopback_only(args.url)
    setup_django()
    ready = {} if args.skip_ready else wait_ready(host, port)
    token = agent_token(args.org, args.user)
    client = Http(host, port, token)
    graph_id = find_graph(client, args.org, args.graph)
    client.close()
    print(f"ready: {ready}; graph {graph_id}", flush=True)

    if args.mode == "feedback":
        out = run_feedback(host, port, token, graph_id, args.rate, args.seconds, senders=args.senders, seed=args.seed)
        print(json.dumps(out, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))
        return 0 if not out["errors"] and not out["never_applied"] else 1

    counts = [int(x) for x in args.agents.split(",") if x.strip()]
    if any(c < 1 or c > MAX_AGENTS for c in counts):
        raise SystemExit(f"--agents: each N in 1..{MAX_AGENTS}")
    rows = []
    for n in counts:
        step = run_agents(host, port, token, graph_id, n, args.seconds, args.max_sessions, seed=args.seed)
        rows.append(step.row())
        print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if args.write:
        plotted = plot(rows, PLOT)
        write_section(render_section(rows, args, plotted))
    return 0 if all(r["errors"] == 0 and r["lag_missing"] == 0 for r in rows) else 1


def render_section(rows, args, plotted) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime())
    load = os.getloadavg()[0]
    parts = [
        "## Load test",
        "",
        f"`make loadtest` ({when}, {os.cpu_count()} cores, load average {load:.1f} at the end): "
        f"`python -m bench.loadtest agents --agents {args.agents} --seconds {args.seconds:g}` against `make run`. "
        "Each agent runs sessions back to back: context with the question only (budget 5), a use report "
        "(two items explicit, sometimes one negative), an outcome. Feedback lag: from the 202 to the "
        "batch committed (bench/loadtest.py).",
        "",
        table(rows),
    ]
    cpu = [r for r in rows if r.get("cpu_ms_per_session")]
    if cpu:
        parts += [
            "",
            "CPU per session (context, use report, outcome), by process: "
            + "; ".join(
                f"N={r['agents']}: "
                + ", ".join(f"{k} {v} ms" for k, v in r["cpu_ms_per_session"].items() if v is not None)
                for r in cpu
            )
            + ".",
        ]
    if plotted:
        parts += ["", f"![load test]({PLOT.name})"]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
