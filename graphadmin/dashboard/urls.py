"""Dashboard routes, all under /g/<graph_id>/."""

from django.urls import path

from . import audit_trail, batches, explain, impact, overview, records, tune

urlpatterns = [
    path("g/<int:graph_id>/", overview.overview, name="overview"),
    path("g/<int:graph_id>/nodes/<int:node_id>/", records.node_detail, name="node"),
    path("g/<int:graph_id>/edges/<int:edge_id>/", records.edge_detail, name="edge"),
    path("g/<int:graph_id>/batches/", batches.batch_list, name="batches"),
    path("g/<int:graph_id>/batches/<int:batch_id>/", batches.batch_detail, name="batch"),
    path("g/<int:graph_id>/batches/<int:batch_id>/rollback/", batches.batch_rollback, name="dashboard-rollback"),
    path("g/<int:graph_id>/audit/", audit_trail.audit_trail, name="audit"),
    path("g/<int:graph_id>/tune/", tune.tune, name="tune"),
    path("g/<int:graph_id>/tune/preview/", tune.preview, name="tune-preview"),
    path("g/<int:graph_id>/impact/", impact.impact, name="impact"),
    path("g/<int:graph_id>/explain/", explain.injection_list, name="explain"),
    path("g/<int:graph_id>/injections/<int:injection_id>/", explain.injection_detail, name="injection"),
]
