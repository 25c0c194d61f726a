"""The pure scoring Policy mirrors the model's ranking numbers: same names, same defaults."""

from dataclasses import fields

from graphadmin.models.policy import POLICY_NUMBERS
from ranking.scoring import RANKING_POLICY_NUMBERS, Policy


def test_scoring_policy_matches_the_model_defaults():
    names = [f.name for f in fields(Policy)]
    assert names == list(RANKING_POLICY_NUMBERS)
    for name in names:
        assert getattr(Policy(), name) == POLICY_NUMBERS[name][0], name
