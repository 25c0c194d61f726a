"""Dashboard views of the graph core."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from graphadmin.models import Graph


@login_required
def home(request):
    """The graphs of the user's organizations, with counts."""
    graphs = Graph.objects.for_user(request.user).select_related("organization").order_by("organization__slug", "slug")
    return render(request, "graphadmin/home.html", {"graphs": graphs})
