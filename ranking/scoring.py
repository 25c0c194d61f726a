"""Pure scoring: plain dataclasses in, totals with named components out. No Django, no database.

Two modes (docs/ranking.md has the full formulas):

* **Traversal score** of an edge for a query::

      blended  = (1 - feedback_influence) * weight + feedback_influence * feedback_weight
      total    = coef_weight * blended + coef_semantic * similarity + coef_priority * priority

  ``similarity`` is the cosine similarity of the edge's target embedding to the query (0 when
  either is missing), ``priority`` the edge type's priority in [-1, 1].

* **Node score** of a retrieval candidate (an entry point, a start node or a node reached by
  expansion; docs/ranking.md "The retrieval pipeline")::

      hop         = max(hop_floor, hop_decay ** hops)   (hops unknown or > max_hops: hop_floor)
      recency     = 0.5 ** (age_days / recency_half_life_days)   (age unknown: 0)
      feedback    = min(0, feedback_weight - 0.5)         (the node's learned EMA below neutral; see NodeScores)
      path        = reinforcement weight of the edge that reached it - 0.5   (no edge: 0, neutral)
      priority    = priority of that edge's type                 (no edge: 0)
      lexical     = its BM25 score for the query over the best BM25 score of the query, in [0, 1]
                    (``fuse_entry``; with reciprocal-rank fusion, rank-based for vector and lexical alike)
      memory      = what agents asking similar questions made of it, in [-1, 1]   (no evidence: 0;
                    recall_questions: the ``answered`` edges of similar question nodes)
      exploration = 1 for a candidate no similar question has evidence about   (no history: 0)
      total       = coef_vector * vector + coef_lexical * lexical + coef_hop * hop + coef_persona * persona
                    + coef_recency * recency
                    + feedback_influence * feedback + coef_path * path + coef_priority * priority
                    + coef_memory * memory + exploration_coef * exploration

  The learned terms are biases around neutral: an untouched node (0.5) and an untouched edge (0.5)
  add nothing, so learning never filters a candidate out, it only moves it.

  The hop factor measures *proximity* to the caller's anchors in an undirected, bounded view of
  the graph. It says nothing about causation.

Every result carries each component's raw value, coefficient and contribution (= raw *
coefficient), so the total is exactly the sum of the contributions. Ties are broken by a stable
rule (``sort_key``): total (rounded to 1e-12, so float noise never reorders), then fewer hops,
then the candidate's stable id, so the same input always gives the same order.

Also here, because they are pure functions of scored candidates: the component-wise explanation of
why one candidate beat another, the best-first expansion by carried relevance (``spread``), the budget,
and the metrics of a what-if replay (rank changes, top-1 flips, Kendall tau, MRR, hit@k).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import NamedTuple

TIE_DIGITS = 12

# Names of the policy numbers this module reads (a subset of graphadmin.models.policy.POLICY_NUMBERS).
RANKING_POLICY_NUMBERS = (
    "coef_weight",
    "coef_semantic",
    "coef_priority",
    "feedback_influence",
    "coef_vector",
    "coef_lexical",
    "rrf_k",
    "coef_hop",
    "coef_persona",
    "coef_recency",
    "recency_half_life_days",
    "hop_decay",
    "hop_floor",
    "max_hops",
    "coef_path",
    "coef_memory",
    "exploration",
    "carry",
    "learned_carry",
)

NEUTRAL = 0.5  # the default of every learned weight: a bias of zero


@dataclass(frozen=True)
class Policy:
    """The ranking numbers of a policy revision (defaults equal the model's defaults)."""

    coef_weight: float = 0.5
    coef_semantic: float = 0.35
    coef_priority: float = 0.15
    feedback_influence: float = 0.3
    coef_vector: float = 0.6
    coef_lexical: float = 0.3
    rrf_k: int = 0
    coef_hop: float = 0.2
    coef_persona: float = 0.1
    coef_recency: float = 0.1
    recency_half_life_days: float = 30.0
    hop_decay: float = 0.6
    hop_floor: float = 0.25
    max_hops: int = 2
    coef_path: float = 0.0
    coef_memory: float = 0.2
    exploration: float = 0.03
    carry: float = 0.9
    learned_carry: float = 0.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> Policy:
        """A Policy from any mapping (e.g. PolicyRevision.numbers()); keys it does not know are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def with_changes(self, changes: Mapping[str, object]) -> Policy:
        """A copy with some numbers replaced (a draft policy for what-if)."""
        names = {f.name for f in fields(self)}
        return replace(self, **{k: v for k, v in changes.items() if k in names})


@dataclass(frozen=True)
class Component:
    """One named part of a score: raw value, coefficient, and contribution = raw * coefficient."""

    name: str
    raw: float
    coefficient: float
    contribution: float

    def as_dict(self) -> dict:
        """{raw, coefficient, contribution}: the shape stored in InjectionCandidate.components."""
        return {"raw": self.raw, "coefficient": self.coefficient, "contribution": self.contribution}


@dataclass(frozen=True)
class EdgeCandidate:
    """An edge reached from the start nodes (or a triplet hit), with the raw features the traversal score reads.

    The one edge type of the pipeline: ranking.queries returns it, rank and expansion score it.

    ``similarity`` is None when the target has no embedding or the request has no query; it then
    counts as 0 (and is shown as such), so a node without an embedding is never favoured.
    """

    edge_id: int
    source_id: int
    target_id: int
    hops: int
    weight: float
    feedback_weight: float
    priority: float
    similarity: float | None = None
    edge_type: str = ""
    # Expansion walks links both ways: ``reverse`` when it went from the stored target to the stored source
    # (``source_id`` and ``target_id`` are then the way it walked: from, to). ``specificity`` (0, 1]: how
    # specific the link is to its two ends (``link_specificity``; 1 unless read with their degrees).
    reverse: bool = False
    specificity: float = 1.0
    degrees: tuple = field(default=(None, None), compare=False, repr=False)  # links at (from, to), when read
    # The node at the edge's far end as the database read it (ranking.queries.NodeRow), when read with it
    # (expansion); not a score input.
    target: object | None = field(default=None, compare=False, repr=False)

    @property
    def stable_id(self) -> str:
        return f"edge:{self.edge_id}"


@dataclass(frozen=True)
class NodeCandidate:
    """A retrieval candidate node, with the raw features the node score reads.

    ``vector``: cosine similarity to the query (0 when the node has no embedding). ``hops``: edges
    from where it entered (entry points and start nodes: 0), or, when the caller gave anchors, its
    shortest undirected distance from them; None when unreachable within the bound. ``age_days``:
    days since the node's last activity, None when unknown. ``persona``: the caller's affinity for
    this node, already resolved (see ``persona_affinity``). ``feedback_weight``: the node's learned
    EMA. ``path_weight``: the reinforcement weight of the edge that reached it (None: it entered
    without one); ``priority``: that edge's type priority (0 without one). ``memory``: what agents asking
    similar questions made of it (``recall_questions``; None: no evidence). ``novelty``: 1 when no similar
    question has evidence about it and a near-repeat's context failed (exploration), else None.
    ``lexical``: its fused BM25 score for the query in [0, 1] (``fuse_entry``; 0: no query term in it).
    ``inherited``: the relevance its path carried to it from the node it was reached from (``edge_carry`` times
    that node's relevance; None: not reached through a link). It lifts the node to that level when its own
    relevance is lower (the ``graph`` component), so a neighbour of a strong hit competes with the entry points.
    """

    node_id: int
    vector: float
    hops: int | None = None
    age_days: float | None = None
    persona: float = 0.0
    feedback_weight: float = NEUTRAL
    path_weight: float | None = None
    priority: float = 0.0
    novelty: float | None = None
    memory: float | None = None
    lexical: float = 0.0
    inherited: float | None = None

    @property
    def stable_id(self) -> str:
        return f"node:{self.node_id}"


# The components of each score, in the order they are summed.
EDGE_COMPONENTS = ("weight", "semantic", "priority")
NODE_COMPONENTS = (
    "vector",
    "lexical",
    "hop",
    "persona",
    "recency",
    "feedback",
    "path",
    "priority",
    "memory",
    "exploration",
    "graph",
)


# Components as three parallel tuples, not Component objects: docs/decisions/0007-positional-hot-tuples.md
@dataclass(frozen=True)
class Scored:
    """A candidate with its total and its components, in the order they are summed.

    The components are kept as three parallel tuples (``names``, ``raws``, ``coefficients``; each
    contribution is raw * coefficient) and built as Component values only when asked for, so scoring a
    pool of candidates makes no per-component objects.
    """

    candidate: EdgeCandidate | NodeCandidate
    total: float
    names: tuple[str, ...]
    raws: tuple[float, ...]
    coefficients: tuple[float, ...]

    @property
    def stable_id(self) -> str:
        return self.candidate.stable_id

    @property
    def components(self) -> tuple[Component, ...]:
        return tuple(
            Component(n, r, k, r * k) for n, r, k in zip(self.names, self.raws, self.coefficients, strict=True)
        )

    def components_dict(self) -> dict:
        """name -> {raw, coefficient, contribution}: the shape stored in InjectionCandidate.components."""
        return {
            n: {"raw": r, "coefficient": k, "contribution": r * k}
            for n, r, k in zip(self.names, self.raws, self.coefficients, strict=True)
        }

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# Factors


def blended_weight(weight: float, feedback_weight: float, feedback_influence: float) -> float:
    """(1 - fi) * weight + fi * feedback_weight: the stored weight with the outcome EMA mixed in."""
    return (1.0 - feedback_influence) * weight + feedback_influence * feedback_weight


def hop_factor(hops: int | None, policy: Policy) -> float:
    """max(hop_floor, hop_decay ** hops); unreachable (None) or beyond max_hops gives the floor."""
    if hops is None or hops < 0 or hops > policy.max_hops:
        return policy.hop_floor
    return max(policy.hop_floor, policy.hop_decay**hops)


def recency_factor(age_days: float | None, half_life_days: float) -> float:
    """0.5 ** (age / half_life): 1 for a node touched now, 0.5 after one half-life; unknown age gives 0.

    A timestamp in the future (clock skew) counts as age 0.
    """
    if age_days is None:
        return 0.0
    return 0.5 ** (max(0.0, age_days) / half_life_days)


def persona_affinity(kind: str, tags: Iterable[str], affinities: Mapping[str, float]) -> float:
    """The caller's affinity for a node: the largest affinity among the node's kind and tags.

    Keys are matched case-insensitively; a node matching none gets 0 (neutral), so a persona
    never penalises nodes it does not mention.
    """
    if not affinities:
        return 0.0
    lowered = {str(k).lower(): float(v) for k, v in affinities.items()}
    keys = [kind or "", *(tags or [])]
    matched = [lowered[k.lower()] for k in keys if isinstance(k, str) and k.lower() in lowered]
    return max(matched) if matched else 0.0


# How far below neutral a node's own outcome EMA can pull it: the EMA of a note shown in sessions that found
# nothing is a global prior too (the session failed, not necessarily the note); one rejection's worth (0.05 of
# weight) says "flagged or failing", more would push the note down for questions nobody reported.
FEEDBACK_BOUND = 0.05

# The largest share of a node's relevance one link can carry: below 1, so relevance strictly fades along a
# path and a neighbour never outranks the hit it was reached from on that hit's relevance alone.
MAX_CARRY = 0.99


# edge_carry, link_specificity and spread: docs/decisions/0008-expansion-both-ways-carried-relevance.md
def edge_carry(policy: Policy, weight: float | None, priority: float, specificity: float = 1.0) -> float:
    """How much of a node's relevance a link passes to the node it reaches, in [0, MAX_CARRY].

    ``carry`` (the policy's share for an untouched link of priority 0), raised or lowered by its type's priority
    (``coef_priority``) and, as far as the policy's ``learned_carry`` lets it, by the link's reinforcement
    weight around neutral (``learned_carry * coef_weight``): the link's tuned and learned worth, the terms of
    its traversal score. ``learned_carry`` is 0 by default: a learned weight is a global prior, and what one
    question taught a link moved other questions' context by near-ties (docs/decisions/0014). Times the link's
    ``specificity`` (``link_specificity``): a link to or from a hub says little about either end. A policy
    ``carry`` of 0 turns carrying off (0 for every link, however learned or tuned): what expansion reaches then
    competes on its own match only, as the policy documents it.
    """
    if not policy.carry:
        return 0.0
    w = NEUTRAL if weight is None else float(weight)
    learned = float(policy.learned_carry) * float(policy.coef_weight) * (w - NEUTRAL)
    c = float(policy.carry) + learned + float(policy.coef_priority) * float(priority)
    return max(0.0, min(MAX_CARRY, c)) * float(specificity)


def link_specificity(degree_a: int, degree_b: int, reference: float) -> float:
    """min(1, reference / sqrt(degree_a * degree_b)): the symmetric degree normalisation of graph
    propagation (as in personalised PageRank and graph convolutions). A link between two ordinary notes
    (degrees near ``reference``, the neighbourhood's median) keeps its whole carry; a link to an index
    note of 30 links keeps a fraction."""
    product = max(1, int(degree_a)) * max(1, int(degree_b))
    return min(1.0, float(reference) / math.sqrt(product)) if reference > 0 else 1.0


# ---------------------------------------------------------------------------------------------
# Scores


def _total(raws: tuple[float, ...], coefficients: tuple[float, ...]) -> float:
    """The exact sum (math.fsum) of the contributions raw * coefficient, in component order."""
    return math.fsum([r * k for r, k in zip(raws, coefficients, strict=True)])


def edge_coefficients(policy: Policy) -> tuple[float, ...]:
    """The traversal score's coefficients, in EDGE_COMPONENTS order."""
    return (float(policy.coef_weight), float(policy.coef_semantic), float(policy.coef_priority))


def score_edge(c: EdgeCandidate, policy: Policy, coefficients: tuple[float, ...] | None = None) -> Scored:
    """The traversal score of one edge, with components weight, semantic and priority.

    ``coefficients``: ``edge_coefficients(policy)`` when the caller scores many edges (read once).
    """
    coefficients = coefficients or edge_coefficients(policy)
    raws = (
        float(blended_weight(c.weight, c.feedback_weight, policy.feedback_influence)),
        float(c.similarity) if c.similarity is not None else 0.0,
        float(c.priority),
    )
    return Scored(c, _total(raws, coefficients), EDGE_COMPONENTS, raws, coefficients)


def score_edges(candidates: Iterable[EdgeCandidate], policy: Policy) -> list[Scored]:
    """``score_edge`` of each edge, the policy's coefficients read once."""
    coefficients = edge_coefficients(policy)
    return [score_edge(c, policy, coefficients) for c in candidates]


# The hot loops' tuples are NamedTuples: the same tuple underneath (built, compared and hashed as one), names
# for the reader; those built for every way in (NodeScores.way, node_key), the hottest loop, stay plain tuples.
# docs/decisions/0007-positional-hot-tuples.md
class Base(NamedTuple):
    """A node's terms that do not depend on the way in (``NodeScores.base``): vector, lexical, persona, recency,
    feedback, memory and exploration, as raws and as contributions (raw * coefficient), in that order."""

    raws: tuple[float, ...]
    contributions: tuple[float, ...]


class NodeScores:
    """The node score of a policy: vector, lexical, hop, persona, recency, feedback, path, priority, memory,
    exploration and graph, over a pool of candidates (``score`` is one candidate's).

    The learned numbers are biases around neutral (0.5 adds nothing), never filters. ``feedback``
    (the node's own EMA) only lowers: the outcome EMA moves every note a session was *given*, so in
    a graph where most sessions end well it rises with how often a note is shown, not with whether
    it helped; as a raise it lifted popular notes over the right ones for every other question
    (docs/figures.md has the figures). Below neutral it is a reliable global signal (flagged
    wrong, or given in sessions that found nothing). What helped is credited where it helped:
    ``memory`` (for similar questions) and ``path`` (the links that led to it). ``exploration`` is
    0 whenever the policy's exploration coefficient is 0.

    The coefficients and hop factors are read once. A node's terms that do not depend on the way it was
    reached (vector, lexical, persona, recency, feedback, memory, exploration) are computed once
    (``base``: their raws and contributions); each way in then adds only its hop, path and priority
    (``way``, ``total``), and the raws tuple and the Scored are built only for the way chosen (``raws``,
    ``scored``). Every number is the one the formula gives: the same raws, the same products, summed by
    math.fsum in component order (NODE_COMPONENTS).
    """

    __slots__ = ("policy", "coefficients", "hop_factors", "hop_floor", "half_life")

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.coefficients = (
            float(policy.coef_vector),
            float(policy.coef_lexical),
            float(policy.coef_hop),
            float(policy.coef_persona),
            float(policy.coef_recency),
            float(policy.feedback_influence),
            float(policy.coef_path),
            float(policy.coef_priority),
            float(policy.coef_memory),
            float(policy.exploration),
            1.0,  # graph: the lift a path carries is already in relevance units
        )
        self.hop_floor = float(policy.hop_floor)
        self.hop_factors = {h: float(hop_factor(h, policy)) for h in range(max(0, int(policy.max_hops)) + 1)}
        self.half_life = policy.recency_half_life_days

    def base(
        self,
        vector: float,
        lexical: float,
        persona: float,
        age_days: float | None,
        feedback_weight: float,
        memory: float | None,
        novelty: float | None,
    ) -> Base:
        """The raws and contributions of a node's terms that do not depend on the way in: vector,
        lexical, persona, recency, feedback, memory, exploration (in that order)."""
        k = self.coefficients
        raws = (
            float(vector),
            float(lexical),
            float(persona),
            float(recency_factor(age_days, self.half_life)),
            float(max(-FEEDBACK_BOUND, min(0.0, feedback_weight - NEUTRAL))),
            float(memory or 0.0),
            float(novelty or 0.0),
        )
        v, lx, pe, rc, fb, me, ex = raws
        return Base(raws, (v * k[0], lx * k[1], pe * k[3], rc * k[4], fb * k[5], me * k[8], ex * k[9]))

    def hop(self, hops: int | None) -> float:
        """hop_factor(hops), read from the table built once."""
        if type(hops) is int:
            return self.hop_factors.get(hops, self.hop_floor)
        return float(hop_factor(hops, self.policy))

    def relevance(self, base: Base, hops: int | None) -> float:
        """A node's own match to the query at ``hops`` from where it entered: its vector, lexical and hop
        contributions. What a link carries to a neighbour, and what the neighbour's carried relevance lifts."""
        v, lx = base.contributions[0], base.contributions[1]
        return math.fsum([v, lx, self.hop(hops) * self.coefficients[2]])

    def way(
        self, hops: int | None, path_weight: float | None, priority: float, inherited: float | None = None, base=None
    ) -> tuple[float, float, float, float]:
        """The contributions of the terms that depend on the way in: hop, path, priority and graph (the lift
        ``inherited`` gives over the node's own ``relevance``; 0 without one; ``base`` needed with one)."""
        k = self.coefficients
        path = 0.0 if path_weight is None else float(path_weight - NEUTRAL)
        graph = max(0.0, float(inherited) - self.relevance(base, hops)) if inherited is not None else 0.0
        # A plain tuple: built for every way in, the hottest loop (docs/decisions/0007-positional-hot-tuples.md).
        return self.hop(hops) * k[2], path * k[6], float(priority) * k[7], graph

    def total(self, base: Base, way: tuple[float, float, float, float]) -> float:
        """The total of a node (``base``) reached a way (``way``): math.fsum of the eleven contributions in order."""
        v, lx, pe, rc, fb, me, ex = base.contributions
        hop, path, priority, graph = way
        return math.fsum([v, lx, hop, pe, rc, fb, path, priority, me, ex, graph])

    def raws(
        self, base: Base, hops: int | None, path_weight: float | None, priority: float, inherited: float | None = None
    ) -> tuple[float, ...]:
        """The eleven raws (NODE_COMPONENTS order) of a node (``base``) reached this way."""
        v, lx, pe, rc, fb, me, ex = base.raws
        path = 0.0 if path_weight is None else float(path_weight - NEUTRAL)
        graph = max(0.0, float(inherited) - self.relevance(base, hops)) if inherited is not None else 0.0
        return (v, lx, self.hop(hops), pe, rc, fb, path, float(priority), me, ex, graph)

    def scored(self, c: NodeCandidate, raws: tuple[float, ...], total: float) -> Scored:
        """The Scored of a candidate whose raws and total were computed here."""
        return Scored(c, total, NODE_COMPONENTS, raws, self.coefficients)

    def score(self, c: NodeCandidate) -> Scored:
        """One candidate's Scored, every term from its NodeCandidate (what-if's rescore of a logged candidate)."""
        base = self.base(c.vector, c.lexical, c.persona, c.age_days, c.feedback_weight, c.memory, c.novelty)
        return self.scored(
            c,
            self.raws(base, c.hops, c.path_weight, c.priority, c.inherited),
            self.total(base, self.way(c.hops, c.path_weight, c.priority, c.inherited, base)),
        )


def fuse_entry(
    vector: Mapping[int, float | None], bm25: Mapping[int, float], rrf_k: int = 0
) -> dict[int, tuple[float, float]]:
    """The two sides of the entry score of every candidate: (vector raw, lexical raw) by node id.

    ``vector``: each candidate's cosine similarity to the query (None: no embedding); ``bm25``: the
    BM25 scores of the query's lexical side (a node without one scores 0).

    * ``rrf_k == 0``, weighted sum of per-query-normalised scores: vector raw = the cosine (unchanged,
      None as 0), lexical raw = bm25 / the query's best bm25 (in [0, 1]; 0 when no node scored).
    * ``rrf_k > 0``, reciprocal-rank fusion: each side's raw = (rrf_k + 1) / (rrf_k + rank) by that side's
      rank among the candidates (1 at rank 1; ranks by score, then node id; no score on a side: 0).
      The coefficients (coef_vector, coef_lexical) weigh the two sides, as RRF's weights do.
    """
    ids = set(vector) | set(bm25)
    positive = {n: float(bm25[n]) for n in bm25 if bm25[n] and bm25[n] > 0}
    if not rrf_k:
        best = max(positive.values(), default=0.0)
        return {n: (float(vector.get(n) or 0.0), positive.get(n, 0.0) / best if best > 0 else 0.0) for n in ids}

    def ranks(scores: Mapping[int, float]) -> dict[int, int]:
        order = sorted(scores, key=lambda n: (-scores[n], n))
        return {n: r for r, n in enumerate(order, start=1)}

    vranks = ranks({n: float(v) for n, v in vector.items() if v is not None})
    lranks = ranks(positive)

    def rrf(rank_of: dict[int, int], n: int) -> float:
        return (rrf_k + 1) / (rrf_k + rank_of[n]) if n in rank_of else 0.0

    return {n: (rrf(vranks, n), rrf(lranks, n)) for n in ids}


NO_HOPS = 1 << 30  # the hops sort_key gives a candidate whose hops are unknown (last among equal totals)


class SortKey(NamedTuple):
    """A candidate's place in rank order (``sort_key``, ``node_key``), compared as the tuple it is: higher total
    first, then fewer hops, then the candidate's kind and id."""

    negative_total: float  # -round(total, TIE_DIGITS)
    hops: int  # NO_HOPS when unknown
    kind: str  # "node" or "edge"
    number: int  # the node's or edge's id


def sort_key(s: Scored) -> tuple:
    """Higher total first; then fewer hops (unknown last); then the stable id (numeric part, then text).

    For the pipeline's two candidate types the stable id is "node:<id>" or "edge:<id>", so (kind, id)
    orders them exactly as the id text would: the text itself is only compared for other types.
    """
    c = s.candidate
    if type(c) is NodeCandidate:
        number, name = c.node_id, "node"
    elif type(c) is EdgeCandidate:
        number, name = c.edge_id, "edge"
    else:
        number, name = None, ""
    hops = getattr(c, "hops", None)
    if type(number) is int and number >= 0:
        return SortKey(-round(s.total, TIE_DIGITS), NO_HOPS if hops is None else hops, name, number)
    # Another candidate type: the same four by its stable id's text, and the text itself (a plain tuple).
    kind, _, number = s.stable_id.partition(":")
    return (
        -round(s.total, TIE_DIGITS),
        hops if hops is not None else NO_HOPS,
        kind,
        int(number) if number.isdigit() else 0,
        s.stable_id,
    )


def node_key(total: float, hops: int | None, node_id: int) -> tuple:
    """``sort_key`` of a node candidate from its total, hops and (non-negative) id, without a Scored: the
    SortKey's fields as a plain tuple (equal to the SortKey, compared alike), built for every way in, the
    hottest loop (docs/decisions/0007-positional-hot-tuples.md)."""
    return (-round(total, TIE_DIGITS), NO_HOPS if hops is None else hops, "node", node_id)


def rank(scored: Iterable[Scored]) -> list[Scored]:
    """Scored candidates in rank order (best first), with the stable tie-break."""
    return sorted(scored, key=sort_key)


def rank_edges(candidates: Iterable[EdgeCandidate], policy: Policy) -> list[Scored]:
    """Traversal scores of the edges, in rank order."""
    return rank(score_edge(c, policy) for c in candidates)


# ---------------------------------------------------------------------------------------------
# Best-first traversal and budget


# Question-conditional evidence counts for a new question only where past questions asked the same thing.
# A reported use counts from the similarity the graph derives from its own reported sessions
# (Graph.evidence_similarity, feedback.rules.evidence_similarity: the lowest similarity at which two reported
# questions mostly used the same notes); until the graph has that figure, from near-repeats only
# (NEAR_REPEAT_SIMILARITY). Each is ramped from 0 at its threshold to 1 at an identical question.
# POSITIVE_SIMILARITY is the lowest threshold a derived figure may set (the candidate log's filter).
POSITIVE_SIMILARITY = 0.5
NEAR_REPEAT_SIMILARITY = 0.9
# What only a session's outcome said about a note (shown and not used in a session that failed, shown in an
# accepted one that reported nothing: a weight strictly between a flag's 0 and a use's 1) is about the context
# as a whole, not about the note: it counts for the same question only, the similarity at which the graph
# merges two questions into one node (feedback.rules.MERGE_SIMILARITY). Crossing at the near-repeat threshold
# it pushed in the other notes an accepted session was shown, and set off exploration, for questions nobody
# reported (LoCoMo 26, outcome only: 2 of 75 test questions lost their useful note, -2.0 points).
# docs/decisions/0011-outcome-evidence-same-question-only.md
# A flag (a note reported as not useful) counts for the same question only too: a near-repeat is often the same
# question about another fact ("when did she paint the lake" beside "when did she paint the sunrise"), whose
# answer the other flagged. Crossing at the near-repeat threshold, a train question's flag took a test question's
# only useful note out of its top 5 and set off exploration for it (LoCoMo 49, full reports).
# docs/decisions/0012-flags-same-question-only.md
SAME_QUESTION = 0.95  # = feedback.rules.MERGE_SIMILARITY (no import: this module is pure; a test holds them equal)


def evidence_ramp(similarity: float, threshold: float) -> float:
    """How much a past question's evidence counts for this one: 0 at ``threshold``, 1 at an identical question."""
    if similarity < threshold:
        return 0.0
    return min(1.0, (similarity - threshold) / (1.0 - threshold))


@dataclass(frozen=True)
class Evidence:
    """What one similar past question says about one note: its ``answered`` edge, read as evidence.

    ``question_id`` is the question node, ``similarity`` its query's cosine to this one, ``weight``
    the edge's weight (0.5 neutral; ``feedback.rules.answered_after``), ``edge_id`` the edge (its
    history names the sessions that taught it).
    """

    question_id: int
    similarity: float
    node_id: int
    weight: float
    edge_id: int = 0

    @property
    def value(self) -> float:
        """The evidence in [-1, 1]: 2 * weight - 1."""
        return 2.0 * self.weight - 1.0

    @property
    def reported(self) -> bool:
        """Whether an agent reported it (a use: weight 1; a flag: weight 0), not only the session's outcome."""
        return self.weight >= 1.0 or self.weight <= 0.0

    def ramp(self, positive: float | None = None) -> float:
        """Its strength for this question: a reported use from questions at least ``positive`` alike (the
        graph's derived figure; None: near-repeats only, >= NEAR_REPEAT_SIMILARITY), a flag and what only an
        outcome said from the same question (>= SAME_QUESTION), each ramped by similarity."""
        if not self.reported or self.value < 0:
            threshold = SAME_QUESTION
        else:
            threshold = NEAR_REPEAT_SIMILARITY if positive is None else max(POSITIVE_SIMILARITY, float(positive))
        return evidence_ramp(self.similarity, threshold)


@dataclass
class Recall:
    """The question-conditional evidence for one query: ``memory`` per node, the rows behind it, and
    whether the same question's context failed (``failed``: the only case where exploration applies)."""

    memory: dict[int, float] = field(default_factory=dict)
    rows: dict[int, list[Evidence]] = field(default_factory=dict)
    failed: bool = False

    def novel(self, node_id: int) -> bool:
        """No similar question has evidence about it (never shown to a similar question that reported)."""
        return node_id not in self.rows


def recall_questions(evidence: Iterable[Evidence], positive: float | None = None) -> Recall:
    """``memory`` of each note from the ``answered`` edges of the similar past questions.

    memory = sum(ramp * value) / max(1, sum(ramp)) over the questions whose evidence counts
    (``Evidence.ramp`` > 0; ``positive``: the graph's derived similarity for positive evidence): an identical
    question where the note was used once gives 1 (full strength on first report), weaker similarity gives
    less, several questions average. ``failed`` when the same question holds negative evidence (a flag, or
    its context shown and not used in a session that failed). Notes without counting evidence have no
    memory. No evidence: an empty Recall (a frozen graph's answer).
    """
    recall = Recall()
    sums: dict[int, list[float]] = {}
    for e in evidence:
        r = e.ramp(positive)
        if r <= 0.0 or e.value == 0.0:
            continue
        recall.rows.setdefault(e.node_id, []).append(e)
        acc = sums.setdefault(e.node_id, [0.0, 0.0])
        acc[0] += r * e.value
        acc[1] += r
        if e.value < 0:
            recall.failed = True
    recall.memory = {n: s / max(1.0, w) for n, (s, w) in sums.items()}
    return recall


@dataclass(frozen=True)
class Reach:
    """How a node was reached: its hops from the seed it grew from, the edges on the way, and the relevance
    its path carried to it (``inherited``; None for an entry point or a start node)."""

    node_id: int
    hops: int
    path: tuple[int, ...] = ()
    via: Scored | None = None  # the traversal score of the last edge on the path
    inherited: float | None = None


class FrontierRow(NamedTuple):
    """A row of ``spread``'s frontier (a heap: compared as the tuple it is, the highest relevance first)."""

    negative_relevance: float
    hops: int
    node_id: int
    edge_id: int  # the link it came through; 0 for a seed's own entry
    order: int  # the order rows were pushed: the last tie-break
    reach: Reach


# Best-first by carried relevance, links walked both ways: docs/decisions/0008-expansion-both-ways-carried-relevance.md
def spread(
    seeds: Mapping[int, tuple[Reach, float]],
    edges: Sequence[Scored],
    match: Mapping[int, float],
    scores: NodeScores,
    max_hops: int,
    limit: int,
    keep: Collection[int] = (),
) -> dict[int, Reach]:
    """Best-first expansion from ``seeds`` that carries relevance along the links: the nodes it reaches and how.

    ``seeds``: node id -> (its Reach, its relevance: ``NodeScores.relevance`` where it entered). ``edges``: the
    scored links around them, each walked from ``source_id`` to ``target_id`` (expansion reads both
    directions), with ``specificity``. ``match``: the vector and lexical contributions of every node the
    links reach that has any (its own match to the query; absent: 0).

    A node reached from ``m`` over link ``e`` at ``h`` hops has relevance max(its own match plus the hop term
    at ``h``, edge_carry(e) * relevance(m)): a link passes on a share of what its source is worth to the
    question, so a turn next to the best hit competes with the fifth entry point, and a learned or tuned link
    passes more. The frontier is ordered by that relevance (highest first, then fewer hops, then the node
    id), so each node is settled by its best way, as in Dijkstra's algorithm over a product of carries below
    1. A seed starts at its own relevance and is settled through a link only when a better seed's link
    carries more than that; the seeds in ``keep`` (the caller's start nodes) always keep their own way.
    Expansion stops at ``max_hops`` and after ``limit`` nodes settled through a link.
    Returns the nodes settled through a link, in that order, each with ``inherited`` = the relevance its
    last link carried to it.
    """
    by_source: dict[int, list[Scored]] = {}
    for s in edges:
        by_source.setdefault(s.candidate.source_id, []).append(s)
    policy = scores.policy
    hop_k = scores.coefficients[2]
    # A seed's own entry has edge id 0 in its heap row; a row through a link has the link's id (positive).
    order = itertools.count()  # the last tie-break: the order rows were pushed
    frontier = [FrontierRow(-relevance, 0, n, 0, next(order), reach) for n, (reach, relevance) in seeds.items()]
    heapq.heapify(frontier)
    settled: set[int] = set()
    reached: dict[int, Reach] = {}

    def push(reach: Reach, relevance: float) -> None:
        if reach.hops >= max_hops:
            return
        hops = reach.hops + 1
        for s in by_source.get(reach.node_id, ()):
            e = s.candidate
            if e.target_id in settled or e.target_id in keep:
                continue
            carried = edge_carry(policy, e.weight, e.priority, e.specificity) * relevance
            seed = seeds.get(e.target_id)
            if seed is not None and carried <= seed[1]:
                continue  # a seed keeps its own way unless a better one carries more
            own = match.get(e.target_id, 0.0) + scores.hop(hops) * hop_k
            best = max(carried, own)
            path = (*reach.path, e.edge_id)
            reached_by = Reach(e.target_id, hops, path, s, carried)
            heapq.heappush(frontier, FrontierRow(-best, hops, e.target_id, e.edge_id, next(order), reached_by))

    while frontier and len(reached) < limit:
        row = heapq.heappop(frontier)
        if row.node_id in settled:
            continue
        settled.add(row.node_id)
        if row.edge_id:
            reached[row.node_id] = row.reach
        push(row.reach, -row.negative_relevance)
    return reached


@dataclass
class Selection:
    """Which items of an ordered candidate list fit the budget, and why the others were cut."""

    selected: list[bool]
    reasons: list[str]
    spent: int


def select_within_budget(node_ids: Sequence[int], costs: Sequence[int], budget: int) -> Selection:
    """Walk the ordered candidates and select each new node while the budget allows.

    ``costs`` are the items' costs in the budget's unit (1 per item, or estimated tokens). A
    candidate whose node is already selected is cut as a duplicate and costs nothing. The walk
    stops at the first new node that does not fit: everything after it is cut, so a lower-ranked
    small item never jumps ahead of a higher-ranked one.
    """
    selected, reasons, taken = [], [], set()
    spent, stopped = 0, False
    for node_id, cost in zip(node_ids, costs, strict=False):
        if stopped:
            selected.append(False)
            reasons.append("budget")
        elif node_id in taken:
            selected.append(False)
            reasons.append("duplicate")
        elif spent + cost <= budget:
            taken.add(node_id)
            spent += cost
            selected.append(True)
            reasons.append("")
        else:
            stopped = True
            selected.append(False)
            reasons.append("budget")
    return Selection(selected, reasons, spent)


def explore_slot(selection: Selection, novel: Sequence[bool], costs: Sequence[int], budget: int) -> Selection:
    """Give the last selected item's place to the best cut candidate that similar past retrievals never showed.

    What an agent is never shown it cannot report as used, so without this the graph settles on
    the first answers it found. Applies only when at least two items are selected, none of them is
    unseen (``novel``), and a candidate cut by the budget is unseen and fits in the freed cost: the
    first such candidate (the best-ranked) is selected with reason ``explore`` and the last selected
    item is cut with reason ``displaced``. One slot at most, always the last, so the best hits stay.
    """
    chosen = [i for i, sel in enumerate(selection.selected) if sel]
    if len(chosen) < 2 or any(novel[i] for i in chosen):
        return selection
    last = chosen[-1]
    room = costs[last] + (budget - selection.spent)
    for j in range(last + 1, len(novel)):
        if selection.reasons[j] == "budget" and novel[j] and costs[j] <= room:
            selected, reasons = list(selection.selected), list(selection.reasons)
            selected[last], reasons[last] = False, "displaced"
            selected[j], reasons[j] = True, "explore"
            return Selection(selected, reasons, selection.spent - costs[last] + costs[j])
    return selection


# ---------------------------------------------------------------------------------------------
# Explanation


def explain_pair(i: Mapping[str, Mapping[str, float]], j: Mapping[str, Mapping[str, float]]) -> list[dict]:
    """Which components made candidate i beat candidate j.

    ``i`` and ``j`` are components dicts (name -> {raw, coefficient, contribution}). Returns one
    row per component name, with both contributions and difference = i - j, largest difference
    first (ties by name). The differences sum to total(i) - total(j).
    """
    names = sorted(set(i) | set(j))
    rows = []
    for name in names:
        ci = float(i.get(name, {}).get("contribution", 0.0))
        cj = float(j.get(name, {}).get("contribution", 0.0))
        rows.append({"component": name, "i": ci, "j": cj, "difference": ci - cj})
    rows.sort(key=lambda r: (-round(r["difference"], TIE_DIGITS), r["component"]))
    return rows


# ---------------------------------------------------------------------------------------------
# What-if metrics


def kendall_tau(order_a: Sequence[str], order_b: Sequence[str]) -> float:
    """Kendall's tau-a between two orders of the same items (items in only one are ignored).

    1.0: same order, -1.0: reversed. Fewer than two common items: 1.0 (nothing can disagree).
    """
    in_b = set(order_b)
    common = [x for x in order_a if x in in_b]
    n = len(common)
    if n < 2:
        return 1.0
    pos_b = {x: p for p, x in enumerate(order_b)}
    discordant = _inversions([pos_b[x] for x in common])
    pairs = n * (n - 1) // 2
    return (pairs - 2 * discordant) / pairs


def _inversions(values: list[int]) -> int:
    """Pairs p < q with values[p] > values[q], by merge sort: O(n log n), so long candidate lists stay fast."""
    if len(values) < 2:
        return 0
    mid = len(values) // 2
    left, right = sorted(values[:mid]), sorted(values[mid:])
    count = _inversions(values[:mid]) + _inversions(values[mid:])
    j = 0
    for x in left:  # for each left value, how many right values are smaller
        while j < len(right) and right[j] < x:
            j += 1
        count += j
    return count


def rank_changes(order_a: Sequence[str], order_b: Sequence[str]) -> list[dict]:
    """Items whose 1-based rank differs between two orders: {id, before, after, delta = before - after}.

    A positive delta means the item moved up under ``order_b``. Sorted by |delta| desc, then id.
    """
    pos_b = {x: p + 1 for p, x in enumerate(order_b)}
    changes = []
    for p, x in enumerate(order_a, start=1):
        if x in pos_b and pos_b[x] != p:
            changes.append({"id": x, "before": p, "after": pos_b[x], "delta": p - pos_b[x]})
    changes.sort(key=lambda c: (-abs(c["delta"]), c["id"]))
    return changes


def reciprocal_rank(order: Sequence[str], used: Iterable[str]) -> float:
    """1 / rank of the first used item in ``order``; 0 when none of the used items is there."""
    used = set(used)
    for p, x in enumerate(order, start=1):
        if x in used:
            return 1.0 / p
    return 0.0


def hit_at_k(order: Sequence[str], used: Iterable[str], k: int) -> float:
    """1.0 when a used item is among the first k of ``order``, else 0.0."""
    used = set(used)
    return 1.0 if any(x in used for x in order[:k]) else 0.0


@dataclass
class ReplayResult:
    """The comparison of one frozen candidate set under two policies (current and draft)."""

    current: list[str]
    draft: list[str]
    changes: list[dict] = field(default_factory=list)
    top1_flip: bool = False
    kendall_tau: float = 1.0
    used: list[str] = field(default_factory=list)
    mrr_current: float | None = None
    mrr_draft: float | None = None
    hit_current: float | None = None
    hit_draft: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def compare_orders(current: Sequence[str], draft: Sequence[str], used: Iterable[str], k: int) -> ReplayResult:
    """Rank changes, top-1 flip, Kendall tau and (when items were used) MRR and hit@k under each order."""
    used = sorted(set(used))
    result = ReplayResult(
        current=list(current),
        draft=list(draft),
        changes=rank_changes(current, draft),
        top1_flip=bool(current) and bool(draft) and current[0] != draft[0],
        kendall_tau=kendall_tau(current, draft),
        used=used,
    )
    if used:
        result.mrr_current = reciprocal_rank(current, used)
        result.mrr_draft = reciprocal_rank(draft, used)
        result.hit_current = hit_at_k(current, used, k)
        result.hit_draft = hit_at_k(draft, used, k)
    return result


def aggregate(results: Sequence[ReplayResult]) -> dict:
    """Aggregate replay metrics: counts, top-1 flip rate, mean tau, and MRR / hit@k over injections with uses."""
    n = len(results)
    with_uses = [r for r in results if r.used]

    def mean(values):
        values = list(values)
        return sum(values) / len(values) if values else None

    return {
        "injections": n,
        "injections_with_uses": len(with_uses),
        "top1_flips": sum(1 for r in results if r.top1_flip),
        "top1_flip_rate": (sum(1 for r in results if r.top1_flip) / n) if n else None,
        "candidates_moved": sum(len(r.changes) for r in results),
        "mean_kendall_tau": mean(r.kendall_tau for r in results),
        "mrr_current": mean(r.mrr_current for r in with_uses),
        "mrr_draft": mean(r.mrr_draft for r in with_uses),
        "hit_at_k_current": mean(r.hit_current for r in with_uses),
        "hit_at_k_draft": mean(r.hit_draft for r in with_uses),
    }
