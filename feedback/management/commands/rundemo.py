"""manage.py rundemo: migrate, load the demo graph, then run web server, Celery worker and beat.

This is what ``make run`` calls. Ctrl-C stops all three processes.
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
from django.core.management.base import BaseCommand

from feedback.demo import ensure_demo, fill_demo_history
from graphadmin.embeddings import configured_model


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Migrate, load the demo graph, and run the web server with a Celery worker and beat."

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr", default=os.environ.get("RUN_ADDR", "127.0.0.1:8000"), help="host:port of the web server."
        )

    def handle(self, *args, addr, **options):
        call_command("migrate", interactive=False, verbosity=1)
        graph, password = ensure_demo()
        logging.getLogger("celery.app.trace").setLevel(logging.WARNING)  # one INFO line per eager task otherwise
        history = fill_demo_history()
        if history["status"] == "filled":
            self.stdout.write(
                f"Demo history: {history['sessions']} simulated agent sessions over {history['weeks']} weeks "
                f"(outcomes {history['outcomes']}, {history['decay_runs']} decay runs); "
                f"{history['days']} days of metrics rolled up."
            )
        python = sys.executable
        children = {
            "web": [python, "manage.py", "runserver", addr, "--noreload"],
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "graphadmin",
                "worker",
                "--loglevel=INFO",
                "--concurrency=2",
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
        # Ctrl-C (SIGINT) and SIGTERM both stop everything, even when started from a script that ignores SIGINT.
        signal.signal(signal.SIGINT, _interrupt)
        signal.signal(signal.SIGTERM, _interrupt)
        procs = {name: subprocess.Popen(cmd, cwd=settings.BASE_DIR) for name, cmd in children.items()}
        self.stdout.write(
            self.style.SUCCESS(
                f"\ngraphadmin is running at http://{addr}/  (graph '{graph.organization.slug}/{graph.slug}')\n"
                f"Log in as admin, operator, analyst or reviewer with password: {password}\n"
                f"Broker: {settings.CELERY_BROKER_URL}   Embedder: {configured_model()}   Press Ctrl-C to stop.\n"
            )
        )
        try:
            while all(p.poll() is None for p in procs.values()):
                time.sleep(0.5)
            dead = [n for n, p in procs.items() if p.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped; stopping the rest.")
        except KeyboardInterrupt:
            self.stdout.write("Stopping...")
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs.values():
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
