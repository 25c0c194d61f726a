"""Pages of the graph core: the graphs list, the audit trail, edge types and policy (tune), members.

Saving the tune form writes a new policy revision and audit events through ``graphadmin.actions``;
its what-if preview is ranking's page (``ranking.views.tune_preview``). Restoring a revision writes a new
one with its numbers (``tune_restore``), after ranking's preview of it (``ranking.views.restore_preview``).
"""

from __future__ import annotations

import json
from datetime import date

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from graphadmin import actions, audit
from graphadmin.admin import administered_users
from graphadmin.errors import Conflict, InputError
from graphadmin.forms import TuneForm
from graphadmin.models import AuditEvent, EdgeType, Graph, Membership, PolicyRevision
from graphadmin.models.policy import priorities_to_restore, revision_changes
from graphadmin.models.tenancy import ROLES
from graphadmin.tenancy import NEEDS, graph_access
from graphadmin.vault.export import export_zip


@login_required
def home(request):
    """The graphs of the user's organizations where the role reads pages (not an agent's), with counts."""
    graphs = (
        Graph.objects.for_user(request.user, NEEDS["read"])
        .select_related("organization")
        .order_by("organization__slug", "slug")
    )
    return render(request, "graphadmin/home.html", {"graphs": graphs})


def _value(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict | list):
        return f"{len(v)} item(s)"
    return "—" if v is None else str(v)


def audit_summary(payload) -> str:
    """An audit event's payload in one line a person reads: ``a → b`` for what changed (a ``changes`` map of
    before/after, or a ``before`` beside the new value), then the other plain values by name. Any action's
    payload reads this way, so a new action needs nothing here."""
    if not isinstance(payload, dict):
        return _value(payload)
    parts = []
    for field, prefix in (("changes", ""), ("priorities", "priority ")):
        changes = payload.get(field)
        if not isinstance(changes, dict):
            continue
        for key, change in ((f"{prefix}{k}", v) for k, v in changes.items()):
            if isinstance(change, dict) and {"before", "after"} <= set(change):
                parts.append(f"{key} {_value(change['before'])} → {_value(change['after'])}")
            elif isinstance(change, list | tuple) and len(change) == 2:
                parts.append(f"{key} {_value(change[0])} → {_value(change[1])}")
            else:
                parts.append(f"{key} {_value(change)}")
    rest = {k: v for k, v in payload.items() if k not in ("changes", "priorities", "before", "after")}
    if "before" in payload:
        new_key = "after" if "after" in payload else next((k for k in ("role", "priority") if k in payload), None)
        new = payload.get(new_key) if new_key else None
        rest.pop(new_key, None)
        subject_key = next((k for k in ("user", "edge_type") if k in payload), None)
        subject = rest.pop(subject_key) if subject_key else ""
        change = f"{_value(payload['before'])} → {_value(new)}"
        parts.insert(0, f"{subject}: {change}" if subject else change)
    parts += [f"{k} {_value(v)}" for k, v in rest.items() if v not in ("", None, [], {})]
    return "; ".join(parts)


@login_required
def audit_trail(request, graph_id):
    """The organization's audit chain, filterable by action, actor and day, each event summarised in words
    (with a link to its batch when it has one) and its payload as JSON, with the chain's verification status."""
    access = graph_access(request.user, graph_id)
    org_id = access.graph.organization_id
    events = AuditEvent.objects.filter(organization_id=org_id).order_by("-seq")
    action, actor = request.GET.get("action", ""), request.GET.get("actor", "")
    if action:
        events = events.filter(action=action)
    if actor:
        events = events.filter(actor__icontains=actor)
    days = {}
    for name, lookup in (("from", "created_at__date__gte"), ("to", "created_at__date__lte")):
        raw = request.GET.get(name, "")
        try:
            days[name] = date.fromisoformat(raw) if raw else None
        except ValueError:
            messages.error(request, f"{name}: expected a date, YYYY-MM-DD; not applied.")
            days[name] = None
        if days[name]:
            events = events.filter(**{lookup: days[name]})
    actions = (
        AuditEvent.objects.filter(organization_id=org_id).order_by("action").values_list("action", flat=True).distinct()
    )
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    for event in page.object_list:
        event.summary = audit_summary(event.payload)
        event.payload_json = json.dumps(event.payload, indent=2, sort_keys=True, default=str)
        batch = event.payload.get("batch") if isinstance(event.payload, dict) else None
        graph = (event.scope or {}).get("graph")
        event.batch_url = reverse("batch", args=[graph, batch]) if isinstance(batch, int) and graph else ""
    return render(
        request,
        "graphadmin/audit.html",
        {
            "access": access,
            "page": page,
            "actions": list(actions),
            "action": action,
            "actor": actor,
            "since": days["from"],
            "until": days["to"],
            "chain": audit.verify(org_id, full=False),
        },
    )


def _initial(current: PolicyRevision, edge_types) -> dict:
    return {
        **current.numbers(),
        **{f"priority_{et.pk}": et.priority for et in edge_types},
        "base_revision": current.revision,
    }


def _revision_diffs(graph):
    """Revisions newest first, each with what changed from the one before (``revision_changes``: its numbers
    and its edge-type priorities)."""
    revisions = list(PolicyRevision.objects.filter(graph=graph).select_related("created_by").order_by("revision"))
    names = dict(EdgeType.objects.filter(graph=graph).values_list("pk", "name"))
    rows = [
        {"revision": rev, "diff": revision_changes(revisions[i - 1] if i else None, rev, names)}
        for i, rev in enumerate(revisions)
    ]
    return rows[::-1]


