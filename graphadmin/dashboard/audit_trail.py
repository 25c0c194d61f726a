"""The organization's audit chain, filterable by action and actor, with its verification status."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render

from graphadmin import audit
from graphadmin.models import AuditEvent

from .access import graph_access


@login_required
def audit_trail(request, graph_id):
    access = graph_access(request, graph_id)
    org_id = access.graph.organization_id
    events = AuditEvent.objects.filter(organization_id=org_id).order_by("-seq")
    action, actor = request.GET.get("action", ""), request.GET.get("actor", "")
    if action:
        events = events.filter(action=action)
    if actor:
        events = events.filter(actor__icontains=actor)
    actions = (
        AuditEvent.objects.filter(organization_id=org_id).order_by("action").values_list("action", flat=True).distinct()
    )
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "graphadmin/audit.html",
        {
            "access": access,
            "page": page,
            "actions": list(actions),
            "action": action,
            "actor": actor,
            "chain": audit.verify(org_id, full=False),
        },
    )
