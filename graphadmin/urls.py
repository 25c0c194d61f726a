"""Top-level URL routes (a composition module: it mounts every app's urls).

Pages: the core's (home, audit trail, tune) and those of feedback and ranking, under /g/<graph_id>/.
REST API under /api/: the core's (graphadmin.api.urls), ranking's and feedback's, with the OpenAPI
schema and Swagger UI (both behind login). Then the admin and the login pages.
"""

from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from feedback import urls as feedback_urls
from graphadmin import views
from graphadmin.notes import neighbourhood
from graphadmin.runtime import health
from ranking import urls as ranking_urls

# The core's pages, all under /g/<graph_id>/ but the graphs list.
page_urlpatterns = [
    path("g/<int:graph_id>/audit/", views.audit_trail, name="audit"),
    path("g/<int:graph_id>/tune/", views.tune, name="tune"),
    path("g/<int:graph_id>/export.zip", views.export_vault, name="export-vault"),
    path("g/<int:graph_id>/members/", views.members, name="members"),
    path("g/<int:graph_id>/tune/revisions/<int:revision>/restore/", views.tune_restore, name="tune-restore"),
    path(
        "g/<int:graph_id>/nodes/<int:node_id>/graph.json", neighbourhood.neighbourhood_json, name="graph-neighbourhood"
    ),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    # Pages name static/favicon.svg in <link rel="icon">; a client that asks for /favicon.ico anyway is sent there.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("", include(page_urlpatterns)),
    path("", include(feedback_urls.page_urlpatterns)),
    path("", include(ranking_urls.page_urlpatterns)),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Behind login (SPECTACULAR_SETTINGS SERVE_PERMISSIONS for the schema); the split view serves its
    # start-up script as a file, so the page needs no inline script under the CSP.
    path("api/docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="swagger-ui"),
    path("api/", include("graphadmin.api.urls")),
    path("api/", include(ranking_urls.api_urlpatterns)),
    path("api/", include(feedback_urls.api_urlpatterns)),
]

# The product's own 500, and a 503 with Retry-After when the database is unreachable (graphadmin.runtime.errorpages).
handler500 = "graphadmin.runtime.errorpages.server_error"