@login_required
def tune(request, graph_id):
    access = graph_access(request.user, graph_id, "tune")
    graph = access.graph
    edge_types = list(EdgeType.objects.filter(graph=graph).order_by("name"))
    current = graph.current_policy()
    if request.method == "POST":
        form = TuneForm(request.POST, edge_types=edge_types)
        if form.is_valid():
            changes, priorities = form.changes(current), form.priority_changes()
            if changes or priorities:
                # Numbers and priorities in one revision, with the note typed beside them.
                try:
                    new = actions.do_set_policy(
                        graph,
                        changes,
                        actor=request.user,
                        note=form.cleaned_data["note"],
                        priorities=priorities,
                        base_revision=form.cleaned_data["base_revision"],
                    )
                except Conflict as exc:
                    # Someone saved since this page was opened: back to the page, which shows their revision.
                    messages.error(request, str(exc))
                    return redirect("tune", graph_id=graph.pk)
                messages.success(
                    request,
                    f"Saved as r{new.revision}: {len(changes)} policy value(s), {len(priorities)} priority(ies).",
                )
            else:
                messages.info(request, "Nothing changed.")
            return redirect("tune", graph_id=graph.pk)
    else:
        form = TuneForm(initial=_initial(current, edge_types), edge_types=edge_types)
    return render(
        request,
        "graphadmin/tune.html",
        {
            "access": access,
            "form": form,
            "current": current,
            "revisions": _revision_diffs(graph),
            # The what-if's session selection (ranking.whatif.MAX_WHATIF_SESSIONS; the core does not import ranking).
            "whatif_default": 50,
            "whatif_max": 200,
        },
    )


NOTE_MAX = 500


@login_required
@require_POST
def tune_restore(request, graph_id, revision):
    """Restore a previous policy revision (operators): a new revision with its numbers and its recorded
    edge-type priorities, audited as any change."""
    access = graph_access(request.user, graph_id, "tune")
    graph = access.graph
    target = get_object_or_404(PolicyRevision.objects.filter(graph=graph), revision=revision)
    note = request.POST.get("note", "").strip() or f"restore r{target.revision}"
    if len(note) > NOTE_MAX:
        messages.error(request, f"note: at most {NOTE_MAX} characters; nothing was restored.")
        return redirect("tune", graph_id=graph.pk)
    current = graph.current_policy()
    changes = {k: v for k, v in target.numbers().items() if current.numbers().get(k) != v}
    priorities = {et: then for et, (_now, then) in priorities_to_restore(target).items()}
    if not changes and not priorities:
        messages.info(
            request, f"The current policy already has r{target.revision}'s numbers and priorities: nothing changed."
        )
        return redirect("tune", graph_id=graph.pk)
    new = actions.do_set_policy(graph, changes, actor=request.user, note=note, priorities=priorities)
    unrecorded = "" if target.priorities is not None else "; its priorities were not recorded, so they stay"
    messages.success(
        request,
        f"Restored r{target.revision} as r{new.revision}: {len(changes)} value(s) and {len(priorities)} "
        f"priority(ies) changed ({note}){unrecorded}.",
    )
    return redirect("tune", graph_id=graph.pk)


@login_required
def export_vault(request, graph_id):
    """The graph as an Obsidian vault in a zip (operators; graphadmin.vault.export), audited as graph.export."""
    access = graph_access(request.user, graph_id, "operate")
    graph = access.graph
    data, result = export_zip(graph)
    with transaction.atomic():
        audit.append(
            graph.organization_id,
            request.user,
            "graph.export",
            {"notes": result.notes, "edges": result.edges, "to": "download"},
            scope={"graph": graph.pk, "graph_slug": graph.slug},
        )
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{graph.slug}-vault.zip"'
    return response


def _member_target(request, access, username: str):
    """The user an admin names on the members page: one of ``administered_users`` (so a name of
    another organization's member is answered as unknown, never revealed), else an InputError."""
    user = administered_users(request.user).filter(username=username.strip()).first() if username.strip() else None
    if user is None:
        raise InputError.field(
            "username", f"No user {username.strip()!r} you can add: an account is created in the admin."
        )
    return user


@login_required
def members(request, graph_id):
    """The organization's members and their roles, and its graphs (admins): grant, change and revoke a
    role through the audited actions (``do_grant_role``, ``do_revoke_role``); one's own role is left to
    another admin, so an organization never loses its last admin by a slip."""
    access = graph_access(request.user, graph_id, "administer")
    org = access.graph.organization
    if request.method == "POST":
        op, username, role = request.POST.get("op", ""), request.POST.get("username", ""), request.POST.get("role", "")
        target = _member_target(request, access, username)
        if target.pk == request.user.pk:
            raise InputError.field("username", "Your own role is changed by another admin of the organization.")
        if op == "revoke":
            membership = Membership.objects.filter(organization=org, user=target).first()
            if membership is None:
                raise InputError.field("username", f"{target.username} is not a member.")
            actions.do_revoke_role(membership, actor=request.user)
            messages.success(request, f"{target.username} is no longer a member of {org.slug}.")
        else:
            if role not in ROLES:
                raise InputError.field("role", f"Expected one of {', '.join(ROLES)}.")
            _membership, before = actions.do_grant_role(org, target, role, actor=request.user)
            change = f"{before} → {role}" if before else f"new member, {role}"
            messages.success(request, f"{target.username}: {change}.")
        return redirect("members", graph_id=graph_id)
    rows = Membership.objects.filter(organization=org).select_related("user").order_by("user__username")
    graphs = Graph.objects.filter(organization=org).order_by("slug")
    return render(
        request,
        "graphadmin/members.html",
        {"access": access, "members": rows, "graphs": graphs, "roles": ROLES, "org": org},
    )
