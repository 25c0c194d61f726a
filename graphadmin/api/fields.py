"""Serializer fields that refuse non-finite numbers, wrong embedding dimensions and zero vectors by name."""

import math

from django.conf import settings
from django.core.validators import MaxLengthValidator, MinLengthValidator
from rest_framework import serializers

from graphadmin.params import BIGINT_MAX


class FiniteFloatField(serializers.FloatField):
    """A float that must be finite (no NaN, no Infinity)."""

    default_error_messages = {"not_finite": "NaN and Infinity are not allowed."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not math.isfinite(value):
            self.fail("not_finite")
        return value


class EmbeddingField(serializers.ListField):
    """A vector of exactly EMBEDDING_DIM finite floats, not all zero."""

    default_error_messages = {
        "dimension": "Expected {expected} numbers, got {got}.",
        "not_finite": "NaN and Infinity are not allowed (position {index}).",
        "zero": "An all-zero vector has no direction (its cosine similarity is undefined); send null for no embedding.",
    }

    def __init__(self, **kwargs):
        kwargs.setdefault("child", serializers.FloatField())
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        values = super().to_internal_value(data)
        if len(values) != settings.EMBEDDING_DIM:
            self.fail("dimension", expected=settings.EMBEDDING_DIM, got=len(values))
        for index, value in enumerate(values):
            if not math.isfinite(value):
                self.fail("not_finite", index=index)
        if not any(values):
            self.fail("zero")
        return values

    def to_representation(self, value):
        return None if value is None else [float(v) for v in value]


class BoundedListSerializer(serializers.ListSerializer):
    """A ``many=True`` list whose ``max_length`` / ``min_length`` the OpenAPI schema shows (maxItems / minItems).

    DRF checks the length before validating any item (a 30,000-item body is refused at once); the
    validators added here only tell drf-spectacular, which reads validators, not those arguments.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.max_length is not None:
            self.validators.append(MaxLengthValidator(self.max_length))
        if self.min_length is not None:
            self.validators.append(MinLengthValidator(self.min_length))


class IdField(serializers.IntegerField):
    """A row id: 1 .. bigint's maximum (a larger number cannot be compared in SQL, a 500 before)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", BIGINT_MAX)
        super().__init__(**kwargs)
