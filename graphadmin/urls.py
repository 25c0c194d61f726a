"""Top-level URL routes: dashboard, API (with its OpenAPI schema and Swagger UI), admin, login."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from graphadmin import neighbourhood, views
from ranking import subgraph

urlpatterns = [
    path("", views.home, name="home"),
    path("", include("graphadmin.dashboard.urls")),
    path(
        "g/<int:graph_id>/nodes/<int:node_id>/graph.json", neighbourhood.neighbourhood_json, name="graph-neighbourhood"
    ),
    path(
        "g/<int:graph_id>/injections/<int:injection_id>/graph.json",
        subgraph.injection_subgraph_json,
        name="injection-subgraph",
    ),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/", include("graphadmin.api.urls")),
]
