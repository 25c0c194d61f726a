"""Serializers for the graph core. Every number is validated; bad input names its field."""

from __future__ import annotations

from rest_framework import serializers

from graphadmin import readiness
from graphadmin.models import AuditEvent, Edge, EdgeType, Graph, Node, Organization, PolicyRevision
from graphadmin.models.policy import CEILING_MODES, POLICY_NUMBERS
from graphadmin.vault.parse import EDGE_TYPE_NAME, EDGE_TYPE_NAME_RULE

from .fields import EmbeddingField, FiniteFloatField


class StringListField(serializers.ListField):
    child = serializers.CharField(max_length=500)


class GraphSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", queryset=Organization.objects.none())
    vectors_pending = serializers.SerializerMethodField(
        help_text="Active nodes and edges without their vector yet (a large import's embeddings task writes them); "
        "0 when the graph is ready."
    )

    class Meta:
        model = Graph
        fields = [
            "id",
            "organization",
            "slug",
            "name",
            "description",
            "feedback_enabled",
            "text_search_config",
            "vectors_pending",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["created_at", "updated_at"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        user = request.user if request else None
        # Only organizations the caller belongs to can be named; others read as unknown.
        self.fields["organization"].queryset = Organization.objects.for_user(user)
        if self.instance is not None and not isinstance(self.instance, (list, tuple)) and hasattr(self.instance, "pk"):
            self.fields["organization"].read_only = True

    def get_vectors_pending(self, obj) -> int:
        # The view counts a whole page in one query (GraphViewSet.get_serializer); alone, one query.
        counted = self.context.get("vectors_pending") or {}
        return counted[obj.pk] if obj.pk in counted else readiness.vectors_pending(obj.pk)

    def validate(self, attrs):
        org = attrs.get("organization") or getattr(self.instance, "organization", None)
        slug = attrs.get("slug")
        if (
            slug
            and org
            and Graph.objects.filter(organization=org, slug=slug)
            .exclude(pk=getattr(self.instance, "pk", None))
            .exists()
        ):
            raise serializers.ValidationError(
                {"slug": f"A graph with slug '{slug}' already exists in this organization."}
            )
        return attrs


class EdgeTypeSerializer(serializers.ModelSerializer):
    # The vault importer's rule (graphadmin.vault.parse.EDGE_TYPE_NAME): a name is an identifier, never
    # text a spreadsheet would run (an export cell '=HYPERLINK(...)') or markup.
    name = serializers.RegexField(
        EDGE_TYPE_NAME,
        max_length=100,
        error_messages={"invalid": EDGE_TYPE_NAME_RULE},
        help_text=EDGE_TYPE_NAME_RULE,
    )
    priority = FiniteFloatField(min_value=-1.0, max_value=1.0, required=False)

    class Meta:
        model = EdgeType
        fields = ["id", "name", "priority", "description", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def validate_name(self, value):
        graph = self.context["graph"]
        clash = EdgeType.objects.filter(graph=graph, name=value).exclude(pk=getattr(self.instance, "pk", None))
        if clash.exists():
            raise serializers.ValidationError(f"Edge type '{value}' already exists in this graph.")
        return value


def _vector_model(attrs: dict, field: str) -> dict:
    """A vector sent by the caller is stored with the model the caller names ('' when it names none)."""
    if field in attrs:
        attrs["embedding_model"] = attrs.get("embedding_model", "") if attrs[field] is not None else ""
    elif "embedding_model" in attrs:
        raise serializers.ValidationError({"embedding_model": [f"Name a model only together with {field}."]})
    return attrs


class NodeSerializer(serializers.ModelSerializer):
    feedback_weight = FiniteFloatField(min_value=0.0, max_value=1.0, required=False)
    embedding = EmbeddingField(required=False, allow_null=True, write_only=True)
    embedded = serializers.SerializerMethodField(
        help_text="Whether the node has its embedding (large imports embed in a task)."
    )
    aliases = StringListField(required=False)
    tags = StringListField(required=False)
    written_by = serializers.SlugRelatedField(
        source="created_by",
        slug_field="username",
        read_only=True,
        allow_null=True,  # in the schema too: imported notes have none (bench.fuzz found the schema saying string)
        help_text="The agent (or person) that wrote the note through the memory API; null for imported notes.",
    )

    class Meta:
        model = Node
        fields = [
            "id",
            "key",
            "kind",
            "title",
            "text",
            "source",
            "aliases",
            "tags",
            "embedding",
            "embedded",
            "embedding_model",
            "feedback_weight",
            "archived",
            "written_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["archived", "created_at", "updated_at"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Weights change only through the feedback actions (one write path); a new node may set its start value.
        if self.instance is not None:
            self.fields["feedback_weight"].read_only = True

    def get_embedded(self, obj) -> bool:
        return obj.embedding is not None

    def validate_key(self, value):
        graph = self.context["graph"]
        if Node.objects.filter(graph=graph, key=value).exclude(pk=getattr(self.instance, "pk", None)).exists():
            raise serializers.ValidationError(f"A node with key '{value}' already exists in this graph.")
        return value

    def validate(self, attrs):
        return _vector_model(attrs, "embedding")


class NodeRefField(serializers.PrimaryKeyRelatedField):
    """A node of the request's graph, by id; another graph's node reads as unknown."""

    def get_queryset(self):
        return Node.objects.filter(graph=self.context["graph"], archived=False)


class EdgeTypeNameField(serializers.SlugRelatedField):
    """An edge type of the request's graph, by name."""

    default_error_messages = {"does_not_exist": "Unknown edge type '{value}' in this graph."}

    def __init__(self, **kwargs):
        super().__init__(slug_field="name", **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", value=data.replace("\x00", ""))
        return super().to_internal_value(data)

    def get_queryset(self):
        return EdgeType.objects.filter(graph=self.context["graph"])


class EdgeSerializer(serializers.ModelSerializer):
    source = NodeRefField()
    target = NodeRefField()
    edge_type = EdgeTypeNameField()
    weight = FiniteFloatField(min_value=0.0, max_value=1.0, required=False)
    feedback_weight = FiniteFloatField(min_value=0.0, max_value=1.0, required=False)
    triplet_embedding = EmbeddingField(required=False, allow_null=True, write_only=True)
    embedded = serializers.SerializerMethodField(help_text="Whether the edge has its triplet embedding.")

    class Meta:
        model = Edge
        fields = [
            "id",
            "source",
            "target",
            "edge_type",
            "weight",
            "feedback_weight",
            "triplet_embedding",
            "embedded",
            "embedding_model",
            "archived",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["archived", "created_at", "updated_at"]
        validators = []  # the triplet's uniqueness is checked in validate() with a message that names the edge

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance is not None:
            # Endpoints and weights of an existing edge are not edited here: weights move through
            # the feedback actions, and a different triplet is a different edge.
            for name in ("source", "target", "edge_type", "weight", "feedback_weight"):
                self.fields[name].read_only = True

    def get_embedded(self, obj) -> bool:
        return obj.triplet_embedding is not None

    def validate(self, attrs):
        if self.instance is None:
            source, target, edge_type = attrs["source"], attrs["target"], attrs["edge_type"]
            if Edge.objects.filter(source=source, target=target, edge_type=edge_type).exists():
                raise serializers.ValidationError(
                    {"non_field_errors": [f"An edge {source.key} -[{edge_type.name}]-> {target.key} already exists."]}
                )
        return _vector_model(attrs, "triplet_embedding")


def _policy_field(default, lo, hi, integer, help_text):
    if integer:
        return serializers.IntegerField(min_value=lo, max_value=hi, required=False, help_text=help_text)
    return FiniteFloatField(min_value=lo, max_value=hi, required=False, help_text=help_text)


MAX_PRIORITIES = 200  # edge-type priorities per policy change (as per what-if draft)


class PrioritySetField(serializers.DictField):
    """Edge-type priorities by name, each in [-1, 1]; at most MAX_PRIORITIES, counted before any is validated."""

    child = FiniteFloatField(min_value=-1.0, max_value=1.0)

    def to_internal_value(self, data):
        if isinstance(data, dict) and len(data) > MAX_PRIORITIES:
            raise serializers.ValidationError(f"At most {MAX_PRIORITIES} edge types per change.")
        return super().to_internal_value(data)


class PolicySerializer(serializers.ModelSerializer):
    """A policy revision. Writing it creates a new revision from the current one plus the given values."""

    ceiling_mode = serializers.ChoiceField(choices=CEILING_MODES, required=False)
    note = serializers.CharField(max_length=500, required=False, allow_blank=True)
    locals().update({name: _policy_field(*spec) for name, spec in POLICY_NUMBERS.items()})
    priorities = PrioritySetField(
        required=False,
        help_text="Edge-type priorities by name. Read: the set recorded with the revision (null if it predates "
        "priority sets). Write: the types to change, in the same new revision.",
    )
    base_revision = serializers.IntegerField(
        write_only=True,
        required=False,
        min_value=1,
        help_text="The revision this change was made against (the one you read). If another change was saved "
        "since, nothing is written and the answer is a 409 naming the revisions missed (current_revision, "
        "missed). Without it, the change applies to whatever revision is current.",
    )

    class Meta:
        model = PolicyRevision
        fields = [
            "revision",
            "created_at",
            "created_by",
            "note",
            "ceiling_mode",
            *POLICY_NUMBERS,
            "priorities",
            "base_revision",
        ]
        read_only_fields = ["revision", "created_at", "created_by"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        recorded = instance.priority_set()
        if recorded is None:
            data["priorities"] = None
        else:
            names = self.context.setdefault("edge_type_names", {})
            if instance.graph_id not in names:
                rows = EdgeType.objects.filter(graph_id=instance.graph_id).values_list("pk", "name")
                names[instance.graph_id] = dict(rows)
            known = names[instance.graph_id]
            data["priorities"] = {known.get(pk, f"#{pk} (deleted)"): value for pk, value in recorded.items()}
        return data


class PolicyConflictSerializer(serializers.Serializer):
    """A policy change refused because another was saved since its ``base_revision`` (409)."""

    detail = serializers.CharField()
    base_revision = serializers.IntegerField()
    current_revision = serializers.IntegerField()
    missed = serializers.ListField(child=serializers.IntegerField(), help_text="The revisions saved since.")


class AuditEventSerializer(serializers.ModelSerializer):
    organization = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "organization", "seq", "created_at", "actor", "action", "scope", "payload", "prev_hash", "hash"]


class AuditVerificationSerializer(serializers.Serializer):
    organization = serializers.CharField()
    ok = serializers.BooleanField()
    count = serializers.IntegerField()
    broken_at = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)
