"""The daily metrics rollup: one DailyMetric row per graph and UTC day, computed by a Celery task.

Charts and the metrics endpoint read these rows only, never raw history on a request. Every
query filters by ``graph_id`` and by the day, so the rollup touches one day of the ledgers.

- ``scores``: traversal-score totals of that day's candidates: count, min, max, mean, stddev
  (the spread), p10/p50/p90 and a 10-bin histogram between min and max (all candidates, and
  the selected ones' count).
- ``updates``: weight changes of that day by batch kind and edge type (node changes under "(node)").
- ``weights``: weight and feedback_weight distribution of live edges by edge type at the end of the
  day (count, mean, min, max, p50 and a 10-bin histogram over [0, 1]), read back from the weight
  history: a past day rolled up later shows that day's weights, not the rollup's.
- ``top_used``: of the sessions with an injection that day, how many used (explicit or implicit use
  event) at least one of their top ``TOP_K`` ranked selected candidates, and the fraction.
- ``outcomes``: sessions whose outcome was reported that day, by outcome.
- ``agents``: the session measures (scores, top_used, outcomes) again, split by the session's owner
  (the agent's user id), so the pages' agent filter reads rollups too (``agent_filter``, ``for_agents``).
- ``totals``: live nodes at rollup time and edges at the day's end (the overview shows these instead of
  counting a million rows on every request).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from django.contrib.auth import get_user_model

from graphadmin.errors import InputError
from graphadmin.models.sql import fetch, fetch_all

from .models import DailyMetric
from .queries import reads

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


def _scores(p: dict) -> dict:
    row = fetch(reads.ROLLUP_SCORES, p)
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
        bins = dict(fetch_all(reads.ROLLUP_SCORE_BINS, {**p, "lo": lo, "width": width, "bins": BINS}))
        out["histogram"] = [
            {"from": lo + width * (b - 1), "to": lo + width * b, "count": bins.get(b, 0)} for b in range(1, BINS + 1)
        ]
    return out


def _updates(p: dict) -> list[dict]:
    rows = fetch_all(reads.ROLLUP_UPDATES, p)
    return [{"kind": k, "edge_type": t, "field": f, "count": n} for k, t, f, n in rows]


def _weights(p: dict) -> list[dict]:
    """Weight and feedback_weight by edge type as of the end of the day (``reads.ROLLUP_WEIGHTS``: ``_ASOF``)."""
    rows = fetch_all(reads.ROLLUP_WEIGHTS, p)
    hist = {}
    for name, fld, bucket, n in fetch_all(reads.ROLLUP_WEIGHT_BINS, {**p, "bins": BINS}):
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
    sessions, used = fetch(reads.ROLLUP_TOP_USED, {**p, "k": TOP_K})
    return {"top_k": TOP_K, "sessions": sessions, "used": used, "fraction": (used / sessions) if sessions else None}


def _outcomes(p: dict) -> dict:
    rows = fetch_all(reads.ROLLUP_OUTCOMES, p)
    return dict(rows)


def _by_agent(p: dict) -> dict:
    """The session measures of the day split by agent (the session's owner id as text; "" for sessions with
    no owner): scores of their candidates, top-used and outcomes, so a page can leave out load tests and
    probes (``agent_filter``) without reading raw history."""
    out: dict[str, dict] = {}

    def agent(key) -> dict:
        return out.setdefault(
            "" if key is None else str(key),
            {"scores": {"count": 0}, "top_used": {"sessions": 0, "used": 0}, "outcomes": {}},
        )

    for owner, count, mean, spread, p10, p50, p90 in fetch_all(reads.ROLLUP_AGENT_SCORES, p):
        agent(owner)["scores"] = {"count": count, "mean": mean, "stddev": spread, "p10": p10, "p50": p50, "p90": p90}
    for owner, sessions, used in fetch_all(reads.ROLLUP_AGENT_TOP_USED, {**p, "k": TOP_K}):
        agent(owner)["top_used"] = {"sessions": sessions, "used": used}
    for owner, outcome, count in fetch_all(reads.ROLLUP_AGENT_OUTCOMES, p):
        agent(owner)["outcomes"][outcome] = count
    return out


def _node_total(p: dict) -> int:
    return fetch(reads.ROLLUP_LIVE_NODES, p)[0]


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
        "agents": _by_agent(p),
        # Live edges are the per-type counts above, summed; only nodes need their own count.
        "totals": {"nodes": _node_total(p), "edges": sum(w["count"] for w in weights)},
    }


def rollup(graph, day: date) -> DailyMetric:
    """Compute and upsert the DailyMetric row of one graph and day (safe to run again)."""
    row, _created = DailyMetric.objects.update_or_create(
        graph=graph, day=day, defaults={"data": compute(graph, day), "computed_at": datetime.now(UTC)}
    )
    return row


# --------------------------------------------------------------------------------------------------
# The agent filter of the analytics pages (overview, feedback impact, revision effects, CSV)


@dataclass(frozen=True)
class AgentFilter:
    """Which agents' sessions the analytics pages count: ``keys`` the owner ids (as the rollup's
    ``agents`` keys; "" for sessions without an owner), None for every session. ``choices`` lists
    (key, name, checked) for the form."""

    keys: frozenset[str] | None
    choices: tuple[tuple[str, str, bool], ...]

    @property
    def active(self) -> bool:
        return self.keys is not None

    @property
    def owner_ids(self) -> list[int] | None:
        """The selected owners' ids (None: every session; sessions without an owner are then left out)."""
        return None if self.keys is None else sorted(int(k) for k in self.keys if k)

    @property
    def names(self) -> list[str]:
        return [name for _key, name, checked in self.choices if checked]

    def query(self) -> str:
        """The filter as a query string (``agent=...&agent=...``), empty for every session."""
        if self.keys is None:
            return ""
        names = self.names or [NO_AGENT_SELECTED]
        return urlencode([("agent", n) for n in names])


