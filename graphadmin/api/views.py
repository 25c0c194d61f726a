"""REST views for the graph core: thin. Tenancy and role through ``graphadmin.tenancy``, writes through
``graphadmin.actions`` (each audited), errors mapped once by ``graphadmin.api.errors``."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response

from graphadmin import actions, audit, readiness
from graphadmin.models import AuditEvent, Edge, EdgeType, Graph, Node, Organization, PolicyRevision
from graphadmin.tenancy import NEEDS, Access, graph_access, organization_role, require

from .permissions import ActAllowed
from .serializers import (
    AuditEventSerializer,
    AuditVerificationSerializer,
    EdgeSerializer,
    EdgeTypeSerializer,
    GraphSerializer,
    NodeSerializer,
    PolicyConflictSerializer,
    PolicySerializer,
)

GRAPH_ID = OpenApiParameter("graph_pk", int, OpenApiParameter.PATH, description="The graph's id.")


class GraphViewSet(viewsets.ModelViewSet):
    """Graphs of the caller's organizations. Admins create, edit and delete them; every member reads
    them (agents too: the list is how a service account finds the graph it addresses)."""

    serializer_class = GraphSerializer
    permission_classes = [IsAuthenticated, ActAllowed]
    write_act = "administer"
    lookup_value_converter = "int"

    def get_queryset(self):
        return Graph.objects.for_user(self.request.user).select_related("organization").order_by("id")

    def get_serializer(self, *args, **kwargs):
        # Each graph's vectors_pending, for a whole page at once (one query: graphadmin.readiness.pending_of).
        if args and args[0] is not None:
            graphs = [args[0]] if isinstance(args[0], Graph) else list(args[0])
            kwargs["context"] = {
                **self.get_serializer_context(),
                "vectors_pending": readiness.pending_of(g.pk for g in graphs),
            }
        return super().get_serializer(*args, **kwargs)

    def check_access(self, act: str) -> None:
        # Reads go through the queryset; a write to one graph needs ``administer`` there. Creating is
        # checked against the posted organization (perform_create).
        if act != "read" and "pk" in self.kwargs:
            graph_access(self.request.user, self.kwargs["pk"], act)

    def perform_create(self, serializer):
        data = serializer.validated_data
        org = data["organization"]
        require(organization_role(self.request.user, org.pk), self.write_act)
        serializer.instance = actions.do_create_graph(
            org,
            data["slug"],
            data["name"],
            data.get("description", ""),
            actor=self.request.user,
            feedback_enabled=data.get("feedback_enabled", True),
            text_search_config=data.get("text_search_config", "english"),
        )

    def perform_update(self, serializer):
        serializer.instance = actions.do_update_graph(
            serializer.instance, dict(serializer.validated_data), actor=self.request.user
        )

    def perform_destroy(self, instance):
        actions.do_delete_graph(instance, actor=self.request.user)


class GraphScopedMixin:
    """For resources under /api/graphs/{graph_pk}/: the graph is looked up through the caller's tenancy."""

    permission_classes = [IsAuthenticated, ActAllowed]
    write_act = "operate"
    lookup_value_converter = "int"

    def check_access(self, act: str) -> Access:
        """The graph and the caller's role (one query); NotFound / Forbidden otherwise."""
        self._access = graph_access(self.request.user, self.kwargs["graph_pk"], act)
        return self._access

    def graph(self) -> Graph:
        if not hasattr(self, "_access"):
            self.check_access("read")
        return self._access.graph

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
    """Edge types of a graph. Operators create, edit and delete them (each audited; a type edges use cannot
    be deleted: 409)."""

    serializer_class = EdgeTypeSerializer
    write_act = "tune"

    def get_queryset(self):
        return EdgeType.objects.filter(graph=self.graph()).order_by("name")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = actions.do_create_edge_type(
            self.graph(),
            data["name"],
            actor=self.request.user,
            priority=data.get("priority", 0.0),
            description=data.get("description", ""),
        )

    def perform_update(self, serializer):
        data = serializer.validated_data
        serializer.instance = actions.do_update_edge_type(
            serializer.instance,
            actor=self.request.user,
            name=data.get("name"),
            priority=data.get("priority"),
            description=data.get("description"),
        )

    def perform_destroy(self, instance):
        # Refused with a 409 while edges use it (graphadmin.errors.Conflict).
        actions.do_delete_edge_type(instance, actor=self.request.user)


