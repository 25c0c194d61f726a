"""manage.py rundemo: migrate, load the demo graph, then run the web server, Celery worker and beat.

It migrates and loads the demo as the tables' owner; the processes it starts connect as the application's
database role (``child_env``), which may read and write rows but not change the schema or the ledgers.

This is what ``make run`` calls: gunicorn (``graphadmin/gunicorn_conf.py``), a Celery worker on every
named queue, Celery beat, and the MCP server's streamable HTTP endpoint (on uvicorn). Ctrl-C or
SIGTERM stops them all gracefully. When one of them dies (a crash, an OOM kill, a ``kill -9``) the
others keep serving and the ``Supervisor`` starts it again, logged, after a backoff that doubles
with each quick death (1 s up to 60 s) and starts over once the child has lived a minute.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from feedback.harness.demo import ensure_demo, fill_demo_history
from graphadmin.embeddings import configured_model
from graphadmin.runtime import checks

# gunicorn's graceful_timeout (30 s by default) plus a margin: then whatever still runs is killed.
STOP_TIMEOUT = 35.0
RESTART_BACKOFF_S = 1.0  # the first restart's delay; doubled for each death within STABLE_AFTER_S
RESTART_BACKOFF_MAX_S = 60.0
STABLE_AFTER_S = 60.0  # a child that lived this long restarts after RESTART_BACKOFF_S again

log = logging.getLogger("graphadmin.rundemo")


class Supervisor:
    """Start named child processes and keep them running: a child that exits is started again after a
    backoff (logged with its exit code), while the others keep running; ``stop`` ends them all gracefully."""

    def __init__(self, commands: dict[str, list[str]], *, cwd, env, out=None):
        self.commands, self.cwd, self.env, self.out = commands, cwd, env, out
        self.procs: dict[str, subprocess.Popen] = {}
        self.started_at: dict[str, float] = {}
        self.failures: dict[str, int] = dict.fromkeys(commands, 0)
        self.restart_at: dict[str, float] = {}
        self.restarts: dict[str, int] = dict.fromkeys(commands, 0)

    def start(self, name: str) -> None:
        # Each child in its own session: a Ctrl-C in the terminal reaches the supervisor alone, which then
        # stops every child with SIGTERM, the graceful stop of each (gunicorn finishes the requests it has,
        # the worker its tasks) instead of their faster SIGINT stop.
        self.procs[name] = subprocess.Popen(self.commands[name], cwd=self.cwd, env=self.env, start_new_session=True)
        self.started_at[name] = time.monotonic()

    def start_all(self) -> None:
        for name in self.commands:
            self.start(name)

    def _say(self, message: str) -> None:
        log.warning(message)
        if self.out is not None:
            self.out.write(message)

    def tick(self) -> None:
        """Notice children that exited and schedule their restart; restart those whose backoff is over."""
        now = time.monotonic()
        for name, proc in self.procs.items():
            code = proc.poll()
            if code is None or name in self.restart_at:
                continue
            lived = now - self.started_at[name]
            self.failures[name] = 1 if lived >= STABLE_AFTER_S else self.failures[name] + 1
            delay = min(RESTART_BACKOFF_MAX_S, RESTART_BACKOFF_S * 2 ** (self.failures[name] - 1))
            self.restart_at[name] = now + delay
            self._say(
                f"{name} (pid {proc.pid}) exited with code {code} after {lived:.1f} s; restarting in {delay:.1f} s."
            )
        for name, when in list(self.restart_at.items()):
            if now >= when:
                del self.restart_at[name]
                self.restarts[name] += 1
                self.start(name)
                self._say(f"{name} restarted (pid {self.procs[name].pid}, restart {self.restarts[name]}).")

    def run(self, interval: float = 0.5) -> None:
        """Supervise until interrupted (KeyboardInterrupt: Ctrl-C or SIGTERM through ``_interrupt``)."""
        while True:
            self.tick()
            time.sleep(interval)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM to every child still running, then SIGKILL to those still running after ``timeout``."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def child_env(environ=None) -> dict[str, str]:
    """The environment of the processes ``make run`` starts: the application's database role, never the owner's.

    Migrations ran in this process as the tables' owner; the web server, worker, beat and MCP server
    connect as the application role (docs/security.md "Database roles"): with the embedded server
    ``DATABASE_ROLE=app``; with an external one ``DATABASE_URL`` (the owner's ``DATABASE_MIGRATE_URL`` is
    not passed on). Persistent database connections unless set: a new connection per request and per
    task cost the web server and the worker a connection set-up each time.
    """
    env = dict(os.environ if environ is None else environ)
    env.pop("DATABASE_MIGRATE_URL", None)
    if not env.get("DATABASE_URL"):
        env["DATABASE_ROLE"] = "app"
    env.setdefault("CONN_MAX_AGE", "60")
    return env


def children(addr: str, mcp_addr: str) -> dict[str, list[str]]:
    """The command line of each process ``make run`` starts, by name."""
    python = sys.executable
    procs = {
        # gthread workers sized to the cores (graphadmin/gunicorn_conf.py); static files by WhiteNoise.
        "web": [python, "-m", "gunicorn", "-c", "python:graphadmin.gunicorn_conf", "--bind", addr],
        "worker": [
            python,
            "-m",
            "celery",
            "-A",
            "graphadmin",
            "worker",
            "--loglevel=INFO",
            f"--concurrency={settings.CELERY_WORKER_CONCURRENCY}",
            "-Q",
            ",".join(settings.WORKER_QUEUES),
        ],
        "beat": [
            python,
            "-m",
            "celery",
            "-A",
            "graphadmin",
            "beat",
            "--loglevel=INFO",
            f"--schedule={settings.CELERY_BEAT_SCHEDULE_FILENAME}",
        ],
    }
    if mcp_addr:
        host, _, port = mcp_addr.rpartition(":")
        procs["mcp"] = [python, "manage.py", "mcp_server", "--http", "--host", host.strip("[]"), "--port", port]
    return procs


class Command(BaseCommand):
    help = "Migrate, load the demo graph, and run the web server with a Celery worker, beat and the MCP server."

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr", default=os.environ.get("RUN_ADDR", "127.0.0.1:8000"), help="host:port of the web server."
        )
        parser.add_argument(
            "--mcp-addr",
            default=os.environ.get("MCP_ADDR", "127.0.0.1:8765"),
            help="host:port of the MCP streamable HTTP server (empty: not started).",
        )

    def handle(self, *args, addr, mcp_addr, **options):
        for name, value in (("--addr", addr), ("--mcp-addr", mcp_addr)):
            if value and not value.rpartition(":")[2].isdigit():
                raise CommandError(f"{name} must be host:port, not {value!r}")
        # As the tables' owner (graphadmin's migrate command picks its connection); the children serve as the
        # application role, which may not run DDL.
        call_command("migrate", interactive=False, verbosity=1, database=settings.MIGRATE_DATABASE)
        graph, password = ensure_demo()
        logging.getLogger("celery.app.trace").setLevel(logging.WARNING)  # one INFO line per eager task otherwise
        history = fill_demo_history()
        if history["status"] == "filled":
            self.stdout.write(
                f"Demo history: {history['sessions']} simulated agent sessions over {history['weeks']} weeks "
                f"(outcomes {history['outcomes']}, {history['decay_runs']} decay runs); "
                f"{history['days']} days of metrics rolled up."
            )
        # Ctrl-C (SIGINT) and SIGTERM both stop everything, even when started from a script that ignores SIGINT.
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        env = child_env()
        # This process keeps supervising only: its owner connection (migrate, the demo) is not kept open.
        connections.close_all()
        supervisor = Supervisor(children(addr, mcp_addr), cwd=settings.BASE_DIR, env=env, out=self.stderr)
        supervisor.start_all()
        mcp_line = f"MCP (streamable HTTP): http://{mcp_addr}/mcp\n" if mcp_addr else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"\ngraphadmin is running at http://{addr}/  (graph '{graph.organization.slug}/{graph.slug}')\n"
                f"{mcp_line}"
                f"Log in as admin, operator, analyst or reviewer with password: {password}"
                " (agent, the demo's service account, owns the demo history's sessions)\n"
                f"Broker: {settings.CELERY_BROKER_URL}   Embedder: {configured_model()}   Press Ctrl-C to stop.\n"
            )
        )
        if checks.filesystem_broker_in_production(settings.DEBUG, settings.CELERY_BROKER_URL):
            self.stderr.write(self.style.WARNING(f"{checks.FILESYSTEM_BROKER_MESSAGE} {checks.FILESYSTEM_BROKER_HINT}"))
        try:
            supervisor.run()
        except KeyboardInterrupt:
            self.stdout.write("Stopping...")
        finally:
            supervisor.stop()
