"""Scoring over the pool gives the numbers of the per-candidate scoring it replaced, bit for bit.

The reference below is the per-candidate code as it was before (one Component per term, ``math.fsum`` of
their contributions, the sort key built from the stable id's text, every way in scored): it is kept here,
not in the product, so the pool path (``scoring.NodeScores``, ``scoring.score_edge``, ``scoring.sort_key``,
``ranking.retrieval._best``) is compared with it on random pools, with ties and zeros made likely. No
database. It has since gained the eleventh component, ``graph`` (the lift of the relevance a node's path
carried, ``inherited``, over its own vector, lexical and hop contributions), written here from the formula in
docs/ranking.md, not from ``NodeScores.relevance``, so it stays an independent check.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import pytest

from ranking import retrieval, scoring
from ranking.scoring import NEUTRAL, EdgeCandidate, NodeCandidate, Policy, Reach

# ---------------------------------------------------------------------------------------------
# The reference: the per-candidate scoring as it was


@dataclass(frozen=True)
class RefComponent:
    name: str
    raw: float
    coefficient: float
    contribution: float


def ref_component(name, raw, coefficient):
    raw, coefficient = float(raw), float(coefficient)
    return RefComponent(name, raw, coefficient, raw * coefficient)


def ref_score_node(c: NodeCandidate, p: Policy):
    path = 0.0 if c.path_weight is None else c.path_weight - NEUTRAL
    vector = ref_component("vector", c.vector, p.coef_vector)
    lexical = ref_component("lexical", c.lexical, p.coef_lexical)
    hop = ref_component("hop", scoring.hop_factor(c.hops, p), p.coef_hop)
    # graph: the lift the relevance its path carried (``inherited``) gives over the node's own relevance
    # (its vector, lexical and hop contributions), never below 0; its coefficient is 1 (relevance units).
    own = math.fsum([vector.contribution, lexical.contribution, hop.contribution])
    graph = 0.0 if c.inherited is None else max(0.0, c.inherited - own)
    components = (
        vector,
        lexical,
        hop,
        ref_component("persona", c.persona, p.coef_persona),
        ref_component("recency", scoring.recency_factor(c.age_days, p.recency_half_life_days), p.coef_recency),
        ref_component("feedback", max(-0.05, min(0.0, c.feedback_weight - NEUTRAL)), p.feedback_influence),
        ref_component("path", path, p.coef_path),
        ref_component("priority", c.priority, p.coef_priority),
        ref_component("memory", c.memory or 0.0, p.coef_memory),
        ref_component("exploration", c.novelty or 0.0, p.exploration),
        ref_component("graph", graph, 1.0),
    )
    return math.fsum(x.contribution for x in components), components


def ref_score_edge(c: EdgeCandidate, p: Policy):
    components = (
        ref_component(
            "weight", scoring.blended_weight(c.weight, c.feedback_weight, p.feedback_influence), p.coef_weight
        ),
        ref_component("semantic", c.similarity if c.similarity is not None else 0.0, p.coef_semantic),
        ref_component("priority", c.priority, p.coef_priority),
    )
    return math.fsum(x.contribution for x in components), components


def ref_sort_key(total: float, hops, stable_id: str) -> tuple:
    kind, _, number = stable_id.partition(":")
    return (
        -round(total, scoring.TIE_DIGITS),
        hops if hops is not None else 1 << 30,
        kind,
        int(number) if number.isdigit() else 0,
        stable_id,
    )


def ref_best(node_id, options, vector, lexical, age, affinity, feedback_weight, p, novelty, memory, anchored, hops_a):
    """The way a node was reached that retrieval kept, as it chose it: every way scored, (sort key, ENTRY_ORDER)."""
    best = None
    for entry, reach in options:
        weight, priority = None, 0.0
        if reach.via is not None:
            weight, priority = reach.via.candidate.weight, reach.via.candidate.priority
        cand = NodeCandidate(
            node_id=node_id,
            vector=vector,
            lexical=lexical,
            hops=hops_a if anchored else reach.hops,
            age_days=age,
            persona=affinity,
            feedback_weight=feedback_weight,
            path_weight=weight,
            priority=priority,
            novelty=novelty,
            memory=memory,
            inherited=reach.inherited,
        )
        total, components = ref_score_node(cand, p)
        key = (ref_sort_key(total, cand.hops, f"node:{node_id}"), retrieval.ENTRY_ORDER[entry])
        if len(options) == 1:
            return total, components, cand, (entry, reach)
        if best is None or key < best[0]:
            best = (key, total, components, cand, (entry, reach))
    return best[1:]


# ---------------------------------------------------------------------------------------------
# Random inputs, with repeats and zeros likely (ties and signed zeros are where orders could differ)


def pick(rng, *values):
    return rng.choice(values)


def random_policy(rng) -> Policy:
    return Policy().with_changes(
        {
            "coef_vector": pick(rng, 0.6, 0.0, rng.random()),
            "coef_lexical": pick(rng, 0.3, 0.0, rng.random()),
            "coef_hop": pick(rng, 0.2, 0.0, rng.random()),
            "coef_persona": pick(rng, 0.1, 0.0),
            "coef_recency": pick(rng, 0.1, 0.0, rng.random()),
            "feedback_influence": pick(rng, 0.3, 0.0, 1.0),
            "coef_path": pick(rng, 0.0, 0.0, 0.3, rng.random()),
            "coef_priority": pick(rng, 0.15, 0.0, rng.random()),
            "coef_memory": pick(rng, 0.2, 0.0),
            "exploration": pick(rng, 0.03, 0.0),
            "hop_decay": pick(rng, 0.6, 0.5, 1.0),
            "hop_floor": pick(rng, 0.25, 0.0, 1),
            "max_hops": pick(rng, 2, 3, 1, 0),
            "recency_half_life_days": pick(rng, 30.0, 1.0, 7),
        }
    )


def random_edge(rng, edge_id, source, target, hops=1) -> EdgeCandidate:
    return EdgeCandidate(
        edge_id=edge_id,
        source_id=source,
        target_id=target,
        hops=hops,
        weight=pick(rng, 0.5, 0.5, 0.1, 0.9, rng.random()),
        feedback_weight=pick(rng, 0.5, rng.random()),
        priority=pick(rng, 0.0, 0.0, 0.5, -0.25, 1),
        similarity=pick(rng, None, 0.0, 0.3, rng.uniform(-1, 1)),
        edge_type=pick(rng, "related", "cites"),
    )


def random_node(rng, node_id, p: Policy) -> NodeCandidate:
    return NodeCandidate(
        node_id=node_id,
        vector=pick(rng, 0.0, 0.5, rng.uniform(-1, 1), 1),
        lexical=pick(rng, 0.0, 0.0, 1.0, rng.random()),
        hops=pick(rng, None, 0, 1, 2, 3, -1, p.max_hops + 1),
        age_days=pick(rng, None, 0.0, -3.0, rng.uniform(0, 400)),
        persona=pick(rng, 0.0, 0.0, 0.8, -0.5),
        feedback_weight=pick(rng, NEUTRAL, NEUTRAL, 0.1, 0.9, rng.random()),
        path_weight=pick(rng, None, 0.5, 0.2, rng.random()),
        priority=pick(rng, 0.0, 0.0, 0.5, -1),
        novelty=pick(rng, None, 1.0),
        memory=pick(rng, None, 0.0, 1.0, rng.uniform(-1, 1)),
        inherited=pick(rng, None, None, 0.0, 0.5, rng.random(), rng.uniform(0, 2)),
    )


SEEDS = range(300)


@pytest.mark.parametrize("seed", SEEDS[:60])
def test_score_node_gives_the_reference_numbers(seed):
    rng = random.Random(seed)
    p = random_policy(rng)
    pool = scoring.NodeScores(p)
    for node_id in range(1, 60):
        c = random_node(rng, node_id, p)
        total, components = ref_score_node(c, p)
        for s in (scoring.NodeScores(p).score(c), pool.score(c)):
            assert s.total.hex() == total.hex()
            assert [(x.name, x.raw, x.coefficient, x.contribution) for x in s.components] == [
                (x.name, x.raw, x.coefficient, x.contribution) for x in components
            ]
            assert [str(x.contribution) for x in s.components] == [str(x.contribution) for x in components]
            assert s.components_dict() == {
                x.name: {"raw": x.raw, "coefficient": x.coefficient, "contribution": x.contribution} for x in components
            }


@pytest.mark.parametrize("seed", SEEDS[:60])
def test_score_edge_and_sort_key_give_the_reference_numbers_and_order(seed):
    rng = random.Random(seed)
    p = random_policy(rng)
    edges = [
        random_edge(rng, rng.randint(0, 30), rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 3)) for _ in range(80)
    ]
    scored = scoring.score_edges(edges, p)
    for e, s in zip(edges, scored, strict=True):
        total, components = ref_score_edge(e, p)
        assert s.total.hex() == total.hex()
        assert [(x.name, x.raw, x.coefficient, x.contribution) for x in s.components] == [
            (x.name, x.raw, x.coefficient, x.contribution) for x in components
        ]
    nodes = [scoring.NodeScores(p).score(random_node(rng, rng.randint(0, 30), p)) for _ in range(80)]
    everything = scored + nodes
    by_reference = sorted(
        everything, key=lambda s: ref_sort_key(s.total, getattr(s.candidate, "hops", None), s.stable_id)
    )
    assert [id(s) for s in scoring.rank(everything)] == [id(s) for s in by_reference]
    for s in nodes:
        c = s.candidate
        assert scoring.node_key(s.total, c.hops, c.node_id) == scoring.sort_key(s)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_way_retrieval_keeps_is_the_reference_way(seed):
    """retrieval._best over a node's ways in (vector, lexical, start, memory, triplets, expansion), with
    repeated weights and priorities and zero coefficients: the same way, total, raws and candidate."""
    rng = random.Random(seed)
    p = random_policy(rng)
    pool = scoring.NodeScores(p)
    node_id = rng.randint(1, 500)
    options = []
    for entry in rng.sample(["vector", "lexical", "start", "memory"], rng.randint(0, 3)):
        options.append((entry, Reach(node_id, 0)))
    for i in range(rng.randint(0 if options else 1, 6)):
        edge = scoring.score_edge(random_edge(rng, 100 + i, rng.randint(1, 9), node_id), p)
        if rng.random() < 0.7:
            options.append(("triplet", Reach(node_id, 0, (edge.candidate.edge_id,), edge)))
        else:
            # The relevance its path carried (scoring.spread): repeated values, and below, at and above the
            # node's own, so that lifts of 0 and equal lifts through different links are likely.
            inherited = pick(rng, None, 0.0, 0.3, 0.3, 0.6, rng.random())
            reach = Reach(node_id, rng.randint(1, 2), (7, edge.candidate.edge_id), edge, inherited)
            options.append(("expansion", reach))
    rng.shuffle(options)
    vector, lexical = pick(rng, 0.0, rng.uniform(-1, 1)), pick(rng, 0.0, rng.random())
    age, affinity = pick(rng, None, rng.uniform(0, 90)), pick(rng, 0.0, 0.5)
    feedback_weight = pick(rng, NEUTRAL, rng.random())
    novelty, memory = pick(rng, None, 1.0), pick(rng, None, rng.uniform(-1, 1))
    anchored = rng.random() < 0.3
    anchor_hops = pick(rng, None, 0, 1, 2) if anchored else None

    total, components, cand, way = ref_best(
        node_id, options, vector, lexical, age, affinity, feedback_weight, p, novelty, memory, anchored, anchor_hops
    )
    base = pool.base(vector, lexical, affinity, age, feedback_weight, memory, novelty)
    key, got_total, (hops, weight, priority, inherited), got_way = retrieval._best(
        pool, node_id, options, base, anchored, anchor_hops
    )
    assert got_way[0] == way[0] and got_way[1] is way[1]  # the same entry and Reach: the same path and edge
    assert got_total.hex() == total.hex()
    assert key == scoring.node_key(total, cand.hops, node_id)
    assert (hops, weight, priority, inherited) == (cand.hops, cand.path_weight, cand.priority, cand.inherited)
    raws = pool.raws(base, hops, weight, priority, inherited)
    assert [x.raw for x in components] == list(raws)
    assert [str(x.raw) for x in components] == [str(r) for r in raws]  # signed zeros too


def test_a_zero_total_keeps_the_sign_of_its_own_way():
    """Ways whose contributions differ only in a zero's sign: the way kept has its own total. With every
    coefficient -0.0, a vector hit's contributions are all -0.0 and a triplet's along a weak,
    negative-priority link has two +0.0; the triplet wins the tie (ENTRY_ORDER). (CPython 3.11's fsum
    returns +0.0 for both; where fsum keeps the sign of a sum of -0.0s, sharing the vector hit's total
    would give the triplet -0.0: retrieval._best sums a zero total again for each way.)"""
    names = ("coef_vector", "coef_lexical", "coef_hop", "coef_persona", "coef_recency", "feedback_influence")
    names += ("coef_path", "coef_priority", "coef_memory", "exploration")
    p = Policy().with_changes(dict.fromkeys(names, -0.0))
    pool = scoring.NodeScores(p)
    link = scoring.score_edge(EdgeCandidate(1, 2, 3, 1, weight=0.1, feedback_weight=0.5, priority=-0.5), p)
    options = [("vector", Reach(3, 0)), ("triplet", Reach(3, 0, (1,), link))]
    base = pool.base(0.5, 0.5, 0.5, None, NEUTRAL, None, None)
    ref_total = ref_best(3, options, 0.5, 0.5, None, 0.5, NEUTRAL, p, None, None, False, None)[0]
    got = retrieval._best(pool, 3, options, base)
    assert got[3][0] == "triplet" and got[1].hex() == ref_total.hex()
