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


def test_refuses_to_start_without_secret_key_when_debug_is_off():
    result = _django_check(DEBUG="false")
    assert result.returncode != 0 and "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_starts_with_a_secret_key():
    assert _django_check(DEBUG="false", SECRET_KEY="x" * 50).returncode == 0
