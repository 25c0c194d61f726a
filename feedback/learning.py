"""Learning at a glance: is the graph getting better at giving agents what they use?

Per UTC week (Monday first), over the sessions whose first injection falls in it, the share whose
top-ranked items were used and their mean outcome score, read from the ledgers (injections, their
candidates, use events, sessions' outcomes) by ``reads.WEEKLY_LEARNING``; with the policy changes
(revisions after the first) and the decay runs of the same weeks, the events that may explain a turn.
Times are the rows' own stamps, so the demo's simulated history reads as the weeks it simulates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from graphadmin.models import Graph

from .metrics import TOP_K
from .queries import reads

WEEKS = 12  # weeks shown, the current one included


@dataclass
class Week:
    """One week's figures; ``share`` and ``mean_score`` are None when there is nothing to divide."""

    start: date
    sessions: int = 0
    used: int = 0
    outcomes: int = 0
    mean_score: float | None = None
    marks: list[dict] = field(default_factory=list)

    @property
    def share(self) -> float | None:
        return self.used / self.sessions if self.sessions else None

    @property
    def end(self) -> date:
        return self.start + timedelta(days=6)


@dataclass
class Learning:
    """The weeks (oldest first) and the marks on their time axis (policy changes, decay runs), in time order."""

    weeks: list[Week]
    marks: list[dict]
    window: int = WEEKS  # weeks looked at (``weeks`` leaves out the empty ones at the start)
    top_k: int = TOP_K

    @property
    def has_sessions(self) -> bool:
        return any(w.sessions for w in self.weeks)


def week_start(day: date) -> date:
    """The Monday of ``day``'s week."""
    return day - timedelta(days=day.weekday())


def weekly(graph: Graph, *, now: datetime | None = None, weeks: int = WEEKS, agents=None) -> Learning:
    """The last ``weeks`` weeks up to ``now`` (default: the real time), each with its figures and marks,
    from the first with a session or a mark on; with ``agents`` (a ``metrics.AgentFilter``), over the
    sessions of those agents only."""
    now = now or datetime.now(UTC)
    first = week_start(now.date()) - timedelta(weeks=weeks - 1)
    since = datetime.combine(first, time.min, tzinfo=UTC)
    until = datetime.combine(week_start(now.date()) + timedelta(weeks=1), time.min, tzinfo=UTC)
    by_start = {first + timedelta(weeks=n): Week(first + timedelta(weeks=n)) for n in range(weeks)}
    owners = agents.owner_ids if agents is not None else None
    unowned = agents is not None and agents.keys is not None and "" in agents.keys
    for start, sessions, used, outcomes, mean_score in reads.weekly_learning(
        graph, since, until, TOP_K, owners, unowned
    ):
        week = by_start[start]
        week.sessions, week.used, week.outcomes, week.mean_score = sessions, used, outcomes, mean_score
    marks = marks_between(graph, since, until)
    for mark in marks:
        by_start[week_start(mark["at"].astimezone(UTC).date())].marks.append(mark)
    weeks_shown = list(by_start.values())
    # Weeks before the graph's first session or mark say nothing (a young graph, a demo's history).
    while len(weeks_shown) > 1 and not (weeks_shown[0].sessions or weeks_shown[0].marks):
        weeks_shown.pop(0)
    return Learning(weeks=weeks_shown, marks=marks, window=weeks)


def marks_between(graph: Graph, since: datetime, until: datetime) -> list[dict]:
    """The policy changes (revisions after the first) and decay runs in [since, until), in time order, each
    as {kind, at, label, text, revision or period}: what the time charts mark."""
    marks = []
    for kind, at, number, note, edges, rolled_back in reads.learning_marks(graph, since, until):
        if kind == "policy":
            text = f"policy r{number}" + (f" ({note})" if note else "")
            marks.append({"kind": kind, "at": at, "label": f"policy r{number}", "text": text, "revision": number})
        else:
            text = f"decay, period {number}: {edges} edge(s)" + (" (rolled back)" if rolled_back else "")
            marks.append({"kind": kind, "at": at, "label": "decay", "text": text, "period": number})
    return marks
