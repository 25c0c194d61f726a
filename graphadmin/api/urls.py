"""URL routes of the core's REST API (graphs, nodes, edges, edge types, policy, audit), mounted under /api/."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from . import views

# JSON only: no ``{format}`` suffix routes (``/api/audit/verify.json``), which doubled every operation.
router = DefaultRouter(use_regex_path=False)
router.include_format_suffixes = False
router.register("graphs", views.GraphViewSet, basename="graph")
router.register("audit", views.AuditEventViewSet, basename="audit")

graph_router = DefaultRouter(use_regex_path=False)
graph_router.include_format_suffixes = False
graph_router.include_root_view = False
graph_router.register("nodes", views.NodeViewSet, basename="node")
graph_router.register("edges", views.EdgeViewSet, basename="edge")
graph_router.register("edge-types", views.EdgeTypeViewSet, basename="edgetype")

policy = views.PolicyViewSet
urlpatterns = [
    path("", include(router.urls)),
    path("graphs/<int:graph_pk>/", include(graph_router.urls)),
    path(
        "graphs/<int:graph_pk>/policy/",
        policy.as_view({"get": "current", "put": "change", "patch": "change"}),
        name="policy",
    ),
    path("graphs/<int:graph_pk>/policy/revisions/", policy.as_view({"get": "list"}), name="policy-revisions"),
]
