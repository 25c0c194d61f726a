"""Did a policy revision help? Per revision, the share of sessions whose top-ranked items were used while it
was in effect, against the same share under the revision it replaced.

Read from the daily rollups (``DailyMetric.data["top_used"]``), never from raw history on a request. A
revision is *in effect* from the day after it was written to the day its successor was written, both
ends excluded where they are change days: a day on which the policy changed mixes two revisions and
counts for neither. The current revision runs to the last rolled-up day.
"""

from __future__ import annotations

import math
from datetime import date, timedelta

from graphadmin.models import EdgeType, Graph, PolicyRevision
from graphadmin.models.policy import revision_changes

from .metrics import TOP_K, for_agents
from .models import DailyMetric

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


def wilson(used: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``used / n`` (n > 0)."""
    p = used / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def difference_interval(used_a: int, n_a: int, used_b: int, n_b: int, z: float = Z95) -> tuple[float, float] | None:
    """The 95% interval of ``used_a / n_a - used_b / n_b`` by Newcombe's hybrid score method (his method 10,
    from the two Wilson intervals): unlike the textbook normal interval it stays inside [-1, 1] and keeps
    its coverage at the small counts a week of sessions gives. None when either side has no session."""
    if not n_a or not n_b:
        return None
    p1, p2 = used_a / n_a, used_b / n_b
    (l1, u1), (l2, u2) = wilson(used_a, n_a, z), wilson(used_b, n_b, z)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


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


def revision_effects(graph: Graph, agents=None) -> list[dict]:
    """One row per revision, newest first: its window in effect, and the top-used share under it and before it
    (over the sessions of ``agents``, a ``metrics.AgentFilter``, when given).

    ``after`` is the share while the revision was in effect, ``before`` the share under the revision it
    replaced (None for the first), ``change`` their difference when both have sessions, ``interval`` its
    95% interval (``difference_interval``) and ``inconclusive`` whether that interval holds 0; ``changes``
    what the revision changed (policy numbers and edge-type priorities, ``revision_changes``).
    """
    revisions = list(PolicyRevision.objects.filter(graph=graph).order_by("revision"))
    names = dict(EdgeType.objects.filter(graph=graph).values_list("pk", "name"))
    rows = list(DailyMetric.objects.filter(graph=graph).order_by("day"))
    if agents is not None:
        rows = for_agents(rows, agents)  # the sessions of the filter's agents only
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
        interval = (
            difference_interval(after["used"], after["sessions"], before["used"], before["sessions"])
            if change is not None
            else None
        )
        out.append(
            {
                "revision": rev,
                "changes": revision_changes(revisions[index - 1] if index else None, rev, names),
                "after": after,
                "before": before,
                "change": change,
                "interval": interval,
                # The interval holds 0: these sessions cannot tell the change from no change.
                "inconclusive": interval is not None and interval[0] <= 0 <= interval[1],
                "top_k": TOP_K,
            }
        )
    return out[::-1]
