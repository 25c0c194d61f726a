"""URL routes of the feedback API (included under /api/)."""

from django.urls import path

from . import api

session = "graphs/<int:graph_pk>/sessions/<str:external_id>/"
urlpatterns = [
    path(session + "uses/", api.UsesView.as_view(), name="session-uses"),
    path(session + "response/", api.ResponseView.as_view(), name="session-response"),
    path(session + "outcome/", api.OutcomeView.as_view(), name="session-outcome"),
    path("graphs/<int:graph_pk>/decay/", api.DecayView.as_view(), name="graph-decay"),
    path("graphs/<int:graph_pk>/normalize/", api.NormalizeView.as_view(), name="graph-normalize"),
    path("graphs/<int:graph_pk>/weights/", api.ManualWeightsView.as_view(), name="graph-weights"),
    path("graphs/<int:graph_pk>/metrics/", api.MetricsView.as_view(), name="graph-metrics"),
    path("batches/", api.BatchListView.as_view(), name="batch-list"),
    path("batches/<int:pk>/", api.BatchDetailView.as_view(), name="batch-detail"),
    path("batches/<int:pk>/changes/", api.BatchChangesView.as_view(), name="batch-changes"),
    path("batches/<int:pk>/rollback/", api.BatchRollbackView.as_view(), name="batch-rollback"),
]
