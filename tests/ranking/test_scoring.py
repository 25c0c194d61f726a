"""Pure scoring, with numbers computed by hand. No database: these tests do not use the db fixture."""

import ast
import itertools
import math

import pytest

from ranking import scoring
from ranking.scoring import EdgeCandidate, NodeCandidate, Policy

P = (
    Policy()
)  # the model's defaults: 0.5 / 0.35 / 0.15, fi 0.3; hybrid 0.6 / 0.2 / 0.1 / 0.1, 30 days, 0.6, 0.25, 2 hops


def approx(x):
    return pytest.approx(x, abs=1e-12)


def test_module_imports_nothing_from_django():
    tree = ast.parse(open(scoring.__file__).read())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= {"__future__", "collections", "heapq", "itertools", "math", "dataclasses", "typing"}


def test_policy_from_mapping_ignores_other_numbers():
    p = Policy.from_mapping({"coef_weight": 1.0, "learning_rate": 0.2, "ceiling_mode": "soft"})
    assert p.coef_weight == 1.0 and p.coef_semantic == 0.35


# --- traversal score -------------------------------------------------------------------------


def test_traversal_score_by_hand():
    c = EdgeCandidate(
        edge_id=1, source_id=10, target_id=11, hops=1, weight=0.8, feedback_weight=0.4, priority=0.2, similarity=0.5
    )
    s = scoring.score_edge(c, P)
    # blended = 0.7 * 0.8 + 0.3 * 0.4 = 0.68
    assert s.component("weight").raw == approx(0.68)
    assert s.component("weight").coefficient == 0.5
    assert s.component("weight").contribution == approx(0.34)
    assert s.component("semantic").contribution == approx(0.175)
    assert s.component("priority").contribution == approx(0.03)
    assert s.total == approx(0.545)
    assert [x.name for x in s.components] == ["weight", "semantic", "priority"]


def test_feedback_influence_zero_and_one():
    c = EdgeCandidate(1, 10, 11, 1, weight=0.9, feedback_weight=0.1, priority=0.0, similarity=0.0)
    assert scoring.score_edge(c, P.with_changes({"feedback_influence": 0.0})).component("weight").raw == approx(0.9)
    assert scoring.score_edge(c, P.with_changes({"feedback_influence": 1.0})).component("weight").raw == approx(0.1)


def test_negative_priority_lowers_the_total():
    c = EdgeCandidate(1, 10, 11, 1, weight=0.5, feedback_weight=0.5, priority=-1.0, similarity=0.0)
    s = scoring.score_edge(c, P)
    assert s.component("priority").contribution == approx(-0.15)
    assert s.total == approx(0.25 - 0.15)


def test_missing_similarity_counts_as_zero():
    c = EdgeCandidate(1, 10, 11, 1, weight=0.5, feedback_weight=0.5, priority=0.0, similarity=None)
    s = scoring.score_edge(c, P)
    assert s.component("semantic").raw == 0.0 and s.component("semantic").contribution == 0.0
    assert s.total == approx(0.25)


def test_equal_edges_tie_break_by_hops_then_id_whatever_the_input_order():
    base = dict(source_id=10, weight=0.5, feedback_weight=0.5, priority=0.0, similarity=0.3)
    cands = [
        EdgeCandidate(edge_id=7, target_id=1, hops=2, **base),
        EdgeCandidate(edge_id=9, target_id=2, hops=1, **base),
        EdgeCandidate(edge_id=3, target_id=3, hops=1, **base),
        EdgeCandidate(edge_id=12, target_id=4, hops=1, **base),
    ]
    orders = {tuple(s.stable_id for s in scoring.rank_edges(p, P)) for p in itertools.permutations(cands)}
    assert orders == {("edge:3", "edge:9", "edge:12", "edge:7")}


