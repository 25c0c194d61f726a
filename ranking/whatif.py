"""What-if: the logged sessions' retrievals replayed under a draft policy beside the current one. Writes nothing.

The draft's numbers are sorted by what a replay can honestly say about them (``classify``):

* numbers that only re-rank what retrieval found (the node score's coefficients, the hop factor, recency,
  edge-type priorities) **rescore the frozen candidates** of each logged injection (the candidate log holds
  every score input) under today's policy and under the draft;
* numbers that change which candidates are found (``max_hops``, ``fanout_cap``, ``rrf_k``, ``coef_lexical``
  turned on or off) **re-run retrieval** (``ranking.retrieval.retrieve``) for each logged question, today's
  policy and the draft both, on the graph as it is now (the logged query vector, no embedding, no log written);
* the abstention floor (``abstain_floor``) decides whether an answer is given, not its order: it is **replayed on
  each logged answer's confidence** (``abstained_current`` / ``abstained_draft`` per injection, and how many
  would abstain under each, ``abstained``), as ``ranking.abstention.abstains`` decides it at context time;
* numbers that change learning (rates, EMA, outcome scores, decay, thresholds) or the budget are listed in
  ``not_modelled`` with the reason: a replay of rankings cannot show them.

The measure is where the first used item ranks (``first_used_rank``: uses, explicit or implicit, recorded for the
session) now and under the draft, per injection with uses, with a 95% bootstrap interval of the mean difference
(resampling sessions, so a session's injections stay together); and, per injection whose top item changes,
whether the old and the new top item were used.
"""

from __future__ import annotations

import copy
import random
from dataclasses import fields
from datetime import UTC, date, datetime, time, timedelta

from django.db.models import Max

from feedback.models import AgentSession, ContextInjection, UseEvent
from graphadmin.agents.client import RetrievalRequest
from graphadmin.models import EdgeType, Graph
from graphadmin.models.policy import POLICY_NUMBERS

from . import abstention, scoring
from . import queries as sql
from .retrieval import RankingInputError, policy_of, prepare, retrieve

MAX_WHATIF_SESSIONS = 200  # logged sessions per what-if
MAX_WHATIF_INJECTIONS = MAX_WHATIF_SESSIONS  # the API's former name for the same bound
MAX_INJECTIONS_PER_WHATIF = 1000  # their injections, the most recent first
MAX_WHATIF_PRIORITIES = 200  # draft edge-type priorities per what-if
USED_SIGNALS = ("explicit", "implicit")
BOOTSTRAP_SAMPLES = 1000

# Numbers that change which candidates retrieval finds: a frozen candidate set cannot show them.
# ``carry`` (where the policy has it): the relevance a link passes on is computed during expansion and frozen in
# the log (``inherited``), so only a re-run shows a change of it.
GENERATION = ("max_hops", "fanout_cap", "rrf_k", "carry", "learned_carry")
# Numbers of the traversal score: they re-rank the frozen candidates (the priority and feedback terms of a
# note's score) and also steer which nodes best-first expansion reaches, which a rescore does not see.
STEERING = ("coef_weight", "coef_semantic", "coef_priority", "feedback_influence")
RESCORED = tuple(n for n in scoring.RANKING_POLICY_NUMBERS if n not in GENERATION)
# Numbers that decide whether an answer is given at all: replayed on the logged confidences (an answer logged
# before confidences were has none, and counts under neither).
GATED = ("abstain_floor",)
_LEARNING = "changes how reports move weights from now on; the logged rankings were made with the weights learnt "
_LEARNING += "so far, and replaying the logged reports under it is not simulated here."
NOT_MODELLED = {
    "learning_rate": _LEARNING,
    "negative_rate": _LEARNING,
    "ema_alpha": _LEARNING,
    "outcome_accepted": _LEARNING,
    "outcome_rework": _LEARNING,
    "outcome_rejected": _LEARNING,
    "co_use_min_sessions": "changes which co_used links learning creates from now on; not simulated here.",
    "implicit_threshold": "changes which response texts count as uses from now on; the logged uses are replayed "
    "as recorded.",
    "decay_rate": "changes how fast unused links lose weight over the coming periods; the logged rankings used "
    "today's weights, and decay is not simulated here.",
    "decay_period_days": "changes when decay runs; decay is not simulated here.",
    "weight_floor": "changes how low decay takes a weight; decay is not simulated here.",
    "memory_duplicate_threshold": "agent-written memory (what counts as a near-duplicate note), not ranking.",
    "default_budget_items": "changes how many items a context answer selects, not their order; the measure reads "
    "the order.",
    "default_budget_tokens": "changes how many items a context answer selects, not their order; the measure reads "
    "the order.",
    "ceiling_mode": "changes how learning caps weights (a normalize pass); not simulated here.",
}
WHATIF_FIELDS = (*POLICY_NUMBERS, "ceiling_mode")
UNKNOWN = "a number this what-if does not know how to replay yet (ranking.whatif: classify it)."


