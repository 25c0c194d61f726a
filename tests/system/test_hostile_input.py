"""Bad input that used to reach a 500 (issue 26, item 4): each is a clear 4xx or a 503 with Retry-After now.

- a JSON body nested 10,000 deep (RecursionError on every REST endpoint) and one merely deeper than
  MAX_JSON_DEPTH: a 400 saying so, nothing written;
- a zip whose central directory lies about an entry's size (BadZipFile): a 400 on ``file``;
- the database unreachable (OperationalError while opening the request's transaction): a 503 with
  Retry-After, JSON for the API and the product's page for the dashboard, from a real gunicorn whose
  DATABASE_URL points at a port nothing listens on.
"""

import io
import json
import struct
import zipfile

import pytest
from django.conf import settings

from feedback.models import PendingReport
from graphadmin.models import AuditEvent
from tests.resilience import get, web_server

from ..feedback.conftest import make_session

DEEP = ("[" * 10_000 + "]" * 10_000).encode()


def _nested(depth: int) -> dict:
    """A context request whose JSON nests ``depth`` objects deep (the request's own object included)."""
    value = 1
    for _ in range(depth - 1):
        value = {"a": value}
    return {"query": "ranking", "session": "s", "extra": value}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/api/graphs/"),
        ("post", "/api/graphs/{graph}/context/"),
        ("post", "/api/graphs/{graph}/sessions/s1/uses/"),
        ("patch", "/api/graphs/{graph}/policy/"),
        ("post", "/api/graphs/{graph}/weights/"),
    ],
)
def test_a_body_nested_ten_thousand_deep_is_a_400(api, alice, acme_graph, method, path):
    events = AuditEvent.objects.count()
    send = getattr(api(alice), method)
    response = send(path.format(graph=acme_graph.pk), data=DEEP, content_type="application/json")
    assert response.status_code == 400, response.content
    assert "nested deeper than" in response.json()["detail"]
    assert AuditEvent.objects.count() == events


@pytest.mark.django_db
def test_a_body_one_level_past_the_limit_is_a_400_and_one_within_is_parsed(api, alice, acme_graph):
    url = f"/api/graphs/{acme_graph.pk}/context/"
    deep = json.dumps(_nested(settings.MAX_JSON_DEPTH + 1)).encode()
    response = api(alice).post(url, data=deep, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["detail"] == f"JSON parse error - nested deeper than {settings.MAX_JSON_DEPTH} levels."
    within = json.dumps(_nested(settings.MAX_JSON_DEPTH)).encode()
    response = api(alice).post(url, data=within, content_type="application/json")
    assert "nested deeper" not in response.content.decode()


def _lying_zip() -> bytes:
    """A vault zip whose central directory says its note unpacks to 10 bytes (it holds 12,009)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("Vault/note.md", "# Title\n\n" + "hello world " * 1000)
        archive.writestr("Vault/other.md", "# Other\n\nSee [[note]].")
    data = bytearray(buffer.getvalue())
    at = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, at + 24, 10)
    return bytes(data)


@pytest.mark.django_db
def test_a_zip_whose_header_lies_about_a_size_is_a_400_on_file(api, oscar, acme_graph):
    upload = io.BytesIO(_lying_zip())
    upload.name = "vault.zip"
    events = AuditEvent.objects.count()
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/import/", {"file": upload}, format="multipart")
    assert response.status_code == 400, response.content
    assert "does not match its header" in response.json()["file"][0]
    assert "Vault/note.md" in response.json()["file"][0]
    assert AuditEvent.objects.count() == events


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_is_a_503_with_retry_after(tmp_path, ada, acme_graph, small_graph):
    make_session(acme_graph, "s1", [(small_graph["b"], None, True)], ada)
    # Nothing listens on port 9 of this machine: every connection is refused.
    with web_server(tmp_path, DATABASE_URL="postgresql://graphadmin@127.0.0.1:9/graphadmin") as url:
        status, headers, body = get(
            f"{url}/api/graphs/{acme_graph.pk}/", {"Authorization": "Token " + "a" * 64, "Accept": "application/json"}
        )
        assert status == 503, body
        assert headers["Retry-After"] == str(settings.DATABASE_RETRY_AFTER_SECONDS)
        assert "database is unavailable" in json.loads(body)["detail"]
        status, headers, body = get(f"{url}/", {"Accept": "text/html"})
        assert status == 503
        assert headers["Retry-After"]
        assert b"Unavailable for a moment" in body and b"Traceback" not in body
        assert get(f"{url}/healthz")[0] == 200
        status, _, body = get(f"{url}/readyz")
        assert status == 503 and json.loads(body)["checks"]["database"] == "fail"
    assert PendingReport.objects.count() == 0
