"""REST views for the graph core: thin, tenant-scoped through querysets, role-checked for writes."""

from __future__ import annotations

from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from graphadmin import audit, services
from graphadmin.models import AuditEvent, Edge, EdgeType, Graph, Node, Organization, PolicyRevision
from graphadmin.models.tenancy import role_at_least, role_for

from .permissions import RoleForWrites
from .serializers import (
    AuditEventSerializer,
    AuditVerificationSerializer,
    EdgeSerializer,
    EdgeTypeSerializer,
    GraphSerializer,
    NodeSerializer,
    PolicySerializer,
)

GRAPH_ID = OpenApiParameter("graph_pk", int, OpenApiParameter.PATH, description="The graph's id.")


class GraphViewSet(viewsets.ModelViewSet):
    """Graphs of the caller's organizations. Admins create, edit and delete them; every member reads."""

    serializer_class = GraphSerializer
    permission_classes = [IsAuthenticated, RoleForWrites]
    write_role = "admin"
    lookup_value_converter = "int"

    def get_queryset(self):
        return Graph.objects.for_user(self.request.user).select_related("organization").order_by("id")

    def organization_id(self):
        if "pk" not in self.kwargs:
            return None
        return self.get_object().organization_id

    def perform_create(self, serializer):
        org = serializer.validated_data["organization"]
        if not role_at_least(role_for(self.request.user, org.pk), self.write_role):
            raise PermissionDenied("Only an organization admin may create graphs.")
        data = serializer.validated_data
        serializer.instance = services.create_graph(
            self.request.user, org, data["slug"], data["name"], data.get("description", "")
        )

    def perform_destroy(self, instance):
        audit.append(
            instance.organization_id, self.request.user, "graph.delete", {"slug": instance.slug}, {"graph": instance.pk}
        )
        instance.delete()


class GraphScopedMixin:
    """For resources under /api/graphs/{graph_pk}/: the graph is looked up through the caller's tenancy."""

    permission_classes = [IsAuthenticated, RoleForWrites]
    write_role = "operator"
    lookup_value_converter = "int"

    def graph(self) -> Graph:
        if not hasattr(self, "_graph"):
            self._graph = get_object_or_404(Graph.objects.for_user(self.request.user), pk=self.kwargs["graph_pk"])
        return self._graph

    def organization_id(self):
        return self.graph().organization_id

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if "graph_pk" in self.kwargs:
            context["graph"] = self.graph()
        return context


@extend_schema_view(
    **{
        a: extend_schema(parameters=[GRAPH_ID])
        for a in ("list", "retrieve", "create", "update", "partial_update", "destroy")
    }
)
class EdgeTypeViewSet(GraphScopedMixin, viewsets.ModelViewSet):
    """Edge types of a graph. Operators create them and tune priorities (audited)."""

    serializer_class = EdgeTypeSerializer

    def get_queryset(self):
        return EdgeType.objects.filter(graph=self.graph()).order_by("name")

    def perform_create(self, serializer):
        serializer.save(graph=self.graph())

    def perform_update(self, serializer):
        data = serializer.validated_data
        if "name" in data and data["name"] != serializer.instance.name:
            serializer.instance.name = data["name"]
            serializer.instance.save(update_fields=["name", "updated_at"])
        serializer.instance = services.update_edge_type(
            self.request.user, serializer.instance, priority=data.get("priority"), description=data.get("description")
        )


class ArchiveOnDeleteMixin:
    """DELETE archives the row: its history stays, and it never appears in retrieval again."""

    def perform_destroy(self, instance):
        instance.archived = True
        instance.save(update_fields=["archived", "updated_at"])


@extend_schema_view(
    **{
        a: extend_schema(parameters=[GRAPH_ID])
        for a in ("list", "retrieve", "create", "update", "partial_update", "destroy")
    }
)
class NodeViewSet(GraphScopedMixin, ArchiveOnDeleteMixin, viewsets.ModelViewSet):
    """Nodes of a graph. Operators create and edit them; DELETE archives."""

    serializer_class = NodeSerializer

    def get_queryset(self):
        return Node.objects.filter(graph=self.graph()).order_by("id")

    def perform_create(self, serializer):
        serializer.save(graph=self.graph())


@extend_schema_view(
    **{
        a: extend_schema(parameters=[GRAPH_ID])
        for a in ("list", "retrieve", "create", "update", "partial_update", "destroy")
    }
)
class EdgeViewSet(GraphScopedMixin, ArchiveOnDeleteMixin, viewsets.ModelViewSet):
    """Edges of a graph. Operators create them; weights move only through feedback; DELETE archives."""

    serializer_class = EdgeSerializer

    def get_queryset(self):
        return Edge.objects.filter(graph=self.graph()).select_related("edge_type").order_by("id")

    def perform_create(self, serializer):
        serializer.save(graph=self.graph())


class PolicyViewSet(GraphScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """A graph's policy: the current revision, its history, and changes (each a new revision)."""

    serializer_class = PolicySerializer

    def get_queryset(self):
        return PolicyRevision.objects.filter(graph=self.graph()).order_by("-revision")

    @extend_schema(parameters=[GRAPH_ID], responses=PolicySerializer)
    def current(self, request, graph_pk=None):
        return Response(self.get_serializer(self.graph().current_policy()).data)

    @extend_schema(parameters=[GRAPH_ID], request=PolicySerializer, responses={201: PolicySerializer})
    def change(self, request, graph_pk=None):
        current = self.graph().current_policy()
        serializer = self.get_serializer(current, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        note = changes.pop("note", "")
        with transaction.atomic():
            revision = services.set_policy(request.user, self.graph(), changes, note=note)
        return Response(self.get_serializer(revision).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[GRAPH_ID])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("organization", str, description="Organization slug."),
            OpenApiParameter("action", str, description="Exact action, e.g. policy.update."),
        ]
    )
)
class AuditEventViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit chain of the caller's organizations, in order, filterable by organization and action."""

    serializer_class = AuditEventSerializer

    def get_queryset(self):
        qs = (
            AuditEvent.objects.for_user(self.request.user)
            .select_related("organization")
            .order_by("organization_id", "seq")
        )
        params = self.request.query_params
        if params.get("organization"):
            qs = qs.filter(organization__slug=params["organization"])
        if params.get("action"):
            qs = qs.filter(action=params["action"])
        return qs

    @extend_schema(
        parameters=[OpenApiParameter("organization", str, required=True, description="Organization slug.")],
        responses=AuditVerificationSerializer,
    )
    @action(detail=False, methods=["get"])
    def verify(self, request):
        """Walk the organization's chain and report the first broken link, if any."""
        slug = request.query_params.get("organization")
        if not slug:
            raise ValidationError({"organization": "This query parameter is required."})
        org = get_object_or_404(Organization.objects.for_user(request.user), slug=slug)
        result = audit.verify(org)
        return Response({"organization": org.slug, **result.as_dict()})
