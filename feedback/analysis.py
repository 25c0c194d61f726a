"""The analyst's answer to "is memory getting better?": measures that depend on rank, with their intervals.

Per session (``reads.SESSION_RANKS``): the rank of the first item it used among what it was given. Two
measures follow, both of which move when the right note climbs from rank 3 to rank 1 (the share of sessions
that used any top-3 item does not):

- **MRR**, the mean reciprocal rank of the first used item (1 for rank 1, 1/2 for rank 2, 0 when the session
  used nothing it was given), with a normal 95% interval of the mean;
- **top item used**, the share of sessions whose rank-1 item was used, with Wilson's 95% interval;

and the mean **outcome score** of the sessions with an outcome (normal interval). They are given per week, over
a trailing 7-day window ending each day, and before and after a policy revision over a chosen window, with the
difference's 95% interval (Welch's normal interval for the means, Newcombe's for the share).

The statistics below are pure (numbers in, numbers out); ``load`` reads the sessions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from .queries import reads
from .revisions import Z95, difference_interval, wilson

WINDOWS = (7, 14, 30)  # the before/after windows offered, in days
ROLLING_DAYS = 7


@dataclass(frozen=True)
class SessionRank:
    """One session: when its first retrieval ran, under which policy revision, how it ended, and the rank of
    the first item it used (None: it used nothing it was given)."""

    session_id: int
    external_id: str
    owner_id: int | None
    started: datetime
    outcome: str | None
    outcome_score: float | None
    revision: int | None
    first_used_rank: int | None

    @property
    def reciprocal_rank(self) -> float:
        return 1.0 / self.first_used_rank if self.first_used_rank else 0.0

    @property
    def top_used(self) -> bool:
        return self.first_used_rank == 1


@dataclass(frozen=True)
class Estimate:
    """A mean or a share over ``n`` sessions with its 95% interval (all None when n is 0)."""

    n: int
    value: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Difference:
    """``after - before`` with its 95% interval (None when either side is empty)."""

    value: float | None
    low: float | None
    high: float | None

    @property
    def holds_zero(self) -> bool:
        return self.low is None or self.low <= 0 <= self.high


def mean_estimate(values: Sequence[float], lo: float = 0.0, hi: float = 1.0) -> Estimate:
    """The mean of ``values`` with a normal 95% interval (sample standard deviation), clipped to [lo, hi]."""
    n = len(values)
    if not n:
        return Estimate(0, None, None, None)
    mean = sum(values) / n
    if n == 1:
        return Estimate(1, mean, lo, hi)  # one session says nothing about the spread
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * sd / math.sqrt(n)
    return Estimate(n, mean, max(lo, mean - half), min(hi, mean + half))


def share_estimate(flags: Sequence[bool]) -> Estimate:
    """The share of true ``flags`` with Wilson's 95% interval."""
    n = len(flags)
    if not n:
        return Estimate(0, None, None, None)
    k = sum(1 for f in flags if f)
    low, high = wilson(k, n)
    return Estimate(n, k / n, low, high)


def mean_difference(before: Sequence[float], after: Sequence[float]) -> Difference:
    """``mean(after) - mean(before)`` with Welch's normal 95% interval."""
    if not before or not after:
        return Difference(None, None, None)
    mb, ma = sum(before) / len(before), sum(after) / len(after)

    def var(vs, m):
        return sum((v - m) ** 2 for v in vs) / (len(vs) - 1) if len(vs) > 1 else 0.0

    se = math.sqrt(var(before, mb) / len(before) + var(after, ma) / len(after))
    d = ma - mb
    return Difference(d, d - Z95 * se, d + Z95 * se)


def share_difference(before: Sequence[bool], after: Sequence[bool]) -> Difference:
    """``share(after) - share(before)`` with Newcombe's 95% interval (``revisions.difference_interval``)."""
    interval = difference_interval(sum(after), len(after), sum(before), len(before))
    if interval is None:
        return Difference(None, None, None)
    d = sum(after) / len(after) - sum(before) / len(before)
    return Difference(d, *interval)


