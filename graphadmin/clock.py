"""The time the write paths stamp on their rows: the real clock, or a simulated one the caller passes.

Every row that records *when* something happened (a session's start, an injection, a use event, an
update batch and its weight history, an audit event) takes its time from :func:`now`. In production
that is ``datetime.now(UTC)``. A simulation that replays weeks of agent sessions in a minute (the
demo history, ``feedback.harness.history``) passes its own clock for the duration of a block of work
with :func:`using`; the rows it writes then carry the simulated time. The clock is held in a context
variable, so it is seen by the code running in this thread (the in-process API client and Celery's
eager tasks) and by nothing else: no request can set it, and a worker process never sees it.

Audit events stay in ``seq`` order (the chain is ordered by seq, not by time), so a simulated time
earlier than an existing event's does not break the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime, timedelta

_clock: ContextVar[Callable[[], datetime] | None] = ContextVar("graphadmin_clock", default=None)


def now() -> datetime:
    """The current time (UTC, aware): the clock passed with :func:`using`, else the real one."""
    clock = _clock.get()
    return clock() if clock is not None else datetime.now(UTC)


class SimulatedClock:
    """A clock that stands still until moved: ``set`` it to a time, or ``advance`` it.

    Each read returns the set time plus one microsecond per earlier read since the last ``set``, so
    rows written one after the other keep their order (as they would on the real clock).
    """

    def __init__(self, start: datetime):
        self.set(start)

    def set(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("a simulated time must be timezone-aware")
        self._at, self._reads = when, 0

    def advance(self, delta: timedelta) -> None:
        self.set(self._at + delta)

    @property
    def at(self) -> datetime:
        return self._at

    def __call__(self) -> datetime:
        self._reads += 1
        return self._at + timedelta(microseconds=self._reads)


@contextmanager
def using(clock: Callable[[], datetime]) -> Iterator[Callable[[], datetime]]:
    """Stamp every row written inside the block with ``clock()`` instead of the real time."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)