def test_float_noise_does_not_break_a_tie():
    # 0.1 + 0.2 != 0.3 in binary floating point; rounding in the sort key keeps them tied, so the id decides.
    p = P.with_changes({"feedback_influence": 0.0})
    a = EdgeCandidate(2, 10, 11, 1, weight=0.1 + 0.2, feedback_weight=0.0, priority=0.0, similarity=0.0)
    b = EdgeCandidate(1, 10, 12, 1, weight=0.3, feedback_weight=0.0, priority=0.0, similarity=0.0)
    ranked = scoring.rank_edges([a, b], p)
    assert scoring.score_edge(a, p).total > scoring.score_edge(b, p).total  # the noise is there
    assert [s.stable_id for s in ranked] == ["edge:1", "edge:2"]


# --- hybrid factors --------------------------------------------------------------------------


def test_hybrid_score_by_hand():
    c = NodeCandidate(node_id=5, vector=0.9, hops=1, age_days=30.0, persona=0.5)
    s = scoring.NodeScores(P).score(c)
    assert s.component("vector").contribution == approx(0.54)
    assert s.component("hop").raw == approx(0.6) and s.component("hop").contribution == approx(0.12)
    assert s.component("persona").contribution == approx(0.05)
    assert s.component("recency").raw == approx(0.5) and s.component("recency").contribution == approx(0.05)
    assert s.total == approx(0.76)
    assert [x.name for x in s.components] == [
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
    ]
    # Untouched learned numbers (0.5) and no path or history add nothing.
    assert all(s.component(n).contribution == 0.0 for n in ("feedback", "path", "priority", "memory", "exploration"))


def test_learned_components_are_biases_around_neutral():
    base = NodeCandidate(node_id=5, vector=0.9, hops=1)
    learned = NodeCandidate(
        node_id=5, vector=0.9, hops=1, feedback_weight=0.2, path_weight=0.3, priority=0.5, novelty=1.0
    )
    P = scoring.Policy(coef_path=0.3)  # the path term is off by default (docs/ranking.md)
    s = scoring.NodeScores(P).score(learned)
    # The node's own EMA pulls at most FEEDBACK_BOUND below neutral (a global prior, bounded).
    assert s.component("feedback").raw == approx(-0.05) and s.component("feedback").contribution == approx(-0.015)
    assert s.component("path").raw == approx(-0.2) and s.component("path").contribution == approx(-0.06)
    assert s.component("priority").contribution == approx(0.075)
    assert s.component("exploration").contribution == approx(0.03)
    assert s.total - scoring.NodeScores(P).score(base).total == approx(-0.015 - 0.06 + 0.075 + 0.03)
    # The node's own EMA only lowers (it rises with exposure, see scoring.NodeScores).
    assert scoring.NodeScores(P).score(
        NodeCandidate(node_id=5, vector=0.9, hops=1, feedback_weight=0.9)
    ).total == approx(scoring.NodeScores(P).score(base).total)
    # A weight below neutral lowers a candidate, never removes it.
    low = NodeCandidate(node_id=5, vector=0.9, hops=1, feedback_weight=0.0)
    assert scoring.NodeScores(P).score(low).total == approx(scoring.NodeScores(P).score(base).total - 0.015)
    slightly = NodeCandidate(node_id=5, vector=0.9, hops=1, feedback_weight=0.47)
    assert scoring.NodeScores(P).score(slightly).component("feedback").raw == approx(-0.03)


def _spread(seeds, edges, match=None, policy=P, max_hops=2, limit=10):
    from ranking.scoring import Reach

    scored = [scoring.score_edge(e, policy) for e in edges]
    scores = scoring.NodeScores(policy)
    return scoring.spread({n: (Reach(n, 0), r) for n, r in seeds.items()}, scored, match or {}, scores, max_hops, limit)