def classify(changes: dict, current: dict, priorities: dict) -> dict:
    """The draft's numbers by how the replay treats them: {"rescored", "retrieved", "gated", "not_modelled",
    "approximations"}.

    ``current``: the current revision's numbers (coef_lexical turned on or off changes which nodes the lexical
    side finds: retrieval). Unchanged values are left out.
    """
    changed = {k: v for k, v in changes.items() if current.get(k) != v}
    retrieved = [k for k in changed if k in GENERATION]
    if "coef_lexical" in changed and (not current.get("coef_lexical")) != (not changed["coef_lexical"]):
        retrieved.append("coef_lexical")
    rescored = [k for k in changed if k in RESCORED and k not in retrieved]
    gated = [k for k in changed if k in GATED]
    not_modelled = [
        {"field": k, "reason": NOT_MODELLED.get(k, UNKNOWN)}
        for k in changed
        if k not in RESCORED and k not in retrieved and k not in GENERATION and k not in GATED
    ]
    approximations = []
    # Retrieving, the draft's traversal numbers steer the expansion it re-runs; rescoring, they cannot.
    steering = [] if retrieved else [k for k in rescored if k in STEERING]
    steering += ["edge_type_priorities"] if priorities else []
    for name in steering:
        approximations.append(
            {
                "field": name,
                "note": "re-ranks what retrieval found; it also steers which nodes expansion reaches (and the "
                "relevance a link passes on, where the policy carries it), which this replay does not re-run"
                + (" (retrieval reads the priorities from the graph)." if name == "edge_type_priorities" else "."),
            }
        )
    return {
        "rescored": sorted(rescored) + (["edge_type_priorities"] if priorities else []),
        "retrieved": sorted(retrieved),
        "gated": gated,
        "not_modelled": not_modelled,
        "approximations": approximations,
    }


# Where the scoring has it (relevance carried along links), the frozen ``inherited`` is passed on as logged.
_INHERITED = "inherited" in {f.name for f in fields(scoring.NodeCandidate)}


def _order(features: list[tuple], scorer: scoring.NodeScores, priorities: dict) -> list[str]:
    """Candidates ranked under the scorer's policy. ``features``: (node, vector, hops, age_days, persona,
    feedback_weight, path_weight, priority, edge_type, novelty, memory, lexical, inherited), the frozen score inputs
    (``ranking.retrieval.Candidate.features``; ``queries.whatif_candidates``)."""
    scored = [
        scorer.score(
            scoring.NodeCandidate(
                node_id=node,
                vector=vector or 0.0,
                hops=hops,
                age_days=age,
                persona=persona if persona is not None else 0.0,
                feedback_weight=feedback if feedback is not None else scoring.NEUTRAL,
                path_weight=path,
                priority=priorities.get(edge_type, priority if priority is not None else 0.0) if edge_type else 0.0,
                novelty=novelty,
                memory=memory,
                lexical=lexical or 0.0,
                **({"inherited": inherited} if _INHERITED else {}),
            )
        )
        for node, vector, hops, age, persona, feedback, path, priority, edge_type, novelty, memory, lexical, inherited in features  # noqa: E501
    ]
    return [s.stable_id for s in scoring.rank(scored)]


def _features_of(candidates) -> list[tuple]:
    """``_order``'s rows from retrieval candidates (``ranking.retrieval.Candidate``)."""
    rows = []
    for c in candidates:
        f = c.features()
        rows.append(
            (
                f["node_id"],
                f.get("vector"),
                f.get("hops"),
                f.get("age_days"),
                f.get("persona"),
                f.get("feedback_weight"),
                f.get("path_weight"),
                f.get("priority"),
                f.get("edge_type"),
                f.get("novelty"),
                f.get("memory"),
                f.get("lexical"),
                f.get("inherited"),
            )
        )
    return rows


