"""The impact CSV export escapes cells a spreadsheet would run as formulas (issue 15 item 11: an edge type
named '=HYPERLINK(...)' reached the export as a formula)."""

import csv
import io
from datetime import UTC, datetime

import pytest

from feedback.charts import csv_cell
from feedback.models import DailyMetric


@pytest.mark.parametrize(
    "value, expected",
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+1", "'+1"),
        ("-1+2", "'-1+2"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("related", "related"),
        (-0.5, -0.5),
        (None, None),
    ],
)
def test_csv_cell(value, expected):
    assert csv_cell(value) == expected


def test_export_escapes_edge_type_names(client, acme_graph, ana):
    DailyMetric.objects.create(
        graph=acme_graph,
        day="2026-11-30",
        computed_at=datetime(2026, 12, 1, tzinfo=UTC),
        data={"weights": [{"edge_type": "=HYPERLINK(1)", "weight": {"mean": 0.5}, "feedback_weight": {"mean": 0.5}}]},
    )
    client.force_login(ana)
    response = client.get(f"/g/{acme_graph.pk}/impact/", {"format": "csv", "from": "2026-11-01", "to": "2026-11-30"})
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    keys = {row[2] for row in rows if row[1] == "weights"}
    assert keys == {"'=HYPERLINK(1)"}
    assert not any(cell.startswith(("=", "+", "@")) for row in rows for cell in row)
