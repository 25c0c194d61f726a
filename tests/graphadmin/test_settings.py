"""Settings come from the environment; the service refuses to start without a secret key in production."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _django_check(**env):
    environment = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_refuses_to_start_without_secret_key_when_debug_is_off(tmp_path):
    result = _django_check(DEBUG="false", GRAPHADMIN_LOCAL_DIR=str(tmp_path))  # no .local/secret-key either
    assert result.returncode != 0 and "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_the_key_make_run_generated_serves_the_commands_beside_it(tmp_path):
    """`make run` writes .local/secret-key once; manage.py commands (agent_token, ...) read it when SECRET_KEY
    is unset."""
    (tmp_path / "secret-key").write_text("k" * 50 + "\n")
    assert _django_check(DEBUG="false", GRAPHADMIN_LOCAL_DIR=str(tmp_path)).returncode == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "secret-key").write_text("\n")
    assert _django_check(DEBUG="false", GRAPHADMIN_LOCAL_DIR=str(empty)).returncode != 0


def test_starts_with_a_secret_key():
    assert _django_check(DEBUG="false", SECRET_KEY="x" * 50).returncode == 0


_FOLDERS = """
import os, sys
from pathlib import Path
from django.conf import settings
local, queue, static = (Path(p) for p in sys.argv[1:])
settings.INSTALLED_APPS  # the settings read
print("settings", sorted(p.name for p in local.iterdir()))
import django
django.setup()
print("setup", static.is_dir(), queue.exists())
from graphadmin.celery import app
app.conf.broker_url  # Celery configured, as a worker, beat or a web process sending a task does
print("celery", (queue / "results").is_dir())
"""


def test_the_settings_make_no_folder_each_is_made_where_it_is_first_needed(tmp_path):
    """Reading the settings creates nothing; the app's ready() makes STATIC_ROOT (WhiteNoise reads it as a web
    process starts) and configuring Celery makes the filesystem broker's queue and results folders."""
    local, queue, static = tmp_path / "local", tmp_path / "local" / "queue", tmp_path / "local" / "static"
    local.mkdir()
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "STATIC_ROOT"))}
    environment.update(
        DJANGO_SETTINGS_MODULE="graphadmin.settings",
        SECRET_KEY="x",
        DEBUG="1",
        GRAPHADMIN_LOCAL_DIR=str(local),
        CELERY_QUEUE_DIR=str(queue),
        STATIC_ROOT=str(static),
    )
    result = subprocess.run(
        [sys.executable, "-c", _FOLDERS, str(local), str(queue), str(static)],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["settings []", "setup True False", "celery True"]
