"""The abstention gate and the floor's calibration, pure (ranking.abstention, feedback.rules.floor_at_recall)."""

import pytest

from feedback.rules import binomial_tail, floor_at_recall
from ranking import abstention


def test_confidence_is_the_best_entry_point_with_a_small_lexical_share():
    entries = [("vector", 0.41, 0.0), ("lexical", 0.20, 10.0), ("expansion", 0.90, 30.0), ("memory", 0.95, 0.0)]
    # Expansion and memory do not raise it: the best entry point is the vector hit (0.41), the lexical hit
    # adds half of LEXICAL_SHARE to its own 0.20 (0.25): the vector hit stays the best.
    assert abstention.confidence(entries) == pytest.approx(0.41)
    assert abstention.confidence([("lexical", 0.38, 10.0)]) == pytest.approx(0.38 + abstention.LEXICAL_SHARE / 2)
    assert abstention.entry_match(None, 0.0) == 0.0  # no vector, no word: nothing
    assert abstention.entry_match(0.5, 1e9) == pytest.approx(0.5 + abstention.LEXICAL_SHARE)  # saturates
    assert abstention.confidence([]) == 0.0
    assert abstention.confidence([("expansion", 0.9, 5.0)]) == 0.0  # no entry point: nothing relevant
    assert abstention.confidence([("triplet", -0.3, 0.0)]) == 0.0  # never below 0


def test_the_gate_reads_the_whole_answer_against_the_floor():
    assert not abstention.abstains(0.0, 0.0)  # floor 0: never, whatever the confidence
    assert abstention.abstains(0.199, 0.2)
    assert not abstention.abstains(0.2, 0.2)  # at the floor passes
    assert not abstention.abstains(0.05, 0.2, directed=True)  # start nodes or anchors: the caller named where


def test_floor_at_recall_keeps_the_target_share_with_the_assurance_asked():
    positives = [i / 100 for i in range(1, 101)]  # 0.01 .. 1.00
    # 100 answers: P(Binomial(100, 0.05) >= 2) = 0.96 >= 0.9 > P(>= 3) = 0.88: the 2nd lowest.
    result = floor_at_recall(positives, [0.01, 0.10, 0.50], 0.95)
    assert result.floor == 0.02 and result.recall == pytest.approx(0.99)
    assert result.positives == 100 and result.negatives == 3
    assert result.abstained_negatives == pytest.approx(1 / 3)  # 0.01 only
    # With assurance 0.5 it is nearly the plain quantile; many answers bring the floor to the quantile.
    assert floor_at_recall(positives, [], 0.95, assurance=0.5).floor == 0.05
    assert floor_at_recall(positives * 20, [], 0.95).floor == 0.05
    # Too few answers to promise the target: the lowest one. Keep everything: the lowest one.
    assert floor_at_recall([0.3, 0.4, 0.5] * 7, [], 0.95).floor == 0.3
    assert floor_at_recall(positives, [], 1.0).floor == 0.01
    assert floor_at_recall(positives, [], 0.95).abstained_negatives is None
    # Rounded down to 4 places, so that the positive it is taken from still passes.
    assert floor_at_recall([0.123456] * 20, [], 0.95).floor == 0.1234
    assert binomial_tail(100, 0.05, 2) == pytest.approx(1 - 0.95**100 - 100 * 0.05 * 0.95**99)
    with pytest.raises(ValueError):
        floor_at_recall([], [0.1], 0.95)
    with pytest.raises(ValueError):
        floor_at_recall([0.5], [], 0.0)
