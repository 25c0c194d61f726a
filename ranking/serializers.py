"""Request and response serializers of the ranking API. Every bound is documented in docs/ranking.md."""

from __future__ import annotations

import math

from rest_framework import serializers

from graphadmin.api.fields import EmbeddingField, FiniteFloatField, IdField
from graphadmin.models.policy import CEILING_MODES, POLICY_NUMBERS
from graphadmin_client import RetrievalRequest

from . import retrieval
from .whatif import MAX_WHATIF_PRIORITIES, MAX_WHATIF_SESSIONS, WHATIF_FIELDS

# The numbers a what-if draft may change: the ranking's, and the abstention floor (replayed on logged confidences).


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


# Search and context: 0 is the ablation "entry points only" (no expansion along edges).
HOPS_HELP = "Expansion depth; 0: entry points only, no expansion. Default and upper bound: the policy's max_hops."


class RetrievalRequestMixin(QueryMixin):
    """A rank, search or context request; ``to_request()`` is the validated data as the one request object."""

    def to_request(self) -> RetrievalRequest:
        data = self.validated_data
        return RetrievalRequest(**{f: data[f] for f in RetrievalRequest.__dataclass_fields__ if f in data})


class RankRequestSerializer(RetrievalRequestMixin):
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


class SearchRequestSerializer(RetrievalRequestMixin):
    k = serializers.IntegerField(min_value=1, max_value=retrieval.MAX_SEARCH_K, default=20)
    start_nodes = NodeIdListField(
        required=False, default=list, help_text="Entry points besides the query's vector hits."
    )
    anchors = NodeIdListField(required=False, default=list, help_text="Hops (proximity) are measured from these.")
    exclude = ExcludeField()
    persona = PersonaField(required=False, default=dict, help_text="Affinity in [-1, 1] by node kind or tag.")
    hops = serializers.IntegerField(
        min_value=0,
        max_value=retrieval.MAX_HOPS,
        required=False,
        allow_null=True,
        default=None,
        help_text=HOPS_HELP,
    )


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
        min_value=0,
        max_value=retrieval.MAX_HOPS,
        required=False,
        allow_null=True,
        default=None,
        help_text=HOPS_HELP,
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
    """Any policy number (ranking numbers are replayed; learning numbers are named in the answer's
    ``not_modelled``), and the ceiling mode."""

    locals().update({name: _draft_field(name) for name in POLICY_NUMBERS})
    ceiling_mode = serializers.ChoiceField(choices=CEILING_MODES, required=False)


