"""Does the graph learn? Simulated agent sessions through the real API, against a hidden ground truth.

A *world* is a graph whose notes are grouped in topics: each topic has an anchor note (the note an
agent starts from for a question on that topic, e.g. the project's index page) with an edge to every
note of the topic. Every question belongs to a topic; its vector is the topic's direction plus
noise, so vector similarity tells the agent *which topic* a note belongs to but not *whether it is
useful*: the hidden ground truth (a few useful notes per topic and project phase, of which each
question needs some) is known only to the simulator.

One session, the way an agent calls the service: the question only (no start node, no anchor:
the simulator never hands the service anything from its ground truth):

1. ``POST /api/graphs/{id}/context/`` with the question vector and a budget in items. The assembled
   context is scored: hit@5 (a useful note among the first five items) and reciprocal rank of the
   first useful note.
2. ``POST .../sessions/{sid}/uses/``: the useful notes it was given (the service credits the path
   that surfaced each), each ignored with probability ``p_ignore``; with probability ``p_negative``
   one useless note it was given is flagged ``negative``.
3. ``POST .../sessions/{sid}/outcome/``: accepted when it found at least ``need`` useful notes,
   rework when it found some, rejected when none (flipped to a random outcome with ``p_outcome_noise``).

The reports answer 202 and run on Celery. For the simulation, tasks run eagerly (Celery's
``task_always_eager``, set on this process's app only by :func:`eager_tasks`): the same task
function and the same ``feedback.actions`` call as on a worker, inline after the request commits.

A *frozen* twin of the world (same notes, edges, weights and embeddings, built from the same seed)
receives the same questions through the same context endpoint but no reports: the policy without
feedback. Halfway the ground truth shifts (a project phase ends: other notes of each topic become
the useful ones). Time is simulated: ``sessions_per_day`` sessions make a day, and at every period
boundary the decay action (``feedback.actions.do_decay``) runs with ``now`` on the simulated clock.
Caveat: traversal stamps are written by the database with the real clock (the simulation's minutes),
so on the simulated clock every edge counts as not traversed in the period and each decay run
multiplies *every* weight above the floor by the decay rate, a stronger decay than in production.
"""

from __future__ import annotations

import math
import random
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Q
from rest_framework.test import APIClient

from graphadmin import actions as core_actions
from graphadmin import audit, clock
from graphadmin.celery import app as celery_app
from graphadmin.models import Edge, EdgeType, Graph, Membership, Node, Organization

from . import actions, metrics, queries
from .evaluation import Question, agent_reports
from .models import AgentSession

ACTOR = "task:simulation.decay"


@dataclass
class Topic:
    """A topic of a world: its anchor node, its notes (in a stable order) and its direction."""

    anchor: int
    notes: list[int]
    edges: dict[int, int]  # note id -> id of the anchor's edge to it
    direction: list[float]


@dataclass
class Config:
    """Knobs of the simulation (the policy's own numbers are the graph's policy)."""

    # The run: how many sessions, when the ground truth shifts (None: never), sessions per reported block.
    sessions: int = 1000
    shift_at: int | None = 500
    block: int = 50
    # The hidden ground truth: useful notes per topic and phase; a question needs ``need + 1`` of them,
    # and the agent accepts with ``need`` found.
    useful_per_topic: int = 4
    need: int = 2
    # The agent: its context budget (items) and its noise.
    budget: int = 6
    p_ignore: float = 0.15
    p_negative: float = 0.2
    p_outcome_noise: float = 0.05
    question_noise: float = 0.5
    # The simulated clock: sessions per day; decay runs at every period boundary when ``decay``.
    sessions_per_day: int = 20
    decay: bool = True
    seed: int = 11


@dataclass
class SessionScore:
    hit5: float
    rr: float


@dataclass
class Block:
    """One block of sessions: mean hit@5 and MRR for the learning and the frozen graph."""

    start: int
    end: int
    phase: int
    hit5: float
    mrr: float
    frozen_hit5: float | None = None
    frozen_mrr: float | None = None


