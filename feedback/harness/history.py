"""The demo's history: agent sessions asking real questions through the real API, over simulated weeks.

``simulate_history`` is what gives the demo graph (``demo.fill_demo_history``) its weeks of sessions,
feedback, decay runs, a policy change and daily roll-ups, every row stamped on a simulated clock
(``graphadmin.clock``) so the dashboard's charts read the weeks it simulates.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

from graphadmin import actions as core_actions
from graphadmin import clock
from graphadmin.models import Graph

from .. import actions, metrics
from ..models import AgentSession
from ..queries import weights
from .agent import agent_reports
from .config import HistoryConfig, Question
from .inprocess import DECAY_ACTOR, api_client, eager_tasks, post
from .report import HistoryReport
from .scoring import mean, ranked_keys, score


def history_end() -> datetime:
    """Where a simulated history ends by default: the start of today (UTC), so every session is in the past."""
    return datetime.combine(datetime.now(UTC).date(), datetime.min.time(), UTC)


def session_times(cfg: HistoryConfig, start: datetime, end: datetime, rng: random.Random) -> list[datetime]:
    """``cfg.sessions`` times between ``start`` and ``end``, in order: evenly spread, each moved by up to
    a third of the gap, on working hours (08:00-18:00 UTC) so the days look like a team's."""
    gap = (end - start) / cfg.sessions
    out = []
    for s in range(cfg.sessions):
        t = start + gap * s + gap * rng.uniform(0.0, 0.33)
        hour = 8 + (t.hour * 60 + t.minute) * 10 / (24 * 60)  # squeeze the day into working hours
        out.append(t.replace(hour=int(hour), minute=int((hour % 1) * 60)))
    return sorted(out)


def _session(client, graph_id: int, sid: str, question: Question, cfg: HistoryConfig, rng, sim, at: datetime):
    """One session of the history at ``at``: context with the question's text, the agent's use report a
    minute later and its outcome at four minutes, on the simulated clock ``sim``; (outcome, hit@5)."""
    body = {"session": sid, "query": question.q, "budget_unit": "items", "budget": cfg.budget}
    items = post(client, f"/api/graphs/{graph_id}/context/", body, "context", (201,)).json()["items"]
    hit5 = score(ranked_keys(items), question.useful)["hit5"]
    uses, outcome = agent_reports(items, question.useful, rng, cfg.negative_rate)
    uses = [u for u in uses if u["signal"] == "negative" or rng.random() >= cfg.p_ignore]
    if uses:
        sim.set(at + timedelta(minutes=1))
        post(client, f"/api/graphs/{graph_id}/sessions/{sid}/uses/", {"items": uses}, "uses", (202,))
    sim.set(at + timedelta(minutes=4))
    post(client, f"/api/graphs/{graph_id}/sessions/{sid}/outcome/", {"outcome": outcome}, "outcome", (200, 202))
    return outcome, hit5


def simulate_history(
    user,
    graph: Graph,
    questions: list[Question],
    cfg: HistoryConfig | None = None,
    *,
    start: datetime,
    end: datetime | None = None,
    policy_change: tuple | None = None,
    progress=None,
) -> HistoryReport:
    """Sessions asking ``questions`` (their text only) between ``start`` and ``end``, on a simulated clock.

    Each session, the way an agent calls the service (``user`` must be an agent, or an operator or above):
    ``context`` with the question's text, no start node and no vector; then its use report
    (``agent.agent_reports``: the given notes that answer the question, now and then one flagged
    ``negative``; each use missed with probability ``p_ignore``) a minute later and its outcome a
    few minutes after that. Every row those requests write (session, injection, use events, batches,
    weight history, audit events) carries the simulated time (``graphadmin.clock``). At each decay
    period boundary on the simulated clock, the decay action runs at that time (only for periods
    already over on the real clock, so the periodic task keeps the current period's run). Then every
    simulated day is rolled up (``metrics.rollup``), which is what the trend charts read.

    The retrieval's traversal stamps (``EdgeStats.last_traversed_at``) carry the simulated time too, so
    a decay run on the simulated clock spares only the edges traversed within its idle window.

    ``policy_change``: ``(actor, changes, note)``, a policy change made halfway (``graphadmin.actions.do_set_policy``,
    a new revision, audited) on the simulated clock, so the policy history has a before and an after.
    """
    cfg = cfg or HistoryConfig()
    end = end or history_end()
    rng = random.Random(cfg.seed)
    client = api_client(user)
    times = session_times(cfg, start, end, rng)
    sim = clock.SimulatedClock(times[0] if times else start)
    now_period = weights.decay_period(graph)[0]
    last_period = weights.decay_period(graph, times[0])[0] if times else now_period
    history = HistoryReport(start=start, end=end)
    hits: list[float] = []
    run = uuid.uuid4().hex[:6]
    with eager_tasks(), clock.using(sim):
        for s, at in enumerate(times):
            period = weights.decay_period(graph, at)[0]
            if cfg.decay and last_period < period < now_period:
                # The periodic decay task's action, at the start of the new period on the simulated clock.
                last_period = period
                sim.set(weights.decay_period(graph, at)[1] + timedelta(minutes=5))
                actions.do_decay(
                    Graph.objects.select_related("organization").get(pk=graph.pk), actor=DECAY_ACTOR, now=sim.at
                )
                history.decay_runs += 1
            if policy_change and s == len(times) // 2:
                actor, changes, note = policy_change
                sim.set(at - timedelta(minutes=30))
                core_actions.do_set_policy(graph, changes, actor=actor, note=note)
            question = questions[rng.randrange(len(questions))]
            sid = f"agent-{at:%Y%m%d}-{run}-{s:03d}"
            sim.set(at)
            outcome, hit5 = _session(client, graph.pk, sid, question, cfg, rng, sim, at)
            hits.append(hit5)
            history.outcomes[outcome] += 1
            history.sessions += 1
            if progress:
                progress(s + 1, at)
        day, last_day = start.date(), end.date()
        while day <= last_day:
            metrics.rollup(graph, day)
            history.days += 1
            day += timedelta(days=1)
    tenth = max(1, len(hits) // 10)
    history.hit5_first, history.hit5_last = mean(hits[:tenth]), mean(hits[-tenth:])
    return history


def simulated_sessions(graph: Graph) -> int:
    """How many sessions a graph has (the demo fill runs only on a graph without any)."""
    return AgentSession.objects.filter(graph=graph).count()
