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