@dataclass
class Report:
    config: dict
    blocks: list[Block] = field(default_factory=list)
    decay_runs: int = 0
    outcomes: dict = field(default_factory=dict)

    def targets(self) -> dict:
        """The issue's two targets, measured on the blocks (None where the run is too short to say)."""
        cfg = self.config
        shift = cfg["shift_at"] or cfg["sessions"]
        pre = [b for b in self.blocks if b.end <= shift]
        # "After 500 sessions": the last 100 sessions up to session 500 (or the shift, if earlier); one block
        # of 50 sessions is too noisy a sample for the frozen policy (about +-7 points).
        end = min(500, shift)
        window = [b for b in pre if end - 100 < b.end <= end and b.frozen_hit5 is not None]
        gain = (_mean(b.hit5 for b in window) - _mean(b.frozen_hit5 for b in window)) if window else None
        out = {
            "gain_at_500": gain,
            "gain_window": [window[0].start, window[-1].end] if window else None,
            "learning_hit5_at_500": _mean(b.hit5 for b in window) if window else None,
            "frozen_hit5_at_500": _mean(b.frozen_hit5 for b in window) if window else None,
        }
        if cfg["shift_at"] and pre:
            level = pre[-1].hit5
            post = [b for b in self.blocks if b.start >= shift]
            back = next((b for b in post if b.hit5 >= level - 0.05), None)
            best = max(post, key=lambda b: b.hit5) if post else None
            out.update(
                {
                    "pre_shift_level": level,
                    "recovered_after": None if back is None else back.end - shift,
                    "best_post_shift": None if best is None else best.hit5,
                    "best_post_shift_after": None if best is None else best.end - shift,
                }
            )
        return out

    def as_dict(self) -> dict:
        return {
            "config": self.config,
            "blocks": [asdict(b) for b in self.blocks],
            "decay_runs": self.decay_runs,
            "outcomes": self.outcomes,
            "targets": self.targets(),
        }

    def table(self) -> str:
        lines = [
            "| sessions | phase | hit@5 learning | hit@5 frozen | MRR learning | MRR frozen |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for b in self.blocks:
            fh = "" if b.frozen_hit5 is None else f"{b.frozen_hit5:.2f}"
            fm = "" if b.frozen_mrr is None else f"{b.frozen_mrr:.2f}"
            lines.append(f"| {b.start + 1}-{b.end} | {b.phase} | {b.hit5:.2f} | {fh} | {b.mrr:.2f} | {fm} |")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Worlds


def _unit(v):
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def _noisy(rng: random.Random, base, sigma: float):
    d = len(base)
    return _unit([b + rng.gauss(0.0, sigma / math.sqrt(d)) for b in base])


def build_world(
    actor, organization, slug: str, *, topics: int = 8, notes_per_topic: int = 24, seed: int = 3
) -> tuple[Graph, list[Topic]]:
    """A new graph of ``topics`` topics (anchor + notes, the anchor linked to each note), deterministic in ``seed``.

    Two worlds built with the same seed are identical but for their ids (the frozen twin).
    Initial weights are spread (uniform in [0.3, 0.7]) as in a graph that has lived a while;
    edges also link notes within a topic (``related``) so the shape is not a star only.
    """
    rng = random.Random(seed)
    dim = settings.EMBEDDING_DIM
    with transaction.atomic():
        graph = core_actions.do_create_graph(
            organization,
            slug,
            f"Simulation world {slug}",
            "Simulated agent sessions (feedback.simulation).",
            actor=actor,
        )
        types = {t.name: t for t in EdgeType.objects.filter(graph=graph)}
        shared = [rng.gauss(0, 1) for _ in range(dim)]
        plan = []
        nodes = []
        for t in range(topics):
            direction = _unit([0.5 * s + rng.gauss(0, 1) for s in shared])
            nodes.append(
                Node(
                    graph=graph,
                    key=f"topic-{t}/index",
                    kind="note",
                    title=f"Topic {t}: index",
                    text=f"Index of topic {t}.",
                    embedding=direction,
                    source="simulation",
                )
            )
            for j in range(notes_per_topic):
                kind = rng.choice(["note", "decision", "observation"])
                nodes.append(
                    Node(
                        graph=graph,
                        key=f"topic-{t}/note-{j}",
                        kind=kind,
                        title=f"Topic {t}, {kind} {j}",
                        text=f"{kind} {j} of topic {t}.",
                        embedding=_noisy(rng, direction, 0.8),
                        source="simulation",
                    )
                )
            plan.append(direction)
        Node.objects.bulk_create(nodes)
        by_key = dict(Node.objects.filter(graph=graph).values_list("key", "id"))
        edges = []
        type_names = ["related", "derived_from", "depends_on"]
        for t in range(topics):
            anchor = by_key[f"topic-{t}/index"]
            for j in range(notes_per_topic):
                edges.append(
                    Edge(
                        graph=graph,
                        source_id=anchor,
                        target_id=by_key[f"topic-{t}/note-{j}"],
                        edge_type=types[rng.choice(type_names)],
                        weight=rng.uniform(0.3, 0.7),
                        feedback_weight=rng.uniform(0.4, 0.6),
                    )
                )
            for j in range(notes_per_topic):
                k = rng.randrange(notes_per_topic)
                if k != j:
                    edges.append(
                        Edge(
                            graph=graph,
                            source_id=by_key[f"topic-{t}/note-{j}"],
                            target_id=by_key[f"topic-{t}/note-{k}"],
                            edge_type=types["related"],
                            weight=rng.uniform(0.3, 0.7),
                        )
                    )
        Edge.objects.bulk_create(edges, ignore_conflicts=True)
        # Its records are bulk-created, not one do_create_record each: one event says what was made.
        audit.append(
            organization,
            actor,
            "graph.simulation.build",
            {
                "nodes": Node.objects.filter(graph=graph).count(),
                "edges": Edge.objects.filter(graph=graph).count(),
                "topics": topics,
                "seed": seed,
            },
            scope={"graph": graph.pk, "graph_slug": graph.slug},
        )
    return graph, topics_of(graph, [f"topic-{t}/index" for t in range(topics)], directions=plan)


def topics_of(graph: Graph, anchor_keys: list[str], *, directions=None, min_notes: int = 4) -> list[Topic]:
    """The topics of a graph given their anchors: each anchor's active out-neighbours, in key order.

    Without ``directions`` a topic's direction is its anchor's embedding (for graphs the simulator did
    not build, like the demo graph)."""
    out = []
    for index, key in enumerate(anchor_keys):
        anchor = Node.objects.get(graph=graph, key=key)
        rows = list(
            Edge.objects.filter(graph=graph, source=anchor, archived=False, target__archived=False)
            .order_by("target__key", "id")
            .values_list("target_id", "id")
        )
        edges = {}
        for target, edge in rows:
            edges.setdefault(target, edge)
        if len(edges) < min_notes:
            continue
        direction = directions[index] if directions else [float(x) for x in anchor.embedding]
        out.append(Topic(anchor.pk, list(edges), edges, direction))
    return out


def hub_anchor_keys(graph: Graph, *, topics: int = 6, min_notes: int = 4) -> list[str]:
    """Keys of the graph's best-connected nodes (most active out-edges), as topic anchors for an existing graph."""
    rows = (
        Node.objects.filter(graph=graph, archived=False, embedding__isnull=False)
        .annotate(n=Count("out_edges", filter=Q(out_edges__archived=False)))
        .filter(n__gte=min_notes)
        .order_by("-n", "key")
        .values_list("key", flat=True)[:topics]
    )
    return list(rows)


# --------------------------------------------------------------------------------------------------
# Sessions


@contextmanager
def eager_tasks():
    """Run Celery tasks inline in this process (the simulation only): same tasks, same actions, no worker."""
    conf = celery_app.conf
    before = conf.task_always_eager, conf.task_eager_propagates
    conf.task_always_eager, conf.task_eager_propagates = True, True
    try:
        yield
    finally:
        conf.task_always_eager, conf.task_eager_propagates = before


def api_client(user):
    """An in-process DRF client authenticated as ``user`` (the real views, middleware and database)."""
    hosts = settings.ALLOWED_HOSTS
    host = "localhost" if ("localhost" in hosts or "*" in hosts or not hosts) else hosts[0].lstrip(".")
    client = APIClient(HTTP_HOST=host)
    client.force_authenticate(user)
    return client


class Ground:
    """The hidden ground truth: per topic and phase, the indexes (into ``Topic.notes``) of the useful notes."""

    def __init__(self, topics: list[Topic], per_topic: int, rng: random.Random):
        self.phases = []
        for _phase in range(2):
            chosen = []
            for i, t in enumerate(topics):
                taken = set(self.phases[0][i]) if self.phases else set()
                pool = [j for j in range(len(t.notes)) if j not in taken]
                chosen.append(rng.sample(pool, min(per_topic, len(pool))))
            self.phases.append(chosen)


def _score(items: list[dict], useful: set[int]) -> SessionScore:
    order = [i["node"] for i in sorted(items, key=lambda i: i["rank"])]
    hit5 = 1.0 if any(n in useful for n in order[:5]) else 0.0
    rr = next((1.0 / p for p, n in enumerate(order, start=1) if n in useful), 0.0)
    return SessionScore(hit5, rr)


def _context(client, graph_id: int, sid: str, vector, budget: int) -> list[dict]:
    """The agent's call: the question (here its vector) only."""
    r = client.post(
        f"/api/graphs/{graph_id}/context/",
        {"session": sid, "vector": vector, "budget_unit": "items", "budget": budget},
        format="json",
    )
    if r.status_code != 201:
        raise RuntimeError(f"context: {r.status_code} {r.content[:300]!r}")
    return r.json()["items"]


def simulate(
    user,
    world: tuple[Graph, list[Topic]],
    frozen: tuple[Graph, list[Topic]] | None = None,
    cfg: Config | None = None,
    *,
    progress=None,
    start: datetime | None = None,
) -> Report:
    """Run ``cfg.sessions`` sessions on ``world`` (and the same questions, without reports, on ``frozen``).

    ``user`` must be a member of the graphs' organization with a role that logs context and reports
    (``agent``, or operator and up): its sessions are its own. Returns the per-block report.
    """
    cfg = cfg or Config()
    graph, topics = world
    rng = random.Random(cfg.seed)
    ground = Ground(topics, cfg.useful_per_topic, rng)
    client = api_client(user)
    start = start or datetime.now(UTC)
    period_days = graph.current_policy().decay_period_days
    report = Report(config=asdict(cfg))
    report.outcomes = {"accepted": 0, "rework": 0, "rejected": 0}
    learn_scores, frozen_scores = [], []
    run = uuid.uuid4().hex[:8]
    last_period = 0
    with eager_tasks():
        for s in range(cfg.sessions):
            phase = 1 if cfg.shift_at is not None and s >= cfg.shift_at else 0
            day = s // cfg.sessions_per_day
            period = day // period_days
            if cfg.decay and period > last_period:
                last_period = period
                # The periodic decay task's action, on the simulated clock.
                actions.do_decay(
                    Graph.objects.select_related("organization").get(pk=graph.pk),
                    actor=ACTOR,
                    now=start + timedelta(days=period * period_days),
                )
                report.decay_runs += 1
            ti = rng.randrange(len(topics))
            topic = topics[ti]
            useful_idx = ground.phases[phase][ti]
            question = rng.sample(useful_idx, min(cfg.need + 1, len(useful_idx)))  # the notes this question needs
            vector = _noisy(rng, topic.direction, cfg.question_noise)
            sid = f"sim-{run}-{s}"
            useful = {topic.notes[j] for j in question}
            items = _context(client, graph.pk, sid, vector, cfg.budget)
            learn_scores.append(_score(items, useful))
            if frozen is not None:
                fgraph, ftopics = frozen
                fitems = _context(client, fgraph.pk, sid, vector, cfg.budget)
                frozen_scores.append(_score(fitems, {ftopics[ti].notes[j] for j in question}))
            # The agent: uses the useful notes it was given (sometimes misses one), sometimes flags a useless one.
            found = [i for i in items if i["node"] in useful]
            used = [i for i in found if rng.random() >= cfg.p_ignore]
            reports = [{"node": i["node"], "signal": "explicit"} for i in used]
            useless = [i for i in items if i["node"] not in useful]
            if useless and rng.random() < cfg.p_negative:
                reports.append({"node": rng.choice(useless)["node"], "signal": "negative"})
            if reports:
                r = client.post(f"/api/graphs/{graph.pk}/sessions/{sid}/uses/", {"items": reports}, format="json")
                if r.status_code != 202:
                    raise RuntimeError(f"uses: {r.status_code} {r.content[:300]!r}")
            outcome = "accepted" if len(found) >= cfg.need else ("rework" if found else "rejected")
            if rng.random() < cfg.p_outcome_noise:
                outcome = rng.choice(["accepted", "rework", "rejected"])
            report.outcomes[outcome] += 1
            r = client.post(f"/api/graphs/{graph.pk}/sessions/{sid}/outcome/", {"outcome": outcome}, format="json")
            if r.status_code not in (200, 202):
                raise RuntimeError(f"outcome: {r.status_code} {r.content[:300]!r}")
            if (s + 1) % cfg.block == 0 or s + 1 == cfg.sessions:
                b0 = s + 1 - len(learn_scores)
                block = Block(b0, s + 1, phase, _mean(x.hit5 for x in learn_scores), _mean(x.rr for x in learn_scores))
                if frozen_scores:
                    block.frozen_hit5, block.frozen_mrr = (
                        _mean(x.hit5 for x in frozen_scores),
                        _mean(x.rr for x in frozen_scores),
                    )
                report.blocks.append(block)
                learn_scores, frozen_scores = [], []
                if progress:
                    progress(block)
    return report


@dataclass
class HistoryConfig:
    """A history of agent sessions asking real questions, spread over simulated weeks (the demo's)."""

    sessions: int = 160
    weeks: int = 9
    budget: int = 5
    negative_rate: float = 0.2
    p_ignore: float = 0.1
    decay: bool = True
    seed: int = 5


@dataclass
class History:
    """What :func:`simulate_history` did: sessions, outcomes, decay runs, the days rolled up, the span."""

    sessions: int = 0
    outcomes: dict = field(default_factory=lambda: {"accepted": 0, "rework": 0, "rejected": 0})
    decay_runs: int = 0
    days: int = 0
    start: datetime | None = None
    end: datetime | None = None
    hit5_first: float = 0.0
    hit5_last: float = 0.0


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
) -> History:
    """Sessions asking ``questions`` (their text only) between ``start`` and ``end``, on a simulated clock.

    Each session, the way an agent calls the service (``user`` must be an agent, or an operator or above):
    ``context`` with the question's text, no start node and no vector; then its use report
    (``evaluation.agent_reports``: the given notes that answer the question, now and then one flagged
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
    now_period = queries.decay_period(graph)[0]
    last_period = queries.decay_period(graph, times[0])[0] if times else now_period
    history = History(start=start, end=end)
    hits: list[float] = []
    run = uuid.uuid4().hex[:6]
    with eager_tasks(), clock.using(sim):
        for s, at in enumerate(times):
            period = queries.decay_period(graph, at)[0]
            if cfg.decay and last_period < period < now_period:
                # The periodic decay task's action, at the start of the new period on the simulated clock.
                last_period = period
                sim.set(queries.decay_period(graph, at)[1] + timedelta(minutes=5))
                actions.do_decay(Graph.objects.select_related("organization").get(pk=graph.pk), actor=ACTOR, now=sim.at)
                history.decay_runs += 1
            if policy_change and s == len(times) // 2:
                actor, changes, note = policy_change
                sim.set(at - timedelta(minutes=30))
                core_actions.do_set_policy(graph, changes, actor=actor, note=note)
            question = questions[rng.randrange(len(questions))]
            sid = f"agent-{at:%Y%m%d}-{run}-{s:03d}"
            sim.set(at)
            r = client.post(
                f"/api/graphs/{graph.pk}/context/",
                {"session": sid, "query": question.q, "budget_unit": "items", "budget": cfg.budget},
                format="json",
            )
            if r.status_code != 201:
                raise RuntimeError(f"context: {r.status_code} {r.content[:300]!r}")
            items = r.json()["items"]
            keys = list(dict.fromkeys(i["key"] for i in sorted(items, key=lambda i: i["rank"])))
            hits.append(1.0 if set(keys[:5]) & set(question.useful) else 0.0)
            uses, outcome = agent_reports(items, question.useful, rng, cfg.negative_rate)
            uses = [u for u in uses if u["signal"] == "negative" or rng.random() >= cfg.p_ignore]
            if uses:
                sim.set(at + timedelta(minutes=1))
                r = client.post(f"/api/graphs/{graph.pk}/sessions/{sid}/uses/", {"items": uses}, format="json")
                if r.status_code != 202:
                    raise RuntimeError(f"uses: {r.status_code} {r.content[:300]!r}")
            sim.set(at + timedelta(minutes=4))
            r = client.post(f"/api/graphs/{graph.pk}/sessions/{sid}/outcome/", {"outcome": outcome}, format="json")
            if r.status_code not in (200, 202):
                raise RuntimeError(f"outcome: {r.status_code} {r.content[:300]!r}")
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
    history.hit5_first, history.hit5_last = _mean(hits[:tenth]), _mean(hits[-tenth:])
    return history


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def simulated_sessions(graph: Graph) -> int:
    """How many sessions a graph has (the demo fill runs only on a graph without any)."""
    return AgentSession.objects.filter(graph=graph).count()


# --------------------------------------------------------------------------------------------------
# Running it: a fresh world and its frozen twin, and the plots


def run_experiment(
    cfg: Config,
    *,
    topics: int = 8,
    notes_per_topic: int = 24,
    policy: dict | None = None,
    world_seed: int = 3,
    progress=None,
) -> Report:
    """Build a world and its frozen twin in the ``simulation`` organization, then :func:`simulate` on both.

    ``policy``: policy numbers to set on both graphs first (one new revision each, audited).
    The service account ``sim-agent`` (role agent) drives the sessions; ``sim-admin`` creates the graphs.
    """
    User = get_user_model()
    org, _ = Organization.objects.get_or_create(slug="simulation", defaults={"name": "Simulation"})
    users = {}
    for role in ("admin", "agent"):
        users[role], _ = User.objects.get_or_create(username=f"sim-{role}")
        Membership.objects.update_or_create(user=users[role], organization=org, defaults={"role": role})
    tag = uuid.uuid4().hex[:6]
    worlds = []
    for name in ("learning", "frozen"):
        graph, graph_topics = build_world(
            users["admin"], org, f"{name}-{tag}", topics=topics, notes_per_topic=notes_per_topic, seed=world_seed
        )
        if policy:
            core_actions.do_set_policy(graph, policy, actor=users["admin"], note="simulation policy")
        worlds.append((graph, graph_topics))
    report = simulate(users["agent"], worlds[0], worlds[1], cfg, progress=progress)
    report.config.update(
        {
            "topics": topics,
            "notes_per_topic": notes_per_topic,
            "policy": policy or {},
            "learning_graph": worlds[0][0].pk,
            "frozen_graph": worlds[1][0].pk,
        }
    )
    return report


def write_plots(report: Report, png_path, html_path) -> None:
    """hit@5 and MRR per block, learning against frozen, as a PNG (matplotlib) and a static HTML (plotly).

    The HTML loads ``plotly.min.js`` from its own folder (copied there from the installed plotly package)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plotly
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    x = [b.end for b in report.blocks]
    series = {
        "hit@5, learning": [b.hit5 for b in report.blocks],
        "hit@5, frozen": [b.frozen_hit5 for b in report.blocks],
        "MRR, learning": [b.mrr for b in report.blocks],
        "MRR, frozen": [b.frozen_mrr for b in report.blocks],
    }
    shift = report.config.get("shift_at")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for ax, metric in zip(axes, ("hit@5", "MRR"), strict=True):
        for who, style in (("learning", "-o"), ("frozen", "--s")):
            ax.plot(x, series[f"{metric}, {who}"], style, label=who, markersize=3)
        if shift:
            ax.axvline(shift, color="grey", linestyle=":", label="ground truth shifts")
        ax.set_title(f"{metric} of useful notes in the assembled context")
        ax.set_xlabel("sessions (end of block)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)

    pfig = make_subplots(rows=1, cols=2, subplot_titles=("hit@5", "MRR"))
    for col, metric in ((1, "hit@5"), (2, "MRR")):
        for who, dash in (("learning", "solid"), ("frozen", "dash")):
            pfig.add_trace(
                go.Scatter(x=x, y=series[f"{metric}, {who}"], name=f"{metric}, {who}", line={"dash": dash}),
                row=1,
                col=col,
            )
        if shift:
            pfig.add_vline(x=shift, line_dash="dot", line_color="grey", row=1, col=col)
    pfig.update_yaxes(range=[0, 1.02])
    pfig.update_layout(
        title=(
            "Does the graph learn? Learning policy against frozen (no feedback); "
            "the ground truth shifts at the dotted line"
        ),
        height=450,
    )
    html_path = Path(html_path)
    pfig.write_html(html_path, include_plotlyjs="plotly.min.js", full_html=True)
    shutil.copyfile(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", html_path.parent / "plotly.min.js")