def select_injections(
    graph: Graph,
    *,
    n: int = 20,
    agent: str | None = None,
    since: date | None = None,
    until: date | None = None,
    vectors: bool = True,
) -> list[ContextInjection]:
    """The injections of the graph's last ``n`` sessions (by their latest injection), of ``agent`` (the sessions'
    owner, a user name) and between ``since`` and ``until`` (UTC days, inclusive), most recent first; at most
    MAX_INJECTIONS_PER_WHATIF. One query (the sessions are a subquery)."""
    sessions = AgentSession.objects.filter(graph=graph)
    injections = ContextInjection.objects.filter(graph=graph)
    if agent:
        sessions = sessions.filter(owner__username=agent)
        if not sessions.exists():
            raise RankingInputError({"agent": [f"No session of this graph belongs to {agent!r}."]})
    if since:
        injections = injections.filter(created_at__gte=datetime.combine(since, time.min, tzinfo=UTC))
    if until:
        injections = injections.filter(created_at__lt=datetime.combine(until + timedelta(days=1), time.min, tzinfo=UTC))
    latest = (
        sessions.filter(pk__in=injections.values("session_id"))
        .annotate(last=Max("injections__created_at"))
        .order_by("-last", "-pk")
        .values("pk")[:n]
    )
    if not vectors:  # a rescore does not ask the questions again: their 384 numbers each are not read
        injections = injections.defer("query_embedding")
    return list(
        injections.filter(session_id__in=latest)
        .select_related("session")
        .order_by("-created_at", "-id")[:MAX_INJECTIONS_PER_WHATIF]
    )


def _request_of(injection: ContextInjection, draft: scoring.Policy) -> RetrievalRequest:
    """The logged question as a retrieval request (its hops bounded by the draft's max_hops)."""
    p = injection.params or {}
    hops = p.get("hops")
    return RetrievalRequest(
        query=injection.query,
        start_nodes=tuple(p.get("start_nodes") or ()),
        anchors=tuple(p.get("anchors") or ()),
        exclude=tuple(p.get("exclude") or ()),
        persona=p.get("persona") or {},
        k=p.get("k") or 50,
        hops=min(hops, draft.max_hops) if hops is not None else None,
    )


class _Retriever:
    """Retrieval of logged questions under one policy, each distinct question once (a what-if over many
    sessions asks the same questions again and again). Writes nothing: ``retrieve`` is a read."""

    def __init__(self, graph: Graph, revision, policy: scoring.Policy, priorities: dict | None, now: datetime):
        self.graph, self.policy, self.priorities, self.now = graph, policy, priorities, now
        self.revision = revision
        self.done: dict[tuple, list[str] | str] = {}

    def order(self, injection: ContextInjection) -> list[str] | str:
        """The question's candidates in rank order (stable ids), or why it could not be asked again."""
        req = _request_of(injection, self.policy)
        qvec = injection.query_embedding
        qvec = list(qvec) if qvec is not None else None
        key = (
            req.query,
            req.start_nodes,
            req.anchors,
            req.exclude,
            tuple(sorted(req.persona.items())),
            req.k,
            req.hops,
            tuple(qvec) if qvec is not None else None,
        )
        if key not in self.done:
            try:
                prepared = prepare(self.graph, req, now=self.now, policy=(self.revision, self.policy), qvec=qvec)
                found = retrieve(prepared).items
            except RankingInputError as exc:
                self.done[key] = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in exc.errors.items())
            else:
                if self.priorities is None:
                    self.done[key] = [c.scored.stable_id for c in found]
                else:  # draft priorities re-rank what was found (retrieval reads today's from the graph)
                    self.done[key] = _order(_features_of(found), scoring.NodeScores(self.policy), self.priorities)
        return self.done[key]


def _gate(injection: ContextInjection, floors: tuple[float, float]) -> tuple[float | None, tuple[bool, bool]]:
    """The logged answer's confidence and whether it abstains under each floor (current, draft), as the context
    call decides it (``abstention.abstains``: a request naming start nodes or anchors never abstains)."""
    params = injection.params or {}
    confidence = params.get("confidence")
    if confidence is None:
        return None, (False, False)
    directed = bool(params.get("start_nodes") or params.get("anchors"))
    return confidence, tuple(abstention.abstains(float(confidence), f, directed=directed) for f in floors)


def _first_used(order: list[str], used: set[str]) -> int | None:
    """The 1-based rank of the best-ranked used item in ``order``; None when none of them is in it."""
    for position, stable_id in enumerate(order, start=1):
        if stable_id in used:
            return position
    return None


