"""Schemathesis against the OpenAPI schema on a live server: every operation, 5 generated requests each,
as a token of one organization with a second organization's user as the peer for object-level checks;
zero server errors, no ignored authentication, no object of one organization served to the other
(issue 15, "Tests and figures"). The full run (with the coverage phase, too slow here) and its counts:
docs/bounds.md.

The full run, by hand (docs/resilience.md): SCHEMATHESIS_ROLE=operator|agent|admin (the role of the token and
of its peer in the second organization; admin by default), SCHEMATHESIS_MAX_EXAMPLES (5),
SCHEMATHESIS_PHASES ("examples,fuzzing"; "examples,coverage,fuzzing" for the full one) and
SCHEMATHESIS_TIMEOUT (300 s)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from graphadmin import actions
from graphadmin.accounts import create_token
from graphadmin.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)

CHECKS = "not_a_server_error,ignored_auth,object_level_authorization"
ROLE = os.environ.get("SCHEMATHESIS_ROLE", "admin")
MAX_EXAMPLES = os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "5")
PHASES = os.environ.get("SCHEMATHESIS_PHASES", "examples,fuzzing")
TIMEOUT = int(os.environ.get("SCHEMATHESIS_TIMEOUT", "300"))


def _identities(acme, globex, alice, mallory):
    """(name, user) of the token the run uses and of its peer in the other organization, both of ROLE."""
    if ROLE == "admin":
        return [("acme-admin", alice), ("globex-admin", mallory)]
    users = []
    for org in (acme, globex):
        user = get_user_model().objects.create_user(username=f"{org.slug}-{ROLE}", password="x")
        Membership.objects.create(user=user, organization=org, role=ROLE)
        users.append((f"{org.slug}-{ROLE}", user))
    return users


def test_no_server_errors(live_server, rg, acme, alice, mallory, globex, client, tmp_path):
    actions.do_create_graph(globex, "other", "Globex memory", actor=mallory)
    client.force_login(alice)
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    (tmp_path / "schema.json").write_bytes(schema.content)
    identities = _identities(acme, globex, alice, mallory)
    auth = {
        "auth": [
            {
                "name": name,
                "fixedHeaders": [{"name": "Authorization", "value": f"Token {create_token(u)}"}],
            }
            for name, u in identities
        ]
    }
    (tmp_path / "auth.json").write_text(json.dumps(auth))
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "run",
            str(tmp_path / "schema.json"),
            "--url",
            live_server.url,
            "--checks",
            CHECKS,
            "--auth-wfc",
            str(tmp_path / "auth.json"),
            "--phases",
            PHASES,
            "--max-examples",
            MAX_EXAMPLES,
            "--seed",
            "1",
            "--workers",
            "1",
            "--request-timeout",
            "30",
            "--generation-database",
            "none",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=tmp_path,
    )
    summary = run.stdout[run.stdout.rfind("Tested") - 2000 :] if "Tested" in run.stdout else run.stdout[-3000:]
    print(f"\nschemathesis as {ROLE}, {PHASES}, max-examples {MAX_EXAMPLES}:\n{summary}")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    tested = re.search(r"Tested: (\d+)", run.stdout)
    assert tested and int(tested.group(1)) >= 45, run.stdout[-3000:]  # every operation of the schema
