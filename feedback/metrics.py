"""The daily metrics rollup: one DailyMetric row per graph and UTC day, computed by a Celery task.

Charts and the metrics endpoint read these rows only, never raw history on a request. Every
query filters by ``graph_id`` and by the day, so the rollup touches one day of the ledgers.

- ``scores``: traversal-score totals of that day's candidates: count, min, max, mean, stddev
  (the spread), p10/p50/p90 and a 10-bin histogram between min and max (all candidates, and
  the selected ones' count).
- ``updates``: weight changes of that day by batch kind and edge type (node changes under "(node)").
- ``weights``: weight and feedback_weight distribution of live edges by edge type at rollup time
  (count, mean, min, max, p50 and a 10-bin histogram over [0, 1]); for a past day recomputed later
  this is the distribution *as of the rollup*, which the row's ``computed_at`` states.
- ``top_used``: of the sessions with an injection that day, how many used (explicit or implicit use
  event) at least one of their top ``TOP_K`` ranked selected candidates, and the fraction.
- ``outcomes``: sessions whose outcome was reported that day, by outcome.
- ``totals``: live nodes and edges of the graph at rollup time (the overview shows these instead of
  counting a million rows on every request).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.db import connection

from graphadmin.errors import InputError

from .models import DailyMetric

TOP_K = 3
BINS = 10
MAX_RANGE_DAYS = 366  # days per request, both ends included
DEFAULT_RANGE_DAYS = 30


class RangeError(InputError):
    """A bad date range: ``field`` is ``from`` or ``to``."""

    def __init__(self, field: str, message: str):
        super().__init__({field: [message]})
        self.field = field
        self.message = message


def day_range(since: str | None = None, until: str | None = None) -> tuple[date, date]:
    """The UTC days a metrics request covers: ``from``/``to`` as YYYY-MM-DD, default the last 30 days.

    Raises RangeError naming the field. The API answers it with a 400; the dashboard shows it.
    """
    try:
        end = date.fromisoformat(until) if until else datetime.now(UTC).date()
    except ValueError:
        raise RangeError("to", "Expected a date, YYYY-MM-DD.") from None
    try:
        start = date.fromisoformat(since) if since else end - timedelta(days=DEFAULT_RANGE_DAYS - 1)
    except ValueError:
        raise RangeError("from", "Expected a date, YYYY-MM-DD.") from None
    if start > end:
        raise RangeError("from", "Must not be after 'to'.")
    if (end - start).days >= MAX_RANGE_DAYS:
        raise RangeError("from", f"At most {MAX_RANGE_DAYS} days per request.")
    return start, end


def _one(sql: str, params: dict):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def _all(sql: str, params: dict):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def _scores(p: dict) -> dict:
    row = _one(
        """
        SELECT count(*), min(c.total), max(c.total), avg(c.total), stddev_pop(c.total),
               percentile_cont(0.1) WITHIN GROUP (ORDER BY c.total),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY c.total),
               percentile_cont(0.9) WITHIN GROUP (ORDER BY c.total),
               count(*) FILTER (WHERE c.selected)
        FROM feedback_injectioncandidate c JOIN feedback_contextinjection j ON j.id = c.injection_id
        WHERE c.graph_id = %(graph)s AND j.graph_id = %(graph)s
              AND j.created_at >= %(start)s AND j.created_at < %(end)s
        """,
        p,
    )
    count, lo, hi, mean, spread, p10, p50, p90, selected = row
    out = {
        "count": count,
        "selected": selected,
        "min": lo,
        "max": hi,
        "mean": mean,
        "stddev": spread,
        "p10": p10,
        "p50": p50,
        "p90": p90,
        "histogram": [],
    }
    if count:
        width = (hi - lo) / BINS if hi > lo else 1.0
        bins = dict(
            _all(
                """
            SELECT least(width_bucket(c.total, %(lo)s, %(lo)s + %(width)s * %(bins)s, %(bins)s), %(bins)s) AS b,
                   count(*)
            FROM feedback_injectioncandidate c JOIN feedback_contextinjection j ON j.id = c.injection_id
            WHERE c.graph_id = %(graph)s AND j.graph_id = %(graph)s
              AND j.created_at >= %(start)s AND j.created_at < %(end)s
            GROUP BY b
            """,
                {**p, "lo": lo, "width": width, "bins": BINS},
            )
        )
        out["histogram"] = [
            {"from": lo + width * (b - 1), "to": lo + width * b, "count": bins.get(b, 0)} for b in range(1, BINS + 1)
        ]
    return out


def _updates(p: dict) -> list[dict]:
    rows = _all(
        """
        SELECT b.kind, coalesce(t.name, '(node)'), w.field, count(*)
        FROM feedback_weighthistory w
        JOIN feedback_updatebatch b ON b.id = w.batch_id
        LEFT JOIN graphadmin_edge e ON e.id = w.edge_id
        LEFT JOIN graphadmin_edgetype t ON t.id = e.edge_type_id
        WHERE w.graph_id = %(graph)s AND w.created_at >= %(start)s AND w.created_at < %(end)s
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        """,
        p,
    )
    return [{"kind": k, "edge_type": t, "field": f, "count": n} for k, t, f, n in rows]


def _weights(p: dict) -> list[dict]:
    rows = _all(
        """
        SELECT t.name, count(*),
               avg(e.weight), min(e.weight), max(e.weight), percentile_cont(0.5) WITHIN GROUP (ORDER BY e.weight),
               avg(e.feedback_weight), min(e.feedback_weight), max(e.feedback_weight),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY e.feedback_weight)
        FROM graphadmin_edge e JOIN graphadmin_edgetype t ON t.id = e.edge_type_id
        WHERE e.graph_id = %(graph)s AND NOT e.archived
        GROUP BY t.name ORDER BY t.name
        """,
        p,
    )
    hist = {}
    for name, fld, bucket, n in _all(
        """
        SELECT t.name, f.field, least(width_bucket(f.value, 0.0, 1.0, %(bins)s), %(bins)s), count(*)
        FROM graphadmin_edge e JOIN graphadmin_edgetype t ON t.id = e.edge_type_id
        CROSS JOIN LATERAL (VALUES ('weight', e.weight), ('feedback_weight', e.feedback_weight)) AS f(field, value)
        WHERE e.graph_id = %(graph)s AND NOT e.archived
        GROUP BY 1, 2, 3
        """,
        {**p, "bins": BINS},
    ):
        hist.setdefault((name, fld), [0] * BINS)[bucket - 1] = n
    out = []
    for name, count, wmean, wmin, wmax, wp50, fmean, fmin, fmax, fp50 in rows:
        out.append(
            {
                "edge_type": name,
                "count": count,
                "weight": {
                    "mean": wmean,
                    "min": wmin,
                    "max": wmax,
                    "p50": wp50,
                    "histogram": hist.get((name, "weight"), [0] * BINS),
                },
                "feedback_weight": {
                    "mean": fmean,
                    "min": fmin,
                    "max": fmax,
                    "p50": fp50,
                    "histogram": hist.get((name, "feedback_weight"), [0] * BINS),
                },
            }
        )
    return out


def _top_used(p: dict) -> dict:
    sessions, used = _one(
        """
        WITH s AS (
            SELECT DISTINCT j.session_id FROM feedback_contextinjection j
            WHERE j.graph_id = %(graph)s AND j.created_at >= %(start)s AND j.created_at < %(end)s
        ),
        top AS (
            SELECT j.session_id, c.node_id, c.edge_id FROM feedback_injectioncandidate c
            JOIN feedback_contextinjection j ON j.id = c.injection_id
            WHERE j.session_id IN (SELECT session_id FROM s)
              AND c.graph_id = %(graph)s AND c.selected AND c.rank <= %(k)s
        )
        SELECT (SELECT count(*) FROM s),
               (SELECT count(DISTINCT top.session_id) FROM top JOIN feedback_useevent u
                  ON u.session_id = top.session_id AND u.graph_id = %(graph)s AND u.signal IN ('explicit', 'implicit')
                 AND u.source <> 'path'
                 AND (u.node_id = top.node_id OR u.edge_id = top.edge_id))
        """,
        {**p, "k": TOP_K},
    )
    return {"top_k": TOP_K, "sessions": sessions, "used": used, "fraction": (used / sessions) if sessions else None}


def _outcomes(p: dict) -> dict:
    rows = _all(
        """
        SELECT outcome, count(*) FROM feedback_agentsession
        WHERE graph_id = %(graph)s AND outcome_at >= %(start)s AND outcome_at < %(end)s
        GROUP BY outcome ORDER BY outcome
        """,
        p,
    )
    return dict(rows)


def _node_total(p: dict) -> int:
    return _one("SELECT count(*) FROM graphadmin_node WHERE graph_id = %(graph)s AND NOT archived", p)[0]


def compute(graph, day: date) -> dict:
    """The metrics of one graph for one UTC day (no write)."""
    start = datetime.combine(day, time.min, tzinfo=UTC)
    p = {"graph": graph.pk, "start": start, "end": start + timedelta(days=1)}
    weights = _weights(p)
    return {
        "scores": _scores(p),
        "updates": _updates(p),
        "weights": weights,
        "top_used": _top_used(p),
        "outcomes": _outcomes(p),
        # Live edges are the per-type counts above, summed; only nodes need their own count.
        "totals": {"nodes": _node_total(p), "edges": sum(w["count"] for w in weights)},
    }


def rollup(graph, day: date) -> DailyMetric:
    """Compute and upsert the DailyMetric row of one graph and day (safe to run again)."""
    row, _created = DailyMetric.objects.update_or_create(
        graph=graph, day=day, defaults={"data": compute(graph, day), "computed_at": datetime.now(UTC)}
    )
    return row
