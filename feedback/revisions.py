"""Did a policy revision help? Per revision, the share of sessions whose top-ranked items were used while it
was in effect, against the same share under the revision it replaced.

Read from the daily rollups (``DailyMetric.data["top_used"]``), never from raw history on a request. A
revision is *in effect* from the day after it was written to the day its successor was written, both
ends excluded where they are change days: a day on which the policy changed mixes two revisions and
counts for neither. The current revision runs to the last rolled-up day.
"""

from __future__ import annotations

from datetime import date, timedelta

from graphadmin.models import Graph, PolicyRevision

from .metrics import TOP_K
from .models import DailyMetric


def _share(rows: list[DailyMetric], first: date | None, last: date | None) -> dict:
    sessions = used = days = 0
    if first is not None and last is not None and first <= last:
        for r in rows:
            if first <= r.day <= last:
                top = r.data.get("top_used") or {}
                sessions += top.get("sessions", 0)
                used += top.get("used", 0)
                days += 1
    return {
        "first": first,
        "last": last,
        "days": days,
        "sessions": sessions,
        "used": used,
        "fraction": used / sessions if sessions else None,
    }


def revision_effects(graph: Graph) -> list[dict]:
    """One row per revision, newest first: its window in effect, and the top-used share under it and before it.

    ``after`` is the share while the revision was in effect, ``before`` the share under the revision it
    replaced (None for the first), ``change`` their difference when both have sessions.
    """
    revisions = list(PolicyRevision.objects.filter(graph=graph).order_by("revision"))
    rows = list(DailyMetric.objects.filter(graph=graph).order_by("day"))
    last_day = rows[-1].day if rows else None
    windows = []
    for index, rev in enumerate(revisions):
        first = rev.created_at.date() + timedelta(days=1)
        nxt = revisions[index + 1] if index + 1 < len(revisions) else None
        last = nxt.created_at.date() - timedelta(days=1) if nxt else last_day
        windows.append(_share(rows, first, last))
    out = []
    for index, rev in enumerate(revisions):
        after = windows[index]
        before = windows[index - 1] if index else None
        change = (
            after["fraction"] - before["fraction"]
            if before and after["fraction"] is not None and before["fraction"] is not None
            else None
        )
        out.append({"revision": rev, "after": after, "before": before, "change": change, "top_k": TOP_K})
    return out[::-1]