NO_OWNER = "(no owner)"  # sessions written without a caller (tests, the bench's direct writes)
NO_AGENT_SELECTED = "-"  # the form sent with every box unchecked: no session at all


def agent_filter(names: list[str], rows) -> AgentFilter:
    """The agents of ``?agent=`` (user names, repeated; none given: every session) among the agents with
    sessions in the rollup ``rows`` the page shows (their ``agents`` keys: no scan of the sessions, one
    query for the names); a name that is not among them is an InputError naming ``agent``."""
    keys = {key for r in rows for key in (r.data.get("agents") or {})}
    ids = [int(k) for k in keys if k.isdigit()]
    users = get_user_model().objects.filter(pk__in=ids).values_list("pk", "username") if ids else []
    known = {name: str(pk) for pk, name in users}
    if "" in keys:
        known[NO_OWNER] = ""
    wanted = [n for n in names if n != NO_AGENT_SELECTED]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise InputError.field("agent", f"No session in these days belongs to {', '.join(map(repr, unknown))}.")
    keys = frozenset(known[n] for n in wanted) if names else None
    if keys is not None and keys == frozenset(known.values()):
        keys = None  # every box checked: every session (a new agent's too)
    choices = tuple((known[n], n, keys is None or known[n] in keys) for n in sorted(known))
    return AgentFilter(keys=keys, choices=choices)


@dataclass
class AgentRow:
    """A DailyMetric's day and data with the session measures summed over the filter's agents."""

    day: date
    data: dict
    computed_at: datetime | None = None


def _combine_scores(parts: list[dict]) -> dict:
    parts = [s for s in parts if s.get("count")]
    count = sum(s["count"] for s in parts)
    if not count:
        return {"count": 0}
    mean = sum(s["mean"] * s["count"] for s in parts) / count
    # The pooled population deviation; percentiles are exact for one agent only.
    square = sum(s["count"] * ((s.get("stddev") or 0.0) ** 2 + s["mean"] ** 2) for s in parts) / count
    one = parts[0] if len(parts) == 1 else {}
    return {
        "count": count,
        "mean": mean,
        "stddev": max(square - mean * mean, 0.0) ** 0.5,
        "p10": one.get("p10"),
        "p50": one.get("p50"),
        "p90": one.get("p90"),
    }


def for_agents(rows, agents: AgentFilter) -> list:
    """The rollup rows as the pages read them: unchanged for every session; with a filter, the scores,
    top-used and outcomes of the selected agents only (a day rolled up before the split has none).
    Weights and weight updates stay graph-wide: every agent reads and moves the same weights."""
    if not agents.active:
        return list(rows)
    out = []
    for r in rows:
        split = r.data.get("agents")
        parts = [v for k, v in (split or {}).items() if k in agents.keys]
        sessions = sum(p["top_used"]["sessions"] for p in parts)
        used = sum(p["top_used"]["used"] for p in parts)
        outcomes: dict[str, int] = {}
        for part in parts:
            for outcome, n in part["outcomes"].items():
                outcomes[outcome] = outcomes.get(outcome, 0) + n
        data = {
            **r.data,
            "scores": _combine_scores([p["scores"] for p in parts]),
            "top_used": {
                "top_k": r.data.get("top_used", {}).get("top_k", TOP_K),
                "sessions": sessions,
                "used": used,
                "fraction": used / sessions if sessions else None,
            },
            "outcomes": outcomes,
            "split": split is not None,
        }
        out.append(AgentRow(day=r.day, data=data, computed_at=getattr(r, "computed_at", None)))
    return out
