"""URL routes of the ranking API, included under /api/ by graphadmin.api.urls."""

from django.urls import path

from . import api

urlpatterns = [
    path("graphs/<int:graph_pk>/rank/", api.RankView.as_view(), name="graph-rank"),
    path("graphs/<int:graph_pk>/search/", api.SearchView.as_view(), name="graph-search"),
    path("graphs/<int:graph_pk>/context/", api.ContextView.as_view(), name="graph-context"),
    path("graphs/<int:graph_pk>/whatif/", api.WhatIfView.as_view(), name="graph-whatif"),
    path("injections/<int:pk>/explain/", api.ExplainView.as_view(), name="injection-explain"),
]
