"""Schemathesis against the OpenAPI schema on a live server: every operation, 5 generated requests each,
as a token of one organization with a second organization's user as the peer for object-level checks;
zero server errors, no ignored authentication, no object of one organization served to the other
(issue 15, "Tests and figures"). The full run (with the coverage phase, too slow here) and its counts:
docs/bounds.md."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from graphadmin import actions
from graphadmin.accounts import create_token

pytestmark = pytest.mark.django_db(transaction=True)

CHECKS = "not_a_server_error,ignored_auth,object_level_authorization"


def test_no_server_errors(live_server, rg, alice, mallory, globex, client, tmp_path):
    actions.do_create_graph(globex, "other", "Globex memory", actor=mallory)
    client.force_login(alice)
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    (tmp_path / "schema.json").write_bytes(schema.content)
    identities = [("acme-admin", alice), ("globex-admin", mallory)]
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
            "examples,fuzzing",
            "--max-examples",
            "5",
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
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    tested = re.search(r"Tested: (\d+)", run.stdout)
    assert tested and int(tested.group(1)) >= 45, run.stdout[-3000:]  # every operation of the schema
