"""Request and response serializers of the ranking API. Every bound is documented in docs/ranking.md."""

from __future__ import annotations

import math

from rest_framework import serializers

from graphadmin.agents.client import RetrievalRequest
from graphadmin.api.fields import EmbeddingField, FiniteFloatField, IdField
from graphadmin.models.policy import POLICY_NUMBERS

from . import retrieval
from .scoring import RANKING_POLICY_NUMBERS
from .whatif import MAX_WHATIF_INJECTIONS, MAX_WHATIF_PRIORITIES


class NodeIdListField(serializers.ListField):
    def __init__(self, **kwargs):
        kwargs.setdefault("child", IdField())
        kwargs.setdefault("max_length", retrieval.MAX_START_NODES)
        super().__init__(**kwargs)


class QueryVectorField(EmbeddingField):
    """EmbeddingField with a fast path for what agents send: a JSON list of plain numbers.

    DRF validates a list item by item through the child FloatField, a large share of a retrieval
    request's budget for 384 numbers (docs/performance.md). For an int or a float whose ``float()`` is finite that
    field returns ``float(item)`` and raises nothing, so a list of only those is converted in one
    pass. Anything else (a string, null, a bool, a nested list, a non-finite or overflowing
    number) takes the child's path, item by item, and gets its error messages. The dimension,
    finiteness and zero checks of EmbeddingField run either way.
    """

    def run_child_validation(self, data):
        if type(data) is list and all(type(x) is float or type(x) is int for x in data):
            try:
                values = [float(x) for x in data]
            except OverflowError:
                values = None
            # A sum is finite only when every item is (an overflowing sum just takes the slow path).
            if values is not None and math.isfinite(sum(values)):
                return values
        return super().run_child_validation(data)


class QueryMixin(serializers.Serializer):
    query = serializers.CharField(required=False, allow_blank=True, max_length=retrieval.MAX_QUERY_CHARS, default="")
    vector = QueryVectorField(
        required=False, allow_null=True, default=None, help_text="Query embedding; replaces `query` for similarity."
    )

    def validate_vector(self, value):
        if value is not None and not any(value):
            raise serializers.ValidationError("An all-zero vector has no direction.")
        return value


class RankRequestSerializer(QueryMixin):
    start_nodes = NodeIdListField(min_length=1)
    k = serializers.IntegerField(min_value=1, max_value=retrieval.MAX_RANK_K, default=50)
    hops = serializers.IntegerField(
        min_value=1,
        max_value=retrieval.MAX_HOPS,
        required=False,
        allow_null=True,
        default=None,
        help_text="Expansion depth; default and upper bound: the policy's max_hops.",
    )


class PersonaField(serializers.DictField):
    child = FiniteFloatField(min_value=-1.0, max_value=1.0)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(value) > 50:
            raise serializers.ValidationError("At most 50 persona affinities.")
        return value


class ExcludeField(serializers.ListField):
    """Node ids the caller already holds: left out of the result."""

    def __init__(self, **kwargs):
        kwargs.setdefault("child", IdField())
        kwargs.setdefault("max_length", retrieval.MAX_EXCLUDE)
        kwargs.setdefault("required", False)
        kwargs.setdefault("default", list)
        kwargs.setdefault("help_text", "Node ids you already hold: never returned (they may still lead to others).")
        super().__init__(**kwargs)


class RetrievalRequestMixin(QueryMixin):
    """A search or context request; ``to_request()`` is the validated data as the one request object."""

    def to_request(self) -> RetrievalRequest:
        data = self.validated_data
        return RetrievalRequest(**{f: data[f] for f in RetrievalRequest.__dataclass_fields__ if f in data})


class SearchRequestSerializer(RetrievalRequestMixin):
    k = serializers.IntegerField(min_value=1, max_value=retrieval.MAX_SEARCH_K, default=20)
    start_nodes = NodeIdListField(
        required=False, default=list, help_text="Entry points besides the query's vector hits."
    )
    anchors = NodeIdListField(required=False, default=list, help_text="Hops (proximity) are measured from these.")
    exclude = ExcludeField()
    persona = PersonaField(required=False, default=dict, help_text="Affinity in [-1, 1] by node kind or tag.")


