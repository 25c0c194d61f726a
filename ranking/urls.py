"""URL routes of ranking: its REST API (``api_urlpatterns``, mounted under /api/) and its pages
(``page_urlpatterns``, under /g/<graph_id>/). Both are mounted by graphadmin.urls."""

from django.urls import path

from . import api, subgraph, views

api_urlpatterns = [
    path("graphs/<int:graph_pk>/rank/", api.RankView.as_view(), name="graph-rank"),
    path("graphs/<int:graph_pk>/search/", api.SearchView.as_view(), name="graph-search"),
    path("graphs/<int:graph_pk>/context/", api.ContextView.as_view(), name="graph-context"),
    path("graphs/<int:graph_pk>/whatif/", api.WhatIfView.as_view(), name="graph-whatif"),
    path("injections/<int:pk>/explain/", api.ExplainView.as_view(), name="injection-explain"),
]

page_urlpatterns = [
    path("g/<int:graph_id>/explain/", views.injection_list, name="explain"),
    path("g/<int:graph_id>/injections/<int:injection_id>/", views.injection_detail, name="injection"),
    path("g/<int:graph_id>/tune/preview/", views.tune_preview, name="tune-preview"),
    path("g/<int:graph_id>/tune/calibrate/", views.tune_calibrate, name="tune-calibrate"),
    path("g/<int:graph_id>/tune/revisions/<int:revision>/preview/", views.restore_preview, name="tune-restore-preview"),
    path(
        "g/<int:graph_id>/injections/<int:injection_id>/graph.json",
        subgraph.injection_subgraph_json,
        name="injection-subgraph",
    ),
]
