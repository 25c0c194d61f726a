"""The production layout of docs/deploy.md: `manage.py check --deploy` is clean with its environment, and
gunicorn serves the app (static files by WhiteNoise) and stops gracefully on SIGTERM."""

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from django.db import connection

from tests.conftest import ROOT

DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def deploy_env() -> dict:
    """The environment block of docs/deploy.md (lines VAR=value inside its ```env fence)."""
    block = re.search(r"```env\n(.*?)```", DEPLOY_DOC.read_text(), re.S)
    assert block, "docs/deploy.md has no ```env block"
    values = {}
    for line in block.group(1).splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value
    return values


def documented_env(**changes) -> dict:
    """Exactly the documented environment: nothing inherited from the test run (other tests set variables
    such as DJANGO_ALLOW_ASYNC_UNSAFE that a deployment must not have)."""
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **deploy_env()}
    env["SECRET_KEY"] = secrets.token_urlsafe(50)  # the doc's placeholder is not a key
    # The documented DATABASE_URL and folders name a server and paths that do not exist here; the check
    # needs no database, so it runs on the embedded one of this checkout.
    for name in ("DATABASE_URL", "STATIC_ROOT", "GRAPHADMIN_LOCAL_DIR"):
        env.pop(name, None)
    return {**env, **changes}


def check_deploy(env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_environment():
    done = check_deploy(documented_env())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


# What the documented environment turns on, read back from the settings it gives.
SETTINGS_PROBE = """
import json, django
django.setup()
from django.conf import settings as s
print(json.dumps({
    "hsts": s.SECURE_HSTS_SECONDS, "ssl_redirect": s.SECURE_SSL_REDIRECT,
    "secure_cookies": [s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE],
    "csp": s.CONTENT_SECURITY_POLICY["DIRECTIVES"]["script-src"],
    "cache": s.CACHES["default"]["BACKEND"], "log_format": s.LOG_FORMAT, "num_proxies": s.NUM_PROXIES,
    "validators": [v["NAME"].rsplit(".", 1)[-1] for v in s.AUTH_PASSWORD_VALIDATORS],
    "backends": s.AUTHENTICATION_BACKENDS[0], "token_ttl_days": s.REST_KNOX["TOKEN_TTL"].days,
    "schema": s.SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"],
}))
"""


def test_the_documented_environment_turns_the_protections_on():
    env = {**documented_env(), "DJANGO_SETTINGS_MODULE": "graphadmin.settings"}
    done = subprocess.run([sys.executable, "-c", SETTINGS_PROBE], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "hsts": 3600,
        "ssl_redirect": True,
        "secure_cookies": [True, True],
        "csp": ["'self'"],
        "cache": "django.core.cache.backends.redis.RedisCache",
        "log_format": "json",
        "num_proxies": 1,
        "validators": [
            "UserAttributeSimilarityValidator",
            "MinimumLengthValidator",
            "CommonPasswordValidator",
            "NumericPasswordValidator",
        ],
        "backends": "axes.backends.AxesStandaloneBackend",
        "token_ttl_days": 30,
        "schema": ["rest_framework.permissions.IsAuthenticated"],
    }


def test_check_deploy_flags_a_policy_off_and_a_private_cache():
    done = check_deploy(documented_env(CSP_MODE="off", CACHE_URL="locmemcache://"))
    assert done.returncode != 0
    assert "graphadmin.W101" in done.stderr + done.stdout and "graphadmin.W102" in done.stderr + done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_and_stops_gracefully(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_NAME": connection.settings_dict["NAME"],
        "WEB_CONCURRENCY": "2",
        "WEB_GRACEFUL_TIMEOUT": "10",
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    log = open(tmp_path / "gunicorn.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:graphadmin.gunicorn_conf", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/plotly/plotly.min.js", timeout=10) as r:
            assert r.status == 200 and len(r.read()) > 100_000
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    text = (tmp_path / "gunicorn.log").read_text()
    assert "gthread" in text or "Booting worker" in text
    assert "Handling signal: term" in text
    # LOG_FORMAT is json (DEBUG off): gunicorn's own lines are JSON objects too.
    booted = [json.loads(line) for line in text.splitlines() if line.startswith("{") and "Booting worker" in line]
    assert booted and booted[0]["logger"] == "gunicorn.error" and booted[0]["level"] == "INFO"
