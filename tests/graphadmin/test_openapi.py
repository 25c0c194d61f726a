"""The OpenAPI schema validates without warnings, and Swagger UI is served from local static files."""

from django.core.management import call_command


def test_schema_validates_without_warnings(db, tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/graphs/{graph_pk}/policy/" in (tmp_path / "schema.yaml").read_text()


def test_swagger_ui_uses_local_assets(client, alice):
    client.force_login(alice)
    page = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page and "cdn" not in page.lower()
    assert "/static/drf_spectacular_sidecar/" in page