class ContextRequestSerializer(RetrievalRequestMixin):
    session = serializers.CharField(max_length=200, help_text="The agent session's external id; created if new.")
    start_nodes = NodeIdListField(
        required=False,
        default=list,
        help_text="Optional entry points besides the query's vector and triplet hits (candidates too).",
    )
    anchors = NodeIdListField(required=False, default=list, help_text="Hops (proximity) are measured from these.")
    exclude = ExcludeField()
    persona = PersonaField(required=False, default=dict)
    budget_unit = serializers.ChoiceField(choices=["items", "tokens"], default="items")
    budget = serializers.IntegerField(
        min_value=1,
        required=False,
        allow_null=True,
        default=None,
        help_text="Items (max 200) or estimated tokens (max 100000); default from the policy.",
    )
    k = serializers.IntegerField(
        min_value=1, max_value=retrieval.MAX_SEARCH_K, default=50, help_text="Node vector hits taken as entry points."
    )
    hops = serializers.IntegerField(
        min_value=1, max_value=retrieval.MAX_HOPS, required=False, allow_null=True, default=None
    )

    def validate(self, attrs):
        limit = retrieval.MAX_BUDGET_ITEMS if attrs["budget_unit"] == "items" else retrieval.MAX_BUDGET_TOKENS
        if attrs.get("budget") is not None and attrs["budget"] > limit:
            raise serializers.ValidationError({"budget": [f"At most {limit} {attrs['budget_unit']}."]})
        if not attrs["start_nodes"] and not attrs.get("query", "").strip() and attrs.get("vector") is None:
            raise serializers.ValidationError({"query": ["Give a query (or a vector), or start nodes."]})
        return attrs


def _draft_field(name):
    _default, lo, hi, integer, help_text = POLICY_NUMBERS[name]
    if integer:
        return serializers.IntegerField(min_value=lo, max_value=hi, required=False, help_text=help_text)
    return FiniteFloatField(min_value=lo, max_value=hi, required=False, help_text=help_text)


class PrioritiesField(serializers.DictField):
    """Draft edge-type priorities by name: at most MAX_WHATIF_PRIORITIES of them."""

    child = FiniteFloatField(min_value=-1.0, max_value=1.0)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(value) > MAX_WHATIF_PRIORITIES:
            raise serializers.ValidationError(f"At most {MAX_WHATIF_PRIORITIES} edge types.")
        return value


class DraftPolicySerializer(serializers.Serializer):
    locals().update({name: _draft_field(name) for name in RANKING_POLICY_NUMBERS})


class WhatIfRequestSerializer(serializers.Serializer):
    policy = DraftPolicySerializer(required=False, default=dict)
    edge_type_priorities = PrioritiesField(required=False, default=dict)
    n = serializers.IntegerField(
        min_value=1, max_value=MAX_WHATIF_INJECTIONS, default=20, help_text="Last N injections."
    )
    k = serializers.IntegerField(min_value=1, max_value=100, default=5, help_text="k of hit@k.")

    def validate(self, attrs):
        unknown = (
            sorted(set(self.initial_data.get("policy") or {}) - set(RANKING_POLICY_NUMBERS))
            if isinstance(self.initial_data.get("policy"), dict)
            else []
        )
        if unknown:
            raise serializers.ValidationError({"policy": [f"Not a ranking number: {unknown}"]})
        return attrs


class ExplainQuerySerializer(serializers.Serializer):
    i = IdField(required=False, help_text="A rank (1-based).")
    j = IdField(required=False, help_text="The rank it is compared with.")


# --- responses (documentation of the shapes; views build plain dicts) --------------------------


class ComponentSerializer(serializers.Serializer):
    raw = serializers.FloatField()
    coefficient = serializers.FloatField()
    contribution = serializers.FloatField()


class ComponentsField(serializers.DictField):
    child = ComponentSerializer()


class RankedEdgeSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    edge = serializers.IntegerField()
    stable_id = serializers.CharField()
    source = serializers.IntegerField()
    edge_type = serializers.CharField()
    hops = serializers.IntegerField()
    target = serializers.DictField(help_text="id, key, title, kind, tokens")
    total = serializers.FloatField()
    components = ComponentsField()


class RankResponseSerializer(serializers.Serializer):
    policy_revision = serializers.IntegerField()
    considered = serializers.IntegerField()
    results = RankedEdgeSerializer(many=True)


class SearchHitSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.IntegerField()
    stable_id = serializers.CharField()
    key = serializers.CharField()
    title = serializers.CharField()
    kind = serializers.CharField()
    vector_score = serializers.FloatField(
        allow_null=True, help_text="Raw cosine similarity to the query (null: no embedding)."
    )
    hops = serializers.IntegerField(
        allow_null=True,
        help_text="Edges from its entry point, or with anchors its undirected "
        "distance from them (proximity, not causation).",
    )
    entry = serializers.CharField(help_text="start, vector, lexical, triplet, expansion or memory")
    path = serializers.ListField(child=serializers.IntegerField(), help_text="Edge ids from its entry point to it.")
    total = serializers.FloatField()
    components = ComponentsField()


