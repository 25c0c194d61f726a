"""URL routes of feedback: its REST API (``api_urlpatterns``, mounted under /api/) and its pages
(``page_urlpatterns``, under /g/<graph_id>/). Both are mounted by graphadmin.urls.
"""

from django.urls import path

from . import api, views

# A session id is the agent's own string (any character the context call accepted, "/" included: sent as is or
# as %2F), so the route takes a path, as the session page does.
session = "graphs/<int:graph_pk>/sessions/<path:external_id>/"
api_urlpatterns = [
    path(session + "uses/", api.UsesView.as_view(), name="session-uses"),
    path(session + "response/", api.ResponseView.as_view(), name="session-response"),
    path(session + "outcome/", api.OutcomeView.as_view(), name="session-outcome"),
    path("graphs/<int:graph_pk>/decay/", api.DecayView.as_view(), name="graph-decay"),
    path("graphs/<int:graph_pk>/normalize/", api.NormalizeView.as_view(), name="graph-normalize"),
    path("graphs/<int:graph_pk>/weights/", api.ManualWeightsView.as_view(), name="graph-weights"),
    path("graphs/<int:graph_pk>/metrics/", api.MetricsView.as_view(), name="graph-metrics"),
    path("graphs/<int:graph_pk>/health/", api.HealthView.as_view(), name="graph-health"),
    path("graphs/<int:graph_pk>/memory/remember/", api.RememberView.as_view(), name="memory-remember"),
    path("graphs/<int:graph_pk>/memory/link/", api.LinkView.as_view(), name="memory-link"),
    path("graphs/<int:graph_pk>/memory/forget/", api.ForgetView.as_view(), name="memory-forget"),
    path("graphs/<int:graph_pk>/import/", api.VaultImportView.as_view(), name="graph-import"),
    path(
        "graphs/<int:graph_pk>/imports/",
        api.VaultImportStatusViewSet.as_view({"get": "list"}),
        name="graph-imports",
    ),
    path(
        "graphs/<int:graph_pk>/imports/<int:pk>/",
        api.VaultImportStatusViewSet.as_view({"get": "retrieve"}),
        name="graph-import-status",
    ),
    path("batches/", api.BatchListView.as_view(), name="batch-list"),
    path("batches/<int:pk>/", api.BatchDetailView.as_view(), name="batch-detail"),
    path("batches/<int:pk>/changes/", api.BatchChangesView.as_view(), name="batch-changes"),
    path("batches/<int:pk>/rollback/", api.BatchRollbackView.as_view(), name="batch-rollback"),
    path("batches/<int:pk>/rollback-preview/", api.BatchRollbackPreviewView.as_view(), name="batch-rollback-preview"),
    path("batches/<int:pk>/finish-rollback/", api.BatchFinishRollbackView.as_view(), name="batch-finish-rollback"),
]

page_urlpatterns = [
    path("g/<int:graph_id>/", views.overview, name="overview"),
    path("g/<int:graph_id>/nodes/<int:node_id>/", views.node_detail, name="node"),
    path("g/<int:graph_id>/edges/<int:edge_id>/", views.edge_detail, name="edge"),
    path("g/<int:graph_id>/batches/", views.batch_list, name="batches"),
    path("g/<int:graph_id>/batches/<int:batch_id>/", views.batch_detail, name="batch"),
    path("g/<int:graph_id>/batches/<int:batch_id>/rollback/", views.batch_rollback, name="dashboard-rollback"),
    path(
        "g/<int:graph_id>/batches/<int:batch_id>/finish-rollback/",
        views.batch_finish_rollback,
        name="dashboard-finish-rollback",
    ),
    path("g/<int:graph_id>/impact/", views.impact, name="impact"),
    path("g/<int:graph_id>/health/", views.health_page, name="health"),
    path("g/<int:graph_id>/policy/effects/", views.policy_effects, name="policy-effects"),
    path("g/<int:graph_id>/sessions/", views.session_list, name="sessions"),
    # A session id is the agent's own string: any character but the path separator is kept as given.
    path("g/<int:graph_id>/sessions/<path:external_id>/", views.session_detail, name="session"),
]