class ArchiveOnDeleteMixin:
    """DELETE archives the row (audited): its history stays, and it never appears in retrieval again."""

    def perform_destroy(self, instance):
        actions.do_archive(instance, actor=self.request.user)


WRITTEN_BY = OpenApiParameter(
    "written_by",
    str,
    description="Only notes written through the memory API: 'agents' (by anyone), or by this username.",
)


@extend_schema_view(
    list=extend_schema(parameters=[GRAPH_ID, WRITTEN_BY]),
    **{a: extend_schema(parameters=[GRAPH_ID]) for a in ("retrieve", "create", "update", "partial_update", "destroy")},
)
class NodeViewSet(GraphScopedMixin, ArchiveOnDeleteMixin, viewsets.ModelViewSet):
    """Nodes of a graph. Operators create and edit them; DELETE archives."""

    serializer_class = NodeSerializer

    def get_queryset(self):
        qs = Node.objects.filter(graph=self.graph()).select_related("created_by").order_by("id")
        written_by = self.request.query_params.get("written_by", "")
        if written_by == "agents":
            qs = qs.filter(created_by__isnull=False)
        elif written_by:
            qs = qs.filter(created_by__username=written_by)
        return qs

    def perform_create(self, serializer):
        serializer.instance = actions.do_create_record(
            Node, self.graph(), serializer.validated_data, actor=self.request.user
        )

    def perform_update(self, serializer):
        serializer.instance = actions.do_update_record(
            serializer.instance, serializer.validated_data, actor=self.request.user
        )


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
        serializer.instance = actions.do_create_record(
            Edge, self.graph(), serializer.validated_data, actor=self.request.user
        )

    def perform_update(self, serializer):
        serializer.instance = actions.do_update_record(
            serializer.instance, serializer.validated_data, actor=self.request.user
        )


class PolicyViewSet(GraphScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet):
    """A graph's policy: the current revision, its history, and changes (each a new revision)."""

    serializer_class = PolicySerializer
    write_act = "tune"

    def get_queryset(self):
        return PolicyRevision.objects.filter(graph=self.graph()).order_by("-revision")

    def get_object(self):
        """The current revision: what GET shows and a change starts from (and what OPTIONS describes)."""
        return self.graph().current_policy()

    @extend_schema(parameters=[GRAPH_ID], responses=PolicySerializer)
    def current(self, request, graph_pk=None):
        return Response(self.get_serializer(self.get_object()).data)

    @extend_schema(
        parameters=[GRAPH_ID],
        request=PolicySerializer,
        responses={201: PolicySerializer, 409: PolicyConflictSerializer},
    )
    def change(self, request, graph_pk=None):
        serializer = self.get_serializer(self.get_object(), data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        changes = dict(serializer.validated_data)
        note = changes.pop("note", "")
        wanted = changes.pop("priorities", None) or {}
        base_revision = changes.pop("base_revision", None)
        graph = self.graph()
        edge_types = {et.name: et for et in EdgeType.objects.filter(graph=graph, name__in=list(wanted))}
        unknown = sorted(set(wanted) - set(edge_types))
        if unknown:
            raise ValidationError({"priorities": [f"Unknown edge type(s) in this graph: {', '.join(unknown)}"]})
        priorities = {edge_types[name]: value for name, value in wanted.items()}
        revision = actions.do_set_policy(
            graph, changes, actor=request.user, note=note, priorities=priorities, base_revision=base_revision
        )
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
            AuditEvent.objects.for_user(self.request.user, NEEDS["read"])
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
        org = get_object_or_404(Organization.objects.for_user(request.user, NEEDS["read"]), slug=slug)
        result = audit.verify(org)
        return Response({"organization": org.slug, **result.as_dict()})
