"""Schema-driven fuzzing of the running `make run` as an agent and as an operator (issue 41, item 4).

    make fuzz                                   # both roles, FUZZ_EXAMPLES generated cases per operation
    .venv/bin/python -m bench.fuzz --roles agent --max-examples 50 --phases examples,fuzzing,stateful

For each role, a service user of that role in the demo organization (``manage.py agent_token``), the
OpenAPI schema the server publishes, and ``schemathesis run`` against it (loopback only) with the checks
``not_a_server_error`` (no 5xx), ``response_schema_conformance`` and ``status_code_conformance`` (no
answer outside the schema) and ``ignored_auth``; the stateful phase follows the schema's links where it
has them. Prints, per role, the cases generated, the operations and the failures found, and one JSON line
last; exits 1 when a run found any.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.loadtest import ROOT, Http, agent_token, loopback_only, setup_django, wait_ready

CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance,ignored_auth"


def token_for(org: str, role: str) -> str:
    """A token of the service user ``fuzz-<role>`` with ``role`` in ``org`` (``manage.py agent_token``)."""
    import io

    from django.core.management import call_command

    if role == "agent":
        return agent_token(org, "fuzz-agent")
    out = io.StringIO()
    call_command("agent_token", org=org, user=f"fuzz-{role}", role=role, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def fuzz(url: str, token: str, role: str, args, folder: Path) -> dict:
    host, port = loopback_only(url)
    client = Http(host, port, token)
    status, schema, _ = client.request("GET", "/api/schema/?format=json")
    client.close()
    if status != 200:
        raise SystemExit(f"GET /api/schema/ answered {status}")
    path = folder / f"schema-{role}.json"
    path.write_text(json.dumps(schema))
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "run",
            str(path),
            "--url",
            url,
            "--checks",
            CHECKS,
            "--header",
            f"Authorization: Token {token}",
            "--phases",
            args.phases,
            "--max-examples",
            str(args.max_examples),
            "--seed",
            str(args.seed),
            "--workers",
            str(args.workers),
            "--request-timeout",
            "30",
            "--generation-database",
            "none",
            "--continue-on-failure",
            "--no-color",
            "--report",
            "ndjson",
            "--report-ndjson-path",
            str(folder / f"events-{role}.ndjson"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=folder,
    )
    try:
        stdout, stderr = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:  # the run's bound: stop it, keep what it printed
        proc.kill()
        stdout, stderr = proc.communicate()
        stderr += f"\nstopped after --timeout {args.timeout} s"
    run = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    out = run.stdout
    summary = out[out.rfind("Tested") - 3000 :] if "Tested" in out else out[-4000:]
    (folder / f"schemathesis-{role}.txt").write_text(out + run.stderr)
    cases = _count(folder / f"events-{role}.ndjson")
    failures = re.search(r"(\d+) failures?", summary) if "failure" in summary else None
    return {
        "role": role,
        "returncode": run.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "operations": int(m.group(1)) if (m := re.search(r"Tested: (\d+)", out)) else None,
        "cases": cases,
        "failures": int(failures.group(1)) if failures else (0 if run.returncode == 0 else None),
        "summary": summary[-1500:],
    }


def _count(events: Path) -> int | None:
    """Test cases generated (scenario events in schemathesis' ndjson report), None if unreadable."""
    if not events.exists():
        return None
    n = 0
    for line in events.read_text().splitlines():
        if '"ScenarioFinished"' in line or '"scenario_finished"' in line.lower():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            body = next(iter(event.values())) if len(event) == 1 else event
            n += len(body.get("recorder", {}).get("cases", {})) if isinstance(body, dict) else 0
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--org", default="demo")
    p.add_argument("--roles", default="agent,operator")
    p.add_argument("--max-examples", type=int, default=100)
    p.add_argument("--phases", default="examples,coverage,fuzzing,stateful")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=int, default=3600, help="Seconds per role, at most.")
    args = p.parse_args(argv)
    loopback_only(args.url)
    setup_django()
    host, port = loopback_only(args.url)
    wait_ready(host, port)
    results = []
    folder = ROOT / ".local" / "fuzz"  # each role's schemathesis output and events, kept for reading the failures
    folder.mkdir(parents=True, exist_ok=True)
    for role in [r for r in args.roles.split(",") if r]:
        result = fuzz(args.url.rstrip("/"), token_for(args.org, role), role, args, folder)
        print(
            f"\n== {role}: {result['cases']} cases, {result['operations']} operations, "
            f"{result['failures']} failures, {result['seconds']} s\n{result['summary']}"
        )
        results.append({k: v for k, v in result.items() if k != "summary"})
    print(json.dumps({"runs": results}))
    return 0 if all(r["returncode"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