def test_expansion_carries_relevance_best_first_bounded_with_the_path():
    edges = [
        EdgeCandidate(1, 10, 11, 1, weight=0.9, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(2, 10, 12, 1, weight=0.2, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(3, 11, 13, 2, weight=0.5, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(4, 13, 14, 3, weight=0.5, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(5, 12, 10, 2, weight=0.9, feedback_weight=0.5, priority=0.0),
    ]  # back to the seed: it keeps its own way (nothing carries more than its own relevance)
    learning = P.with_changes({"learned_carry": 0.2})  # the links' learned weights move their carry
    reached = _spread({10: 1.0}, edges, policy=learning)
    carry11 = scoring.edge_carry(learning, 0.9, 0.0)  # 0.9 + learned_carry * 0.5 * 0.4
    carry12 = scoring.edge_carry(learning, 0.2, 0.0)  # 0.9 - learned_carry * 0.5 * 0.3
    assert (carry11, carry12) == (approx(0.94), approx(0.87))
    # 11 carries 0.94 of 10's relevance, 12 0.87; 13 through 11: 0.94 * 0.9 (less than 12); 14 is beyond 2 hops.
    assert list(reached) == [11, 12, 13]
    assert reached[11].inherited == approx(0.94)
    assert reached[12].inherited == approx(0.87)
    assert (reached[13].hops, reached[13].path) == (2, (1, 3)) and reached[13].via.candidate.edge_id == 3
    assert reached[13].inherited == approx(0.94 * 0.9)
    assert list(_spread({10: 1.0}, edges, policy=learning, limit=1)) == [11]
    # By default (learned_carry 0) what agents taught the two links stays out of the carry: both carry 0.9.
    by_default = _spread({10: 1.0}, edges)
    assert (by_default[11].inherited, by_default[12].inherited) == (approx(0.9), approx(0.9))


def test_a_node_that_matches_on_its_own_keeps_its_own_relevance_in_the_walk():
    edges = [
        EdgeCandidate(1, 10, 11, 1, weight=0.5, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(2, 10, 12, 1, weight=0.5, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(3, 12, 13, 2, weight=0.5, feedback_weight=0.5, priority=0.0),
    ]
    # 12 matches the query itself (0.8 + hop term 0.2 * 0.6) more than 10 carries to it (0.9 * 0.9 * 0.5).
    reached = _spread({10: 0.5}, edges, match={12: 0.8})
    assert list(reached)[0] == 12
    assert reached[13].inherited == approx(0.9 * (0.8 + 0.2 * 0.6))  # what 12 carries on is its own worth


def test_a_weaker_seed_is_lifted_only_when_a_better_one_carries_more():
    edges = [
        EdgeCandidate(1, 10, 11, 1, weight=0.5, feedback_weight=0.5, priority=0.0),
        EdgeCandidate(2, 10, 12, 1, weight=0.5, feedback_weight=0.5, priority=0.0),
    ]
    reached = _spread({10: 1.0, 11: 0.5, 12: 0.95}, edges)
    assert set(reached) == {11}  # 0.9 lifts 11 (0.5); 12 keeps its own 0.95 (0.9 * 0.9 is less)
    assert reached[11].inherited == approx(0.9)


def test_edge_carry_rises_with_the_links_weight_and_priority_and_fades_at_hubs():
    assert scoring.edge_carry(P, None, 0.0) == approx(0.9)
    assert scoring.edge_carry(P, 0.7, 0.0) == approx(0.9)  # by default a learned weight does not move it
    learning = P.with_changes({"learned_carry": 0.2})
    assert scoring.edge_carry(learning, 0.7, 0.0) == approx(0.9 + 0.2 * 0.5 * 0.2)  # with learned_carry, a little
    assert scoring.edge_carry(P.with_changes({"carry": 0.98}), 1.0, 1.0) == approx(0.99)  # capped below 1
    assert scoring.edge_carry(P, 0.5, -1.0) == approx(0.75)
    assert scoring.edge_carry(P, 0.5, 0.0, specificity=0.5) == approx(0.45)
    assert scoring.edge_carry(P.with_changes({"carry": 0.0}), 0.5, -1.0) == 0.0
    # carry 0 turns carrying off: a learned (weight 0.9), tuned (priority 1) link carries nothing either.
    assert scoring.edge_carry(P.with_changes({"carry": 0.0}), 0.9, 1.0) == 0.0
    assert scoring.link_specificity(3, 3, 3) == 1.0
    assert scoring.link_specificity(27, 3, 3) == approx(1 / 3)
    assert scoring.link_specificity(0, 0, 3) == 1.0  # unknown degrees count as one link


def test_the_graph_component_is_the_lift_over_the_nodes_own_relevance():
    own = NodeCandidate(node_id=5, vector=0.5, hops=1)
    lifted = NodeCandidate(node_id=5, vector=0.5, hops=1, inherited=0.9)
    base = scoring.NodeScores(P).score(own)
    s = scoring.NodeScores(P).score(lifted)
    relevance = 0.6 * 0.5 + 0.2 * 0.6
    assert s.component("graph").contribution == approx(0.9 - relevance)
    assert s.total == approx(base.total + 0.9 - relevance)
    below = NodeCandidate(node_id=5, vector=0.5, hops=1, inherited=0.1)
    assert scoring.NodeScores(P).score(below).total == approx(base.total)  # never lowers


@pytest.mark.parametrize(
    "hops,expected",
    [(0, 1.0), (1, 0.6), (2, 0.36), (3, 0.25), (None, 0.25)],
)
def test_hop_factor(hops, expected):
    # 3 hops is beyond max_hops (2): unreachable within the bound gives the floor.
    assert scoring.hop_factor(hops, P) == approx(expected)


def test_hop_factor_floor_wins_when_decay_goes_below_it():
    p = P.with_changes({"max_hops": 3})
    assert scoring.hop_factor(3, p) == approx(0.25)  # 0.6 ** 3 = 0.216 < 0.25
    assert scoring.hop_factor(2, p.with_changes({"hop_floor": 0.4})) == approx(0.4)  # 0.36 < 0.4


def test_recency_factor():
    assert scoring.recency_factor(0.0, 30.0) == 1.0
    assert scoring.recency_factor(60.0, 30.0) == approx(0.25)
    assert scoring.recency_factor(-5.0, 30.0) == 1.0  # future timestamp: age 0
    assert scoring.recency_factor(None, 30.0) == 0.0  # unknown age


def test_equal_semantics_differing_only_in_timestamp():
    fresh = NodeCandidate(node_id=2, vector=0.7, hops=1, age_days=0.0, persona=0.0)
    old = NodeCandidate(node_id=1, vector=0.7, hops=1, age_days=60.0, persona=0.0)
    ranked = scoring.rank(scoring.NodeScores(P).score(c) for c in [old, fresh])
    assert [s.stable_id for s in ranked] == ["node:2", "node:1"]
    diff = scoring.explain_pair(ranked[0].components_dict(), ranked[1].components_dict())
    assert diff[0]["component"] == "recency" and diff[0]["difference"] == approx(0.1 * (1.0 - 0.25))
    assert all(row["difference"] == 0.0 for row in diff[1:])


def test_equal_semantics_differing_only_in_reachability():
    near = NodeCandidate(node_id=2, vector=0.7, hops=1, age_days=10.0)
    unreachable = NodeCandidate(node_id=1, vector=0.7, hops=None, age_days=10.0)
    ranked = scoring.rank(scoring.NodeScores(P).score(c) for c in [unreachable, near])
    assert [s.stable_id for s in ranked] == ["node:2", "node:1"]
    assert ranked[0].total - ranked[1].total == approx(0.2 * (0.6 - 0.25))
    diff = scoring.explain_pair(ranked[0].components_dict(), ranked[1].components_dict())
    assert [r["component"] for r in diff if r["difference"] != 0.0] == ["hop"]


def test_equal_semantics_differing_only_in_persona():
    liked = NodeCandidate(node_id=2, vector=0.7, hops=2, age_days=10.0, persona=0.8)
    neutral = NodeCandidate(node_id=1, vector=0.7, hops=2, age_days=10.0, persona=0.0)
    ranked = scoring.rank(scoring.NodeScores(P).score(c) for c in [neutral, liked])
    assert [s.stable_id for s in ranked] == ["node:2", "node:1"]
    diff = scoring.explain_pair(ranked[0].components_dict(), ranked[1].components_dict())
    assert diff[0] == {"component": "persona", "i": approx(0.08), "j": 0.0, "difference": approx(0.08)}
    assert [r["component"] for r in diff if r["difference"] != 0.0] == ["persona"]


def test_zero_persona_affinity_is_shown_with_its_coefficient():
    s = scoring.NodeScores(P).score(NodeCandidate(node_id=1, vector=0.5, hops=0, age_days=0.0, persona=0.0))
    assert s.component("persona").as_dict() == {"raw": 0.0, "coefficient": 0.1, "contribution": 0.0}
    assert s.total == approx(0.3 + 0.2 + 0.0 + 0.1)


def test_stale_and_unknown_records_get_almost_no_recency():
    stale = scoring.NodeScores(P).score(NodeCandidate(node_id=1, vector=0.5, age_days=3650.0))
    unknown = scoring.NodeScores(P).score(NodeCandidate(node_id=2, vector=0.5, age_days=None))
    assert stale.component("recency").raw == approx(0.5 ** (3650 / 30)) and stale.component("recency").raw < 1e-30
    assert unknown.component("recency").raw == 0.0
    # Stale and unreachable both fall back: vector + hop floor only.
    assert unknown.total == approx(0.6 * 0.5 + 0.2 * 0.25)


def test_identical_hybrid_candidates_keep_a_stable_order():
    cands = [NodeCandidate(node_id=n, vector=0.4, hops=None) for n in (30, 4, 17)]
    for perm in itertools.permutations(cands):
        assert [s.stable_id for s in scoring.rank(scoring.NodeScores(P).score(c) for c in perm)] == [
            "node:4",
            "node:17",
            "node:30",
        ]


def test_persona_affinity_matches_kind_and_tags_case_insensitively():
    aff = {"Decision": 0.9, "security": 0.4}
    assert scoring.persona_affinity("decision", ["x"], aff) == 0.9
    assert scoring.persona_affinity("note", ["SECURITY", "x"], aff) == 0.4
    assert scoring.persona_affinity("note", ["x"], aff) == 0.0
    assert scoring.persona_affinity("decision", [], {}) == 0.0


# --- best-first and budget -------------------------------------------------------------------


def _edge(eid, src, tgt, hops, sim):
    return EdgeCandidate(eid, src, tgt, hops, weight=0.5, feedback_weight=0.5, priority=0.0, similarity=sim)


def test_best_first_follows_the_frontier_not_the_global_order():
    # start 1 -> 2 (0.2), 1 -> 3 (0.1), 2 -> 4 (0.9), 9 -> 5 (0.95: source never reached). Expansion (scoring.spread):
    # each node's own match is its similarity's vector term; the start node's relevance is its hop term (0.2 * 1).
    edges = [_edge(1, 1, 2, 1, 0.2), _edge(2, 1, 3, 1, 0.1), _edge(3, 2, 4, 2, 0.9), _edge(4, 9, 5, 2, 0.95)]
    reached = _spread({1: 0.2}, edges, match={e.target_id: P.coef_vector * e.similarity for e in edges})
    order = [f"edge:{reach.path[-1]}" for reach in reached.values()]
    # edge 3 is the best overall, but it is only reachable once edge 1 took us to node 2; edge 4 never is.
    assert order == ["edge:1", "edge:3", "edge:2"] and 5 not in reached


def test_budget_stops_at_the_first_item_that_does_not_fit_and_skips_duplicates():
    sel = scoring.select_within_budget([10, 11, 10, 12, 13], [3, 4, 3, 5, 1], budget=8)
    assert sel.selected == [True, True, False, False, False]
    assert sel.reasons == ["", "", "duplicate", "budget", "budget"]
    assert sel.spent == 7


def test_items_budget():
    sel = scoring.select_within_budget([1, 2, 3], [1, 1, 1], budget=2)
    assert sel.selected == [True, True, False] and sel.spent == 2


# --- explanation ----------------------------------------------------------------------------


def test_explain_pair_sums_to_the_total_difference_largest_first():
    a = scoring.score_edge(
        EdgeCandidate(1, 10, 11, 1, weight=0.9, feedback_weight=0.5, priority=0.0, similarity=0.2), P
    )
    b = scoring.score_edge(
        EdgeCandidate(2, 10, 12, 1, weight=0.5, feedback_weight=0.5, priority=1.0, similarity=0.3), P
    )
    rows = scoring.explain_pair(a.components_dict(), b.components_dict())
    assert [r["component"] for r in rows] == ["weight", "semantic", "priority"]
    # weight: 0.5 * (0.78 - 0.5) = 0.14; semantic: 0.35 * -0.1 = -0.035; priority: -0.15
    assert [r["difference"] for r in rows] == [approx(0.14), approx(-0.035), approx(-0.15)]
    assert math.fsum(r["difference"] for r in rows) == approx(a.total - b.total)


# --- what-if metrics ------------------------------------------------------------------------


def test_kendall_tau():
    assert scoring.kendall_tau(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert scoring.kendall_tau(["a", "b", "c"], ["c", "b", "a"]) == -1.0
    # one swapped pair of three: (2 - 1) / 3
    assert scoring.kendall_tau(["a", "b", "c"], ["b", "a", "c"]) == approx(1 / 3)
    assert scoring.kendall_tau(["a"], ["a"]) == 1.0


def test_rank_changes_and_top1_flip():
    result = scoring.compare_orders(["a", "b", "c", "d"], ["c", "a", "b", "d"], used=["b"], k=2)
    assert result.top1_flip
    assert result.changes == [
        {"id": "c", "before": 3, "after": 1, "delta": 2},
        {"id": "a", "before": 1, "after": 2, "delta": -1},
        {"id": "b", "before": 2, "after": 3, "delta": -1},
    ]
    assert result.mrr_current == 0.5 and result.mrr_draft == approx(1 / 3)
    assert result.hit_current == 1.0 and result.hit_draft == 0.0
    assert result.kendall_tau == approx((4 - 2) / 6)


def test_no_uses_means_no_mrr():
    result = scoring.compare_orders(["a", "b"], ["a", "b"], used=[], k=1)
    assert not result.top1_flip and result.changes == [] and result.mrr_current is None


def test_aggregate():
    r1 = scoring.compare_orders(["a", "b"], ["b", "a"], used=["a"], k=1)
    r2 = scoring.compare_orders(["x", "y"], ["x", "y"], used=[], k=1)
    agg = scoring.aggregate([r1, r2])
    assert agg["injections"] == 2 and agg["injections_with_uses"] == 1
    assert agg["top1_flips"] == 1 and agg["top1_flip_rate"] == 0.5
    assert agg["mean_kendall_tau"] == approx(0.0)  # (-1 + 1) / 2
    assert agg["mrr_current"] == 1.0 and agg["mrr_draft"] == 0.5
    assert agg["hit_at_k_current"] == 1.0 and agg["hit_at_k_draft"] == 0.0
    assert scoring.aggregate([])["mean_kendall_tau"] is None


def test_recall_questions_uses_from_similar_questions_flags_and_misses_from_the_same_question():
    E = scoring.Evidence
    rows = [
        E(1, 1.0, 10, 1.0),  # the same question used 10: full strength
        E(1, 1.0, 11, 0.25),  # and was shown 11 in a failed session: -0.5
        E(2, 0.8, 12, 1.0),  # a similar question used 12: ramp (0.8 - 0.7) / 0.3
        E(2, 0.8, 13, 0.0),  # and flagged 13: not a near-repeat, does not count
        E(3, 0.975, 13, 0.25),  # the same question (merged at 0.95) missed 13: ramp (0.975 - 0.95) / 0.05 = 0.5
        E(4, 0.69, 14, 1.0),  # below 0.7: nothing
        E(1, 1.0, 15, 0.5),  # neutral: no evidence
        E(5, 0.92, 16, 0.25),  # a near-repeat missed 16: only its outcome said so, which is for the same question
        E(5, 0.92, 17, 0.0),  # and flagged 17: a flag is for the same question only (decision 0012)
        E(6, 0.92, 18, 0.75),  # shown in an accepted session that reported nothing: the same question only
        E(3, 0.975, 19, 0.0),  # the same question flagged 19: ramp 0.5
    ]
    recall = scoring.recall_questions(rows, 0.7)  # the graph's derived evidence similarity: 0.7
    assert recall.memory[10] == approx(1.0) and recall.memory[11] == approx(-0.5)
    assert recall.memory[12] == approx(1 / 3)
    assert recall.memory[13] == approx(-0.25)  # -0.5 * 0.5 / max(1, 0.5)
    assert recall.memory[19] == approx(-0.5)
    assert not {14, 15, 16, 17, 18} & set(recall.memory)
    assert recall.failed and recall.novel(14) and not recall.novel(10)
    # Until the graph has derived one, positive evidence counts from near-repeats only.
    cautious = scoring.recall_questions(rows)
    assert 12 not in cautious.memory and cautious.memory[10] == approx(1.0)
    # Several questions average, weighted by their ramp.
    both = scoring.recall_questions([E(1, 1.0, 10, 1.0), E(2, 1.0, 10, 0.25)])
    assert both.memory[10] == approx((1.0 - 0.5) / 2)
    # No evidence (a frozen graph): no memory, no failure, so no exploration.
    empty = scoring.recall_questions([])
    assert empty.memory == {} and not empty.failed
    assert not scoring.recall_questions([E(1, 1.0, 10, 1.0)]).failed
    # A near-repeat's flag neither counts nor sets off exploration; the same question's does.
    assert not scoring.recall_questions([E(5, 0.92, 17, 0.0)]).failed
    assert scoring.recall_questions([E(5, 0.97, 17, 0.0)]).failed


def test_explore_slot_gives_the_last_place_to_the_best_unseen_candidate():
    sel = scoring.select_within_budget([1, 2, 3, 4, 5], [1] * 5, 3)
    out = scoring.explore_slot(sel, [False, False, False, False, True], [1] * 5, 3)
    assert out.selected == [True, True, False, False, True]
    assert out.reasons == ["", "", "displaced", "budget", "explore"] and out.spent == 3
    # Nothing unseen, an unseen item already given, or a single slot: unchanged.
    assert scoring.explore_slot(sel, [False] * 5, [1] * 5, 3) == sel
    assert scoring.explore_slot(sel, [True, False, False, True, True], [1] * 5, 3) == sel
    one = scoring.select_within_budget([1, 2], [1, 1], 1)
    assert scoring.explore_slot(one, [False, True], [1, 1], 1) == one
    # Tokens: the unseen candidate must fit in what the displaced one frees.
    sel = scoring.select_within_budget([1, 2, 3], [5, 5, 9], 10)
    assert scoring.explore_slot(sel, [False, False, True], [5, 5, 9], 10) == sel


def test_the_same_question_is_the_graphs_merge_threshold():
    from feedback.rules import MERGE_SIMILARITY

    assert scoring.SAME_QUESTION == MERGE_SIMILARITY
