"""The query vector's fast path (ranking.serializers.QueryVectorField) accepts and refuses exactly what
EmbeddingField does."""

import random

import pytest
from django.conf import settings
from rest_framework import serializers

from graphadmin.api.fields import EmbeddingField
from ranking.serializers import QueryVectorField

DIM = settings.EMBEDDING_DIM
GOOD = [random.Random(3).gauss(0, 0.05) for _ in range(DIM)]


def _outcome(field, data):
    try:
        return "ok", field.run_validation(data)
    except serializers.ValidationError as exc:
        return "error", exc.detail


@pytest.mark.parametrize(
    "data",
    [
        GOOD,
        [1] * DIM,
        [1.0, 2] * (DIM // 2),
        GOOD[:-1],
        [*GOOD[:-1], "0.5"],
        [*GOOD[:-1], "x"],
        [*GOOD[:-1], None],
        [*GOOD[:-1], True],
        [*GOOD[:-1], float("nan")],
        [*GOOD[:-1], float("inf")],
        [*GOOD[:-1], 10**400],
        [*GOOD[:-1], [1.0]],
        [1e308] * DIM,
        [0] * DIM,
        "not a list",
    ],
)
def test_same_values_and_same_errors_as_the_embedding_field(data):
    assert _outcome(QueryVectorField(), data) == _outcome(EmbeddingField(), data)
