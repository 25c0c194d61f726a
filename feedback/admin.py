"""Admin registrations of the feedback ledger, scoped to the staff user's organizations: read-only
(sessions and their outcomes, injections, uses, batches and weight history change only through
``feedback.actions``); the one edit is the batch rollback action, which needs the operator role."""

from django.contrib import admin

from feedback import actions
from feedback.models import (
    AgentSession,
    ContextInjection,
    DailyMetric,
    InjectionCandidate,
    UpdateBatch,
    UseEvent,
    WeightChange,
    WeightChangeBlock,
)
from graphadmin.admin.tenancy import ReadOnlyAdmin, attempt, check_graph, may


@admin.register(AgentSession)
class AgentSessionAdmin(ReadOnlyAdmin):
    """Read-only: an outcome is applied by ``feedback.actions.do_apply_outcome`` (the API or MCP report)."""

    list_display = ["external_id", "graph", "owner", "started_at", "outcome"]
    list_filter = ["outcome"]


@admin.register(ContextInjection)
class ContextInjectionAdmin(ReadOnlyAdmin):
    list_display = ["id", "session", "graph", "mode", "budget_unit", "budget", "created_at"]


@admin.register(InjectionCandidate)
class InjectionCandidateAdmin(ReadOnlyAdmin):
    list_display = ["injection", "rank", "selected", "node", "edge", "total"]


@admin.register(UseEvent)
class UseEventAdmin(ReadOnlyAdmin):
    list_display = ["session", "signal", "node", "edge", "source", "created_at"]


@admin.register(UpdateBatch)
class UpdateBatchAdmin(ReadOnlyAdmin):
    list_display = ["id", "graph", "kind", "status", "node_updates", "edge_updates", "conflicts", "started_at"]
    list_filter = ["kind", "status"]

    def has_rollback_permission(self, request):
        """The rollback action is offered to operators and admins (each batch is checked again when it runs)."""
        return may(request.user, "operate")


@admin.register(WeightChange)
class WeightChangeAdmin(ReadOnlyAdmin):
    list_display = ["batch", "node", "edge", "field", "before", "after", "event", "created_at"]
    list_filter = ["field"]
    raw_id_fields = ["batch", "node", "edge", "use_event"]


@admin.register(WeightChangeBlock)
class WeightChangeBlockAdmin(ReadOnlyAdmin):
    list_display = ["batch", "target", "field", "event", "size", "id_min", "id_max", "created_at"]
    list_filter = ["target", "field"]
    raw_id_fields = ["batch"]
    # The arrays can hold tens of thousands of values; the dashboard's batch page lists each change.
    exclude = ["ids", "before", "after"]


@admin.register(DailyMetric)
class DailyMetricAdmin(ReadOnlyAdmin):
    list_display = ["graph", "day", "computed_at"]
    date_hierarchy = "day"


@admin.action(
    description="Roll back the selected batches (same action as the dashboard button)", permissions=["rollback"]
)
def rollback_batches(modeladmin, request, queryset):
    """Roll back each selected batch; needs the operator role in the batch's organization."""
    for batch in queryset.select_related("graph"):

        def rollback(batch=batch):
            check_graph(request, batch.graph_id, "operate")
            return actions.do_rollback_batch(batch, actor=request.user)

        result = attempt(modeladmin, request, f"Batch #{batch.pk}", rollback)
        if result is None:
            continue
        modeladmin.message_user(
            request,
            f"Batch #{batch.pk} rolled back by batch #{result.batch_id} ({result.conflicts} conflict(s) left alone).",
        )


UpdateBatchAdmin.actions = [rollback_batches]