def bootstrap_interval(
    per_session: dict[str, list[float]], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """95% percentile bootstrap interval of the mean of the values, resampling sessions (each session's values
    stay together). None with fewer than two sessions. Seeded: the same data give the same interval."""
    groups = [(sum(v), len(v)) for v in per_session.values() if v]
    if len(groups) < 2:
        return None
    rnd = random.Random(seed)
    m = len(groups)
    means = []
    for _ in range(samples):
        picked = rnd.choices(groups, k=m)
        means.append(sum(t for t, _n in picked) / sum(n for _t, n in picked))
    means.sort()
    return means[int(0.025 * samples)], means[min(samples - 1, int(0.975 * samples))]


def whatif(
    graph: Graph,
    *,
    changes: dict | None = None,
    priorities: dict | None = None,
    n: int = 20,
    k: int = 5,
    agent: str | None = None,
    since: date | None = None,
    until: date | None = None,
    now: datetime | None = None,
) -> dict:
    """Replay the logged retrievals of the last ``n`` sessions (of ``agent``, between ``since`` and ``until``)
    under the current policy and a draft, and compare (see the module). Writes nothing.

    The draft is the current policy with ``changes`` (any policy number, and ``ceiling_mode``) and
    ``priorities`` (edge type name -> priority) applied. Bad input raises RankingInputError naming the field.
    """
    changes, priorities = dict(changes or {}), dict(priorities or {})
    revision, policy = policy_of(graph)
    current_priorities = dict(EdgeType.objects.filter(graph=graph).values_list("name", "priority"))
    unknown = sorted(set(priorities) - set(current_priorities))
    if unknown:
        raise RankingInputError({"edge_type_priorities": [f"Unknown edge type(s) in this graph: {unknown}"]})
    priorities = {k: v for k, v in priorities.items() if current_priorities[k] != v}
    how = classify(changes, revision.numbers(), priorities)
    draft = policy.with_changes(changes)
    draft_priorities = {**current_priorities, **priorities}
    retrieving = bool(how["retrieved"])
    injections = select_injections(graph, n=n, agent=agent, since=since, until=until, vectors=retrieving)
    ids = [i.pk for i in injections]
    # The candidates' node and edge (uses are credited through them) and, to rescore, their frozen score inputs.
    first_logged = min((i.created_at for i in injections), default=now or datetime.now(UTC))
    cands_by_inj: dict[int, list[tuple]] = {}
    for row in sql.whatif_candidates(graph.pk, ids, first_logged):
        cands_by_inj.setdefault(row[0], []).append(row[1:])
    uses_by_session: dict[int, list[tuple]] = {}
    for session_id, injection_id, node_id, edge_id in UseEvent.objects.filter(
        graph=graph, session_id__in={i.session_id for i in injections}, signal__in=USED_SIGNALS
    ).values_list("session_id", "injection_id", "node_id", "edge_id"):
        uses_by_session.setdefault(session_id, []).append((injection_id, node_id, edge_id))

    now = now or datetime.now(UTC)
    floors = (float(revision.abstain_floor), float(changes.get("abstain_floor", revision.abstain_floor)))
    abstaining = {"current": 0, "draft": 0, "current_used": 0, "draft_used": 0, "without_confidence": 0}
    current_scorer, draft_scorer = scoring.NodeScores(policy), scoring.NodeScores(draft)
    if retrieving:
        draft_revision = copy.copy(revision)  # an unsaved copy: fanout_cap is read from the revision
        draft_revision.fanout_cap = changes.get("fanout_cap", revision.fanout_cap)
        today = _Retriever(graph, revision, policy, None, now)
        drafted = _Retriever(graph, draft_revision, draft, draft_priorities if priorities else None, now)

    per_injection, results, skipped, flipped = [], [], [], []
    rank_delta: dict[str, list[float]] = {}
    ranks_now, ranks_draft, lost, gained, found_changed = [], [], 0, 0, 0
    for inj in injections:
        cands = cands_by_inj.get(inj.pk, [])
        mine = [u for u in uses_by_session.get(inj.session_id, ()) if u[0] in (None, inj.pk)]
        used_nodes = {u[1] for u in mine if u[1]}
        used_edges = {u[2] for u in mine if u[2]}
        used = {f"node:{c[0]}" for c in cands if c[0] in used_nodes or (c[1] and c[1] in used_edges)}
        if retrieving:
            current_order, draft_order = today.order(inj), drafted.order(inj)
            if isinstance(current_order, str) or isinstance(draft_order, str):
                skipped.append(
                    {"injection": inj.pk, "reason": current_order if isinstance(current_order, str) else draft_order}
                )
                continue
        else:
            features = [(c[0], *c[2:]) for c in cands]
            current_order = _order(features, current_scorer, current_priorities)
            draft_order = _order(features, draft_scorer, draft_priorities)
        result = scoring.compare_orders(current_order, draft_order, sorted(used), k)
        results.append(result)
        # Retrieval re-run: candidates found only today or only under the draft (a rescore keeps the same set).
        dropped = len(set(current_order) - set(draft_order))
        added = len(set(draft_order) - set(current_order))
        found_changed += dropped + added
        first_now, first_draft = _first_used(current_order, used), _first_used(draft_order, used)
        if used:
            if first_now is not None and first_draft is not None:
                ranks_now.append(first_now)
                ranks_draft.append(first_draft)
                rank_delta.setdefault(inj.session.external_id, []).append(first_draft - first_now)
            elif first_now is not None:
                lost += 1
            elif first_draft is not None:
                gained += 1
        confidence, gate = _gate(inj, floors)
        abstaining["current"] += gate[0]
        abstaining["draft"] += gate[1]
        # An answer withheld whose items the agent used: what the floor would have cost.
        abstaining["current_used"] += gate[0] and bool(used)
        abstaining["draft_used"] += gate[1] and bool(used)
        abstaining["without_confidence"] += confidence is None
        top_now = current_order[0] if current_order else None
        top_draft = draft_order[0] if draft_order else None
        if result.top1_flip:
            flipped.append(
                {
                    "session": inj.session.external_id,
                    "injection": inj.pk,
                    "top_now": top_now,
                    "top_draft": top_draft,
                    "top_now_used": top_now in used,
                    "top_draft_used": top_draft in used,
                }
            )
        per_injection.append(
            {
                "injection": inj.pk,
                "session": inj.session.external_id,
                "created_at": inj.created_at,
                "mode": inj.mode,
                "candidates": len(current_order),
                "candidates_draft": len(draft_order),
                "top1_current": top_now,
                "top1_draft": top_draft,
                "top1_flip": result.top1_flip,
                "kendall_tau": result.kendall_tau,
                "moved": len(result.changes),
                "dropped": dropped,
                "added": added,
                "changes": result.changes[:20],
                "used": result.used,
                "first_used_rank_current": first_now,
                "first_used_rank_draft": first_draft,
                "mrr_current": result.mrr_current,
                "mrr_draft": result.mrr_draft,
                "hit_current": result.hit_current,
                "hit_draft": result.hit_draft,
                "confidence": confidence,
                "abstained_current": gate[0],
                "abstained_draft": gate[1],
            }
        )
    deltas = [d for values in rank_delta.values() for d in values]
    interval = bootstrap_interval(rank_delta)
    return {
        "policy_revision": revision.revision,
        "draft": {"changes": changes, "edge_type_priorities": priorities},
        "selection": {
            "n": n,
            "agent": agent or None,
            "since": since,
            "until": until,
            "sessions": len({i.session_id for i in injections}),
            "injections": len(injections),
        },
        "method": "retrieve" if retrieving else "rescore",
        # Retrieval runs made (each distinct logged question once per policy): the cost of a re-run.
        "retrievals": len(today.done) + len(drafted.done) if retrieving else 0,
        "replayed": how["rescored"] + how["retrieved"] + how["gated"],
        "rescored": how["rescored"],
        "retrieved": how["retrieved"],
        "gated": how["gated"],
        "not_modelled": how["not_modelled"],
        "approximations": how["approximations"],
        "skipped": skipped,
        "hit_k": k,
        "first_used_rank": {
            "injections": len(deltas),
            "sessions": len(rank_delta),
            "current": sum(ranks_now) / len(ranks_now) if ranks_now else None,
            "draft": sum(ranks_draft) / len(ranks_draft) if ranks_draft else None,
            "difference": sum(deltas) / len(deltas) if deltas else None,
            "interval": list(interval) if interval else None,
            "lost": lost,
            "gained": gained,
        },
        "aggregate": {**scoring.aggregate(results), "candidates_found_or_lost": found_changed},
        # How many replayed answers abstain (give nothing) under the current floor and the draft's.
        "abstained": abstaining,
        "flipped": flipped,
        "injections": per_injection,
    }