class SearchResponseSerializer(serializers.Serializer):
    policy_revision = serializers.IntegerField()
    results = SearchHitSerializer(many=True)


class SelectedItemSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.IntegerField()
    key = serializers.CharField()
    title = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    tokens = serializers.IntegerField()
    total = serializers.FloatField()
    hops = serializers.IntegerField(allow_null=True)
    entry = serializers.ChoiceField(
        choices=["start", "vector", "lexical", "triplet", "expansion"], help_text="How it entered the candidates."
    )
    path = serializers.ListField(child=serializers.IntegerField(), help_text="Edge ids from its entry point to it.")
    edge = serializers.IntegerField(allow_null=True, help_text="The last edge of its path.")
    edge_type = serializers.CharField(allow_null=True)


class ContextResponseSerializer(serializers.Serializer):
    injection = serializers.IntegerField()
    session = serializers.CharField()
    session_created = serializers.BooleanField()
    mode = serializers.CharField()
    policy_revision = serializers.IntegerField()
    budget_unit = serializers.CharField()
    budget = serializers.IntegerField()
    spent = serializers.IntegerField()
    considered = serializers.IntegerField()
    items = SelectedItemSerializer(many=True)


class LearnedFromSerializer(serializers.Serializer):
    session = serializers.CharField(help_text="The past session whose batch moved this evidence.")
    batch = serializers.IntegerField(help_text="That batch (still applied; a rolled-back one is not listed).")
    question = serializers.IntegerField(help_text="The question node (kind question) the evidence is about.")
    question_text = serializers.CharField()
    similarity = serializers.FloatField(help_text="That question's cosine similarity to this injection's query.")
    evidence = serializers.CharField(help_text="used, flagged, not_used or shown_accepted")
    effect = serializers.CharField(help_text="lifted or lowered")


class CandidateSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    selected = serializers.BooleanField()
    node = serializers.IntegerField()
    edge = serializers.IntegerField(allow_null=True)
    hops = serializers.IntegerField(allow_null=True)
    entry = serializers.CharField(help_text="start, vector, lexical, triplet, expansion or memory")
    path = serializers.ListField(child=serializers.IntegerField())
    path_text = serializers.CharField(help_text="The path in words: A -type-> B -type-> C")
    cut = serializers.CharField(help_text="Why it was not selected: budget, duplicate; empty when selected.")
    tokens = serializers.IntegerField()
    total = serializers.FloatField()
    features = serializers.DictField()
    components = ComponentsField()
    learned_from = LearnedFromSerializer(
        many=True, help_text="The past sessions whose evidence lifted or lowered this candidate (its memory)."
    )


class DiffRowSerializer(serializers.Serializer):
    component = serializers.CharField()
    i = serializers.FloatField()
    j = serializers.FloatField()
    difference = serializers.FloatField()


class ComparisonSerializer(serializers.Serializer):
    i = serializers.IntegerField()
    j = serializers.IntegerField()
    total_i = serializers.FloatField()
    total_j = serializers.FloatField()
    difference = serializers.FloatField()
    components = DiffRowSerializer(many=True)


class ExplainResponseSerializer(serializers.Serializer):
    injection = serializers.IntegerField()
    session = serializers.CharField()
    query = serializers.CharField()
    mode = serializers.CharField()
    policy_revision = serializers.IntegerField()
    budget_unit = serializers.CharField()
    budget = serializers.IntegerField()
    spent = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    candidates = CandidateSerializer(many=True)
    comparison = ComparisonSerializer(allow_null=True)


class WhatIfInjectionSerializer(serializers.Serializer):
    injection = serializers.IntegerField()
    session = serializers.CharField()
    created_at = serializers.DateTimeField()
    mode = serializers.CharField()
    candidates = serializers.IntegerField()
    top1_current = serializers.CharField(allow_null=True)
    top1_draft = serializers.CharField(allow_null=True)
    top1_flip = serializers.BooleanField()
    kendall_tau = serializers.FloatField()
    moved = serializers.IntegerField()
    changes = serializers.ListField(child=serializers.DictField())
    used = serializers.ListField(child=serializers.CharField())
    mrr_current = serializers.FloatField(allow_null=True)
    mrr_draft = serializers.FloatField(allow_null=True)
    hit_current = serializers.FloatField(allow_null=True)
    hit_draft = serializers.FloatField(allow_null=True)


class WhatIfResponseSerializer(serializers.Serializer):
    policy_revision = serializers.IntegerField()
    draft = serializers.DictField()
    hit_k = serializers.IntegerField()
    aggregate = serializers.DictField()
    injections = WhatIfInjectionSerializer(many=True)
