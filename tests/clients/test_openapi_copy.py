"""The client's offline tests answer from a stub checked against clients/python/tests/openapi.json: that copy must be
what the server generates now (after an API change: make client-schema)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management import call_command

COPY = Path(__file__).resolve().parents[2] / "clients/python/tests/openapi.json"


def test_the_client_tests_schema_is_the_servers(tmp_path):
    out = tmp_path / "openapi.json"
    call_command("spectacular", format="openapi-json", file=str(out))
    assert json.loads(out.read_text()) == json.loads(COPY.read_text()), (
        "clients/python/tests/openapi.json differs from the API's schema: run make client-schema"
    )
