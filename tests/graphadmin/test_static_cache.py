"""Chart pages load plotly.js's basic bundle (1.2 MB, not the full 4.8 MB), cached as immutable under its
versioned name and served gzipped where ``make static-compressed`` wrote the gzip (issues 25 item 7, 39 item 6)."""

from pathlib import Path

import pytest

PLOTLY = "/static/vendor/plotly/plotly-basic-4.1.1.min.js"
SOURCE = Path(__file__).resolve().parents[2] / PLOTLY.removeprefix("/")


@pytest.mark.django_db
def test_chart_pages_load_the_smaller_bundle(client, acme_graph, ana):
    from datetime import UTC, datetime

    from feedback import metrics

    metrics.rollup(acme_graph, datetime.now(UTC).date())  # a day of rollups: the page draws its charts
    client.force_login(ana)
    page = client.get(f"/g/{acme_graph.pk}/impact/").content.decode()
    assert PLOTLY in page and "plotly/plotly.min.js" not in page
    assert SOURCE.stat().st_size < 1_300_000


def test_the_versioned_bundle_is_cached_as_immutable_and_gzipped(client):
    response = client.get(PLOTLY, HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Cache-Control"] == "max-age=315360000, public, immutable"
    if SOURCE.with_name(SOURCE.name + ".gz").exists():
        assert response["Content-Encoding"] == "gzip"
        assert int(response["Content-Length"]) < 600_000
    # A file without a version in its name is not cached for long.
    assert "immutable" not in client.get("/static/js/charts.js")["Cache-Control"]