class WhatIfRequestSerializer(serializers.Serializer):
    policy = DraftPolicySerializer(required=False, default=dict)
    edge_type_priorities = PrioritiesField(required=False, default=dict)
    n = serializers.IntegerField(
        min_value=1,
        max_value=MAX_WHATIF_SESSIONS,
        default=20,
        help_text="The last N logged sessions (by their latest retrieval); their retrievals are replayed.",
    )
    agent = serializers.CharField(
        required=False, allow_blank=True, max_length=150, help_text="Only the sessions of this agent (user name)."
    )
    since = serializers.DateField(required=False, help_text="Only retrievals from this day (UTC, inclusive).")
    until = serializers.DateField(required=False, help_text="Only retrievals up to this day (UTC, inclusive).")
    k = serializers.IntegerField(min_value=1, max_value=100, default=5, help_text="k of hit@k.")

    def validate(self, attrs):
        unknown = (
            sorted(set(self.initial_data.get("policy") or {}) - set(WHATIF_FIELDS))
            if isinstance(self.initial_data.get("policy"), dict)
            else []
        )
        if unknown:
            raise serializers.ValidationError({"policy": [f"Not a policy number: {unknown}"]})
        if attrs.get("since") and attrs.get("until") and attrs["since"] > attrs["until"]:
            raise serializers.ValidationError({"until": ["On or after since."]})
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
    bm25 = serializers.FloatField(
        help_text="The note's raw BM25 for the query's words, before fusion (0: none of its words, or lexical off)."
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
    vectors_pending = serializers.IntegerField(
        help_text="The graph's nodes and edges still without their vector (a large import's embeddings task is "
        "writing them): while above 0, a question cannot find them and the answer may miss them. 0: ready."
    )
    results = SearchHitSerializer(many=True)


class SelectedItemSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    node = serializers.IntegerField()
    key = serializers.CharField()
    title = serializers.CharField()
    kind = serializers.CharField()
    text = serializers.CharField()
    tokens = serializers.IntegerField()
    total = serializers.FloatField(
        help_text="The item's score: a sum that includes bias terms, for ordering this answer's items only "
        "(not comparable across questions)."
    )
    vector_score = serializers.FloatField(
        allow_null=True,
        help_text="The item's raw cosine similarity to the question (null: no embedding, or no query vector).",
    )
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
    vectors_pending = serializers.IntegerField(
        help_text="The graph's nodes and edges still without their vector (a large import's embeddings task is "
        "writing them): while above 0, a question cannot find them and the answer may miss them. 0: ready."
    )
    confidence = serializers.FloatField(
        help_text="How well the answer matches the question: its best entry point's cosine similarity plus a "
        "small share (at most 0.1) for a strong lexical match. Comparable across questions of one graph and "
        "embedder; the policy's abstain_floor is compared with it."
    )
    abstained = serializers.BooleanField(
        help_text="True when the confidence is below the graph's abstain_floor (and no start nodes or anchors "
        "were given): nothing relevant, items is empty. The injection is still logged with every candidate."
    )
    items = SelectedItemSerializer(many=True, help_text="The selected items in rank order; empty when abstained.")


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
    cut = serializers.CharField(
        help_text="Why it was not selected: budget, duplicate, explore, displaced, abstained; empty when selected."
    )
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
    confidence = serializers.FloatField(
        allow_null=True, help_text="The answer's confidence (null: logged before confidences were)."
    )
    abstained = serializers.BooleanField(help_text="The answer abstained: nothing was given (every candidate cut).")
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
    dropped = serializers.IntegerField(help_text="Candidates found today and not under the draft (retrieval re-run).")
    added = serializers.IntegerField(help_text="Candidates found only under the draft (retrieval re-run).")
    candidates_draft = serializers.IntegerField()
    first_used_rank_current = serializers.IntegerField(allow_null=True)
    first_used_rank_draft = serializers.IntegerField(allow_null=True)
    changes = serializers.ListField(child=serializers.DictField())
    used = serializers.ListField(child=serializers.CharField())
    mrr_current = serializers.FloatField(allow_null=True)
    mrr_draft = serializers.FloatField(allow_null=True)
    hit_current = serializers.FloatField(allow_null=True)
    hit_draft = serializers.FloatField(allow_null=True)
    confidence = serializers.FloatField(
        allow_null=True, help_text="The answer's logged confidence (null: logged before confidences were)."
    )
    abstained_current = serializers.BooleanField(help_text="Below the current policy's abstain_floor.")
    abstained_draft = serializers.BooleanField(help_text="Below the draft's abstain_floor.")


class NotModelledSerializer(serializers.Serializer):
    field = serializers.CharField()
    reason = serializers.CharField()


class FlippedSerializer(serializers.Serializer):
    session = serializers.CharField()
    injection = serializers.IntegerField()
    top_now = serializers.CharField(allow_null=True)
    top_draft = serializers.CharField(allow_null=True)
    top_now_used = serializers.BooleanField()
    top_draft_used = serializers.BooleanField()


class FirstUsedRankSerializer(serializers.Serializer):
    injections = serializers.IntegerField(help_text="Injections with a used item ranked under both policies.")
    sessions = serializers.IntegerField()
    current = serializers.FloatField(allow_null=True, help_text="Mean rank of the first used item now.")
    draft = serializers.FloatField(allow_null=True, help_text="Mean rank of the first used item under the draft.")
    difference = serializers.FloatField(allow_null=True, help_text="Mean of draft - now (negative: used items rise).")
    interval = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="95% bootstrap interval of the difference."
    )
    lost = serializers.IntegerField(help_text="Injections whose used items the draft's retrieval no longer finds.")
    gained = serializers.IntegerField(help_text="Injections whose used items only the draft's retrieval finds.")


class AbstainedSerializer(serializers.Serializer):
    current = serializers.IntegerField(help_text="Replayed answers below the current policy's abstain_floor.")
    draft = serializers.IntegerField(help_text="Replayed answers below the draft's abstain_floor.")
    current_used = serializers.IntegerField(help_text="Of those below the current floor, answers with used items.")
    draft_used = serializers.IntegerField(help_text="Of those below the draft's floor, answers whose items were used.")
    without_confidence = serializers.IntegerField(help_text="Answers logged before confidences were (in neither).")


class WhatIfResponseSerializer(serializers.Serializer):
    policy_revision = serializers.IntegerField()
    draft = serializers.DictField()
    selection = serializers.DictField(help_text="n, agent, since, until, and the sessions and injections replayed.")
    method = serializers.ChoiceField(choices=["rescore", "retrieve"])
    retrievals = serializers.IntegerField(help_text="Retrieval runs made: each distinct question once per policy.")
    replayed = serializers.ListField(child=serializers.CharField(), help_text="The draft's numbers the replay models.")
    rescored = serializers.ListField(child=serializers.CharField())
    retrieved = serializers.ListField(child=serializers.CharField())
    gated = serializers.ListField(
        child=serializers.CharField(),
        help_text="Numbers that decide whether an answer is given (abstain_floor), replayed on the logged confidences.",
    )
    not_modelled = NotModelledSerializer(many=True)
    approximations = serializers.ListField(child=serializers.DictField())
    skipped = serializers.ListField(child=serializers.DictField())
    hit_k = serializers.IntegerField()
    first_used_rank = FirstUsedRankSerializer()
    aggregate = serializers.DictField()
    flipped = FlippedSerializer(many=True)
    abstained = AbstainedSerializer()
    injections = WhatIfInjectionSerializer(many=True)
