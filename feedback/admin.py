"""Admin registrations of the feedback ledger, scoped to the staff user's organizations."""

from django.contrib import admin

from feedback.models import AgentSession, ContextInjection, DailyMetric, InjectionCandidate, UpdateBatch, UseEvent, WeightChange
from graphadmin.admin_tenancy import ReadOnlyAdmin, TenantAdmin


@admin.register(AgentSession)
class AgentSessionAdmin(TenantAdmin):
    list_display = ["external_id", "graph", "started_at", "outcome"]
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


@admin.register(WeightChange)
class WeightChangeAdmin(ReadOnlyAdmin):
    list_display = ["batch", "node", "edge", "field", "before", "after", "event", "created_at"]
    list_filter = ["field"]
    raw_id_fields = ["batch", "node", "edge", "use_event"]


@admin.register(DailyMetric)
class DailyMetricAdmin(ReadOnlyAdmin):
    list_display = ["graph", "day", "computed_at"]
    date_hierarchy = "day"