@dataclass(frozen=True)
class Period:
    """The three measures over the sessions of one period (a week, or the 7 days ending ``end``)."""

    start: date
    end: date
    mrr: Estimate
    top: Estimate
    outcome: Estimate


def measures(start: date, end: date, sessions: Iterable[SessionRank]) -> Period:
    sessions = list(sessions)
    return Period(
        start,
        end,
        mean_estimate([s.reciprocal_rank for s in sessions]),
        share_estimate([s.top_used for s in sessions]),
        mean_estimate([s.outcome_score for s in sessions if s.outcome_score is not None]),
    )


def _day(s: SessionRank) -> date:
    return s.started.astimezone(UTC).date()


def weekly(sessions: Sequence[SessionRank], first: date, last: date) -> list[Period]:
    """One Period per UTC week (Monday first) from the week of ``first`` to that of ``last``."""
    start = first - timedelta(days=first.weekday())
    by_week: dict[date, list[SessionRank]] = {}
    for s in sessions:
        d = _day(s)
        by_week.setdefault(d - timedelta(days=d.weekday()), []).append(s)
    out = []
    while start <= last:
        out.append(measures(start, start + timedelta(days=6), by_week.get(start, [])))
        start += timedelta(weeks=1)
    return out


def rolling(sessions: Sequence[SessionRank], first: date, last: date, days: int = ROLLING_DAYS) -> list[Period]:
    """One Period per day from ``first`` to ``last``: the sessions of the ``days`` days ending that day."""
    by_day: dict[date, list[SessionRank]] = {}
    for s in sessions:
        by_day.setdefault(_day(s), []).append(s)
    out, day = [], first
    while day <= last:
        window = [s for n in range(days) for s in by_day.get(day - timedelta(days=n), [])]
        out.append(measures(day - timedelta(days=days - 1), day, window))
        day += timedelta(days=1)
    return out


@dataclass(frozen=True)
class BeforeAfter:
    """The sessions of the ``days`` days before a revision took effect and of the ``days`` days from then: each
    measure on both sides and the difference, and the sessions themselves (for the daily series)."""

    revision: int
    at: datetime
    days: int
    before: Period
    after: Period
    mrr: Difference
    top: Difference
    outcome: Difference
    sessions_before: list[SessionRank]
    sessions_after: list[SessionRank]


def before_after(sessions: Sequence[SessionRank], revision: int, at: datetime, days: int) -> BeforeAfter:
    """Split ``sessions`` at ``at`` (the revision's time) into the ``days`` days before and after it."""
    lo, hi = at - timedelta(days=days), at + timedelta(days=days)
    before = [s for s in sessions if lo <= s.started < at]
    after = [s for s in sessions if at <= s.started < hi]

    def scores(group):
        return [s.outcome_score for s in group if s.outcome_score is not None]

    return BeforeAfter(
        revision,
        at,
        days,
        measures(lo.date(), at.date(), before),
        measures(at.date(), hi.date(), after),
        mean_difference([s.reciprocal_rank for s in before], [s.reciprocal_rank for s in after]),
        share_difference([s.top_used for s in before], [s.top_used for s in after]),
        mean_difference(scores(before), scores(after)),
        before,
        after,
    )


def load(graph, since: datetime, until: datetime, agents=None) -> list[SessionRank]:
    """The sessions whose first injection fell in [since, until), with ``agents`` (a ``metrics.AgentFilter``)
    those of the agents chosen."""
    owners = agents.owner_ids if agents is not None else None
    unowned = agents is not None and agents.keys is not None and "" in agents.keys
    return [SessionRank(*row) for row in reads.session_ranks(graph, since, until, owners, unowned)]


def day_bounds(since: date, until: date) -> tuple[datetime, datetime]:
    """[since 00:00, the day after until 00:00) in UTC."""
    return datetime.combine(since, time.min, tzinfo=UTC), datetime.combine(
        until + timedelta(days=1), time.min, tzinfo=UTC
    )
