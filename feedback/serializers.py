"""Serializers of the feedback API. Every number is bounded by the policy table; bad input names its field."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from graphadmin.api.fields import BoundedListSerializer, FiniteFloatField, IdField
from graphadmin.models.policy import POLICY_NUMBERS
from graphadmin.params import BIGINT_MAX
from graphadmin.vault.parse import key_problem

from . import memory
from .models import OUTCOMES, SIGNALS, DailyMetric, UpdateBatch, WeightHistory


def _rate(name: str, **kwargs):
    _default, lo, hi, _integer, help_text = POLICY_NUMBERS[name]
    return FiniteFloatField(
        min_value=lo, max_value=hi, required=False, help_text=f"Overrides the policy. {help_text}", **kwargs
    )


class EdgeKeySerializer(serializers.Serializer):
    source = IdField(help_text="Source node id.")
    target = IdField(help_text="Target node id.")
    type = serializers.CharField(max_length=100, help_text="Edge type name.")


class UseItemSerializer(serializers.Serializer):
    """One used (or wrong) item: ``node`` (an id) or ``edge`` (an id, or its source + target + type)."""

    node = IdField(required=False, help_text="Node id.")
    edge = serializers.JSONField(required=False, help_text="Edge id, or {source, target, type}.")
    signal = serializers.ChoiceField(choices=SIGNALS, default="explicit")

    class Meta:
        list_serializer_class = BoundedListSerializer

    def validate_edge(self, value):
        if isinstance(value, bool):
            raise serializers.ValidationError("Expected an edge id or {source, target, type}.")
        if isinstance(value, int):
            if not 1 <= value <= BIGINT_MAX:
                raise serializers.ValidationError(f"Expected an edge id from 1 to {BIGINT_MAX}.")
            return value
        if isinstance(value, dict):
            key = EdgeKeySerializer(data=value)
            key.is_valid(raise_exception=True)
            return dict(key.validated_data)
        raise serializers.ValidationError("Expected an edge id or {source, target, type}.")

    def validate(self, attrs):
        if ("node" in attrs) == ("edge" in attrs):
            raise serializers.ValidationError("Give exactly one of node or edge.")
        return attrs


class UsesSerializer(serializers.Serializer):
    items = UseItemSerializer(
        many=True,
        allow_empty=False,
        max_length=settings.MAX_REPORT_ITEMS,
        help_text=f"At most {settings.MAX_REPORT_ITEMS} items per report (MAX_REPORT_ITEMS).",
    )
    learning_rate = _rate("learning_rate")


class ResponseTextSerializer(serializers.Serializer):
    response = serializers.CharField(max_length=200_000, help_text="The agent's response text.")


class OutcomeSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=OUTCOMES)
    alpha = _rate("ema_alpha")


class ManualValueSerializer(serializers.Serializer):
    node = IdField(required=False)
    edge = IdField(required=False)
    field = serializers.ChoiceField(choices=["weight", "feedback_weight"])
    value = FiniteFloatField(min_value=0.0, max_value=1.0)

    class Meta:
        list_serializer_class = BoundedListSerializer

    def validate(self, attrs):
        if ("node" in attrs) == ("edge" in attrs):
            raise serializers.ValidationError("Give exactly one of node or edge.")
        if "node" in attrs and attrs["field"] != "feedback_weight":
            raise serializers.ValidationError({"field": "Nodes have only feedback_weight."})
        return attrs


class ManualSetSerializer(serializers.Serializer):
    values = ManualValueSerializer(
        many=True,
        allow_empty=False,
        max_length=settings.MAX_MANUAL_VALUES,
        help_text=f"At most {settings.MAX_MANUAL_VALUES} values per call (MAX_MANUAL_VALUES).",
    )
    reason = serializers.CharField(max_length=500, allow_blank=True, default="")


class RollbackSerializer(serializers.Serializer):
    force = serializers.BooleanField(
        default=False, help_text="Overwrite rows changed since the batch (audited as forced)."
    )


class HealthSerializer(serializers.Serializer):
    """Learning health (feedback.health.graph_health): shares are fractions in [0, 1], null when there is nothing
    to divide by."""

    graph = serializers.IntegerField()
    injections = serializers.IntegerField(help_text="Injections in the window (at most n).")
    window = serializers.DictField(help_text="n, and the first and last injection time of the window.")
    components = serializers.ListField(
        child=serializers.DictField(),
        help_text="Per score component: candidates, contributed (share non-zero), changed_order (share of "
        "candidates it moves), selected, changed_selection (share of selected items it keeps selected), inert.",
    )
    reach = serializers.DictField(help_text="Share of candidates and selected items reached through an edge, by type.")
    weights_moved = serializers.ListField(
        child=serializers.DictField(), help_text="Per weight: share of live ones moved in 7 and 30 days, by batch kind."
    )
    edge_types = serializers.ListField(
        child=serializers.DictField(), help_text="Per edge type: edges, means, share at default, never_left_default."
    )
    flags = serializers.ListField(child=serializers.CharField(), help_text="Inert parts of learning, in plain words.")


class RollbackPreviewSerializer(serializers.Serializer):
    """What a rollback (or, ``finishing`` set, the finish of a partial one) would do now; writes nothing."""

    batch = serializers.IntegerField()
    kind = serializers.CharField()
    node_updates = serializers.IntegerField(help_text="Node values (or notes) it would restore.")
    edge_updates = serializers.IntegerField(help_text="Edge values (or links) it would restore.")
    conflicts = serializers.IntegerField(help_text="Rows changed since, left alone unless forced.")
    forced_updates = serializers.IntegerField(help_text="Of the conflicts, rows a forced rollback would overwrite.")
    conflict_ids = serializers.JSONField(help_text='The first conflicting ids by "kind.field" (or kind).')
    refused = serializers.CharField(help_text="Why the rollback would be refused; empty when it would run.")
    finishing = serializers.IntegerField(allow_null=True, help_text="The partial rollback a finish completes.")


class AcceptedSerializer(serializers.Serializer):
    """The answer to a report: queued (202) with the task and its idempotency key, or a no-op status."""

    status = serializers.CharField()
    task_id = serializers.CharField(required=False)
    idempotency_key = serializers.CharField(required=False)
    batch = serializers.IntegerField(required=False, allow_null=True)
    reason = serializers.CharField(required=False)
    vectors_pending = serializers.IntegerField(
        required=False,
        help_text="graph_not_ready: the vectors the graph still had to write when the session's question was answered.",
    )


class ResultSerializer(serializers.Serializer):
    status = serializers.CharField()
    batch_id = serializers.IntegerField(allow_null=True)
    node_updates = serializers.IntegerField()
    edge_updates = serializers.IntegerField()
    triplet_embeddings = serializers.IntegerField()
    duration_ms = serializers.FloatField()
    conflicts = serializers.IntegerField()
    details = serializers.JSONField()


class WeightChangeSerializer(serializers.ModelSerializer):
    """One change, from either history shape: ``id`` for a change stored as a row, ``block`` for one
    stored in a block (bulk batches: decay, normalize), the other null."""

    id = serializers.IntegerField(source="change_id", allow_null=True)
    block = serializers.IntegerField(source="block_id", allow_null=True)

    class Meta:
        model = WeightHistory
        fields = ["id", "block", "node", "edge", "field", "before", "after", "event", "use_event", "created_at"]


class UpdateBatchSerializer(serializers.ModelSerializer):
    trigger_session = serializers.SlugRelatedField(slug_field="external_id", read_only=True, allow_null=True)
    trigger_user = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    rolled_back_by = serializers.SerializerMethodField()

    class Meta:
        model = UpdateBatch
        fields = [
            "id",
            "graph",
            "kind",
            "status",
            "trigger_session",
            "trigger_user",
            "trigger_task",
            "idempotency_key",
            "node_updates",
            "edge_updates",
            "conflicts",
            "details",
            "started_at",
            "finished_at",
            "duration_ms",
            "rollback_of",
            "rolled_back_by",
            "correction_of",
        ]

    def get_rolled_back_by(self, obj) -> int | None:
        rollback = getattr(obj, "rolled_back_by", None)
        return rollback.pk if rollback else None


class UpdateBatchDetailSerializer(UpdateBatchSerializer):
    """A batch with its first ``CHANGES_SHOWN`` changes; all of them are under .../changes/ (paginated)."""

    CHANGES_SHOWN = 200
    changes = serializers.SerializerMethodField()
    changes_total = serializers.SerializerMethodField()

    class Meta(UpdateBatchSerializer.Meta):
        fields = [*UpdateBatchSerializer.Meta.fields, "changes_total", "changes"]

    def get_changes_total(self, obj) -> int:
        return obj.node_updates + obj.edge_updates

    def get_changes(self, obj) -> list[dict]:
        rows = WeightHistory.objects.filter(batch=obj).in_order()[: self.CHANGES_SHOWN]
        return WeightChangeSerializer(rows, many=True).data


class DailyMetricSerializer(serializers.ModelSerializer):
    class Meta:
        model = DailyMetric
        fields = ["day", "data", "computed_at"]


# ---------------------------------------------------------------------------------------------
# Agent-written memory (feedback.memory): the documented bounds are its constants.


def _key_rule(value: str) -> str:
    problem = key_problem(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


def _kind_rule(value: str) -> str:
    if not memory.KIND.match(value):
        raise serializers.ValidationError(memory.KIND_RULE)
    return value


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
            {"type": "string", "minLength": 1, "maxLength": 500},
        ]
    }
)
class NodeRefField(serializers.Field):
    """A node of the graph by id (an integer) or by key (a string)."""

    default_error_messages = {"invalid": "Expected a node id (integer) or a node key (string)."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | str):
            self.fail("invalid")
        if isinstance(data, int):
            if not 1 <= data <= BIGINT_MAX:
                raise serializers.ValidationError(f"Expected a node id from 1 to {BIGINT_MAX}.")
            return data
        if not data or len(data) > 500 or "\x00" in data:
            raise serializers.ValidationError("A node key has 1 to 500 characters (no NUL).")
        return data

    def to_representation(self, value):
        return value


def _session_field():
    return serializers.CharField(
        max_length=200, required=False, help_text="Your agent session's id: the batch is listed on its page."
    )


class MemoryLinkSerializer(serializers.Serializer):
    node = NodeRefField(help_text="The note linked to: its id or its key.")
    type = serializers.CharField(
        max_length=100, default="related", help_text="An existing edge type (a new one needs an operator)."
    )

    class Meta:
        list_serializer_class = BoundedListSerializer


class RememberSerializer(serializers.Serializer):
    text = serializers.CharField(
        max_length=memory.MAX_TEXT_CHARS,
        trim_whitespace=False,
        help_text=f"The note's text (markdown; [[wikilinks]] become links), at most {memory.MAX_TEXT_CHARS} chars.",
    )
    kind = serializers.CharField(
        max_length=50, required=False, validators=[_kind_rule], help_text="observation (default), decision, note..."
    )
    key = serializers.CharField(
        max_length=500,
        required=False,
        validators=[_key_rule],
        help_text="A stable key (a vault path without .md): the same key updates the note (a new version).",
    )
    title = serializers.CharField(max_length=memory.MAX_TITLE_CHARS, required=False)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=memory.MAX_TAG_CHARS), max_length=memory.MAX_TAGS, required=False
    )
    links = MemoryLinkSerializer(
        many=True, required=False, max_length=memory.MAX_LINKS, help_text=f"At most {memory.MAX_LINKS} links."
    )
    session = _session_field()


class LinkSerializer(serializers.Serializer):
    source = NodeRefField(help_text="The note the edge leaves: its id or key (an agent: one it wrote).")
    target = NodeRefField(help_text="The note the edge reaches: its id or key.")
    type = serializers.CharField(max_length=100, default="related", help_text="An existing edge type.")
    session = _session_field()


class ForgetSerializer(serializers.Serializer):
    nodes = serializers.ListField(child=IdField(), max_length=memory.MAX_FORGET, required=False)
    edges = serializers.ListField(child=IdField(), max_length=memory.MAX_FORGET, required=False)
    session = _session_field()


class MemoryAnswerSerializer(serializers.Serializer):
    status = serializers.CharField()
    batch = serializers.IntegerField(allow_null=True)
    node = serializers.IntegerField(required=False)
    edges = serializers.ListField(child=serializers.IntegerField())
    unresolved = serializers.ListField(child=serializers.DictField())
    duplicate_of = serializers.IntegerField(required=False)
    similarity = serializers.FloatField(required=False)
