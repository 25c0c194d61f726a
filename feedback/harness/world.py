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

The reports answer 202 and run on Celery. For the simulation, tasks run eagerly
(``inprocess.eager_tasks``): the same task function and the same ``feedback.actions`` call as on a
worker, inline after the request commits.

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
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from graphadmin import actions as core_actions
from graphadmin import audit
from graphadmin.models import Edge, EdgeType, Graph, Membership, Node, Organization

from .. import actions
from .config import WorldConfig
from .inprocess import DECAY_ACTOR, api_client, eager_tasks, post
from .report import Block, WorldReport
from .scoring import mean, reciprocal_rank, score


@dataclass
class Topic:
    """A topic of a world: its anchor node, its notes (in a stable order) and its direction."""

    anchor: int
    notes: list[int]
    edges: dict[int, int]  # note id -> id of the anchor's edge to it
    direction: list[float]


# --------------------------------------------------------------------------------------------------
# Worlds


def _unit(v):
    n = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / n for x in v]


def _noisy(rng: random.Random, base, sigma: float):
    d = len(base)
    return _unit([b + rng.gauss(0.0, sigma / math.sqrt(d)) for b in base])


def _world_nodes(graph: Graph, rng: random.Random, topics: int, notes_per_topic: int):
    """The world's nodes (each topic's anchor, then its notes) and each topic's direction, drawn from ``rng``."""
    shared = [rng.gauss(0, 1) for _ in range(settings.EMBEDDING_DIM)]
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
    return nodes, plan


def _world_edges(graph: Graph, rng: random.Random, by_key: dict, types: dict, topics: int, notes_per_topic: int):
    """The world's edges: each anchor to each of its notes (a random type), and one ``related`` edge from
    each note to another of its topic, with spread weights drawn from ``rng``."""
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
    return edges


def build_world(
    actor, organization, slug: str, *, topics: int = 8, notes_per_topic: int = 24, seed: int = 3
) -> tuple[Graph, list[Topic]]:
    """A new graph of ``topics`` topics (anchor + notes, the anchor linked to each note), deterministic in ``seed``.

    Two worlds built with the same seed are identical but for their ids (the frozen twin).
    Initial weights are spread (uniform in [0.3, 0.7]) as in a graph that has lived a while;
    edges also link notes within a topic (``related``) so the shape is not a star only.
    """
    rng = random.Random(seed)
    with transaction.atomic():
        graph = core_actions.do_create_graph(
            organization,
            slug,
            f"Simulation world {slug}",
            "Simulated agent sessions (feedback.harness.world).",
            actor=actor,
        )
        types = {t.name: t for t in EdgeType.objects.filter(graph=graph)}
        nodes, plan = _world_nodes(graph, rng, topics, notes_per_topic)
        Node.objects.bulk_create(nodes)
        by_key = dict(Node.objects.filter(graph=graph).values_list("key", "id"))
        edges = _world_edges(graph, rng, by_key, types, topics, notes_per_topic)
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


# --------------------------------------------------------------------------------------------------
# Sessions


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


def _score(items: list[dict], useful: set[int]) -> dict:
    """hit@5 and the reciprocal rank (not cut at 5) of one context answer's items, by node id in rank order."""
    order = [i["node"] for i in sorted(items, key=lambda i: i["rank"])]
    return {"hit5": score(order, useful)["hit5"], "rr": reciprocal_rank(order, useful)}


def _context(client, graph_id: int, sid: str, vector, budget: int) -> list[dict]:
    """The agent's call: the question (here its vector) only."""
    body = {"session": sid, "vector": vector, "budget_unit": "items", "budget": budget}
    return post(client, f"/api/graphs/{graph_id}/context/", body, "context", (201,)).json()["items"]


def _agent_reports(client, graph_id: int, sid: str, items: list[dict], useful: set[int], cfg: WorldConfig, rng) -> str:
    """The world's agent after one context answer: uses the useful notes it was given (sometimes misses
    one), sometimes flags a useless one, then reports an outcome (now and then a random one); returns it."""
    found = [i for i in items if i["node"] in useful]
    used = [i for i in found if rng.random() >= cfg.p_ignore]
    reports = [{"node": i["node"], "signal": "explicit"} for i in used]
    useless = [i for i in items if i["node"] not in useful]
    if useless and rng.random() < cfg.p_negative:
        reports.append({"node": rng.choice(useless)["node"], "signal": "negative"})
    if reports:
        post(client, f"/api/graphs/{graph_id}/sessions/{sid}/uses/", {"items": reports}, "uses", (202,))
    outcome = "accepted" if len(found) >= cfg.need else ("rework" if found else "rejected")
    if rng.random() < cfg.p_outcome_noise:
        outcome = rng.choice(["accepted", "rework", "rejected"])
    post(client, f"/api/graphs/{graph_id}/sessions/{sid}/outcome/", {"outcome": outcome}, "outcome", (200, 202))
    return outcome


def _block(end: int, phase: int, learn_scores: list[dict], frozen_scores: list[dict]) -> Block:
    """The block of sessions ending at ``end``: mean hit@5 and MRR, learning and (when asked) frozen."""
    block = Block(
        end - len(learn_scores),
        end,
        phase,
        mean(x["hit5"] for x in learn_scores),
        mean(x["rr"] for x in learn_scores),
    )
    if frozen_scores:
        block.frozen_hit5 = mean(x["hit5"] for x in frozen_scores)
        block.frozen_mrr = mean(x["rr"] for x in frozen_scores)
    return block


def simulate(
    user,
    world: tuple[Graph, list[Topic]],
    frozen: tuple[Graph, list[Topic]] | None = None,
    cfg: WorldConfig | None = None,
    *,
    progress=None,
    start: datetime | None = None,
) -> WorldReport:
    """Run ``cfg.sessions`` sessions on ``world`` (and the same questions, without reports, on ``frozen``).

    ``user`` must be a member of the graphs' organization with a role that logs context and reports
    (``agent``, or operator and up): its sessions are its own. Returns the per-block report.
    """
    cfg = cfg or WorldConfig()
    graph, topics = world
    rng = random.Random(cfg.seed)
    ground = Ground(topics, cfg.useful_per_topic, rng)
    client = api_client(user)
    start = start or datetime.now(UTC)
    period_days = graph.current_policy().decay_period_days
    report = WorldReport(config=asdict(cfg))
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
                    actor=DECAY_ACTOR,
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
            report.outcomes[_agent_reports(client, graph.pk, sid, items, useful, cfg, rng)] += 1
            if (s + 1) % cfg.block == 0 or s + 1 == cfg.sessions:
                block = _block(s + 1, phase, learn_scores, frozen_scores)
                report.blocks.append(block)
                learn_scores, frozen_scores = [], []
                if progress:
                    progress(block)
    return report


# --------------------------------------------------------------------------------------------------
# Running it: a fresh world and its frozen twin


def run_experiment(
    cfg: WorldConfig,
    *,
    topics: int = 8,
    notes_per_topic: int = 24,
    policy: dict | None = None,
    world_seed: int = 3,
    progress=None,
) -> WorldReport:
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
