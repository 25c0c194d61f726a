"""The OpenAPI schema validates without warnings; it and Swagger UI (local static files) need a login."""

from django.core.management import call_command
from django.test import Client

from graphadmin.accounts import create_token


def test_schema_validates_without_warnings(db, tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/graphs/{graph_pk}/policy/" in (tmp_path / "schema.yaml").read_text()


def test_swagger_ui_uses_local_assets(client, alice):
    client.force_login(alice)
    page = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page and "cdn" not in page.lower()
    assert "/static/drf_spectacular_sidecar/" in page


def test_schema_and_docs_need_a_login(client, db, ana):
    schema = client.get("/api/schema/")
    assert schema.status_code == 401 and schema.headers["WWW-Authenticate"] == "Token"
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs.headers["Location"].startswith("/accounts/login/?next=/api/docs/")
    client.force_login(ana)
    assert client.get("/api/schema/").status_code == 200
    assert client.get("/api/docs/").status_code == 200
    # A token works for the schema too (schemathesis and code generators fetch it so).
    anonymous = Client()
    assert anonymous.get("/api/schema/", HTTP_AUTHORIZATION=f"Token {create_token(ana)}").status_code == 200


def test_swagger_ui_page_has_no_inline_script_or_style(client, alice):
    client.force_login(alice)
    page = client.get("/api/docs/").content.decode()
    assert "<style" not in page
    assert all("src=" in chunk.split(">", 1)[0] for chunk in page.split("<script")[1:])
