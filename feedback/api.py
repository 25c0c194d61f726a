"""REST views of the feedback engine: thin. Parse, check the role, call the action or enqueue its task.

Sessions are addressed by graph and external id: ``/api/graphs/{graph_pk}/sessions/{external_id}/...``
(agents know their own session ids, not ours). Roles (DESIGN.md): reporting feedback (uses, response,
outcome) needs at least ``analyst`` (an agent's service account is an analyst: it may report, it may
not tune the policy or roll back); reviewers change nothing. Decay, normalize, manual weights and
rollback need ``operator``. Every member reads batches and metrics. Another organization's graph or
batch is a 404.

Reports answer 202 and run on the Celery worker, enqueued with ``transaction.on_commit`` (the
request is one transaction, ATOMIC_REQUESTS). Input is validated first, so a bad item is a 400
naming it and nothing is enqueued. A report the action would ignore (unknown session, no injection,
nothing surfaced, feedback disabled) answers 202 with that status and is logged, not enqueued; an
outcome equal to the session's current one answers 200 with status ``duplicate`` and its batch.
An ``Idempotency-Key`` header makes a client's retry of the same report apply once.
"""

from __future__ import annotations

import uuid
from datetime import date

from django.db import transaction
from django.db.models import Q
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from graphadmin.api.permissions import RoleForWrites
from graphadmin.api.views import GRAPH_ID, GraphScopedMixin
from graphadmin.models import Edge, Node
from graphadmin.vault.parse import MAX_ARCHIVE_BYTES, VaultError, parse_vault

from . import actions, metrics, tasks
from .imports import do_import_vault
from .models import AgentSession, DailyMetric, InjectionCandidate, UpdateBatch, WeightHistory
from .serializers import (
    AcceptedSerializer,
    DailyMetricSerializer,
    ManualSetSerializer,
    OutcomeSerializer,
    ResponseTextSerializer,
    ResultSerializer,
    RollbackSerializer,
    UpdateBatchDetailSerializer,
    UpdateBatchSerializer,
    UsesSerializer,
    WeightChangeSerializer,
)

EXTERNAL_ID = OpenApiParameter("external_id", str, OpenApiParameter.PATH, description="The agent's session id.")
IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retrying a report with the same key applies it once.",
)
BATCH_ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The batch's id.")


# Authenticated first (an anonymous caller gets 401/403, not a tenancy 404), then the role for writes.


def _enqueue(task, **kwargs) -> str:
    """Send ``task`` once the request's transaction commits; return the task id chosen now."""
    task_id = str(uuid.uuid4())
    transaction.on_commit(lambda: task.apply_async(kwargs=kwargs, task_id=task_id))
    return task_id


def _key(client_key: str, prefix: str, session: AgentSession) -> str:
    client = (client_key or "").strip()[:100]
    return f"{prefix}:{session.pk}:{('client:' + client) if client else uuid.uuid4().hex}"


# The three session reports, shared by the REST views below and the MCP tools (graphadmin.mcp):
# each takes the caller, a graph already found through the caller's tenancy with the role checked,
# the session's external id, the serializer's validated data and the client's idempotency key, and
# returns (body, HTTP status). Input problems found here raise DRF's ValidationError naming the field.


def session_or_status(graph, external_id: str):
    """The graph's session with that external id, or (None, the logged no-op result) when feedback cannot apply."""
    context = {"graph": graph.pk, "session": external_id}
    if not graph.feedback_enabled:
        return None, actions.fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    session = AgentSession.objects.filter(graph=graph, external_id=external_id).first()
    if session is None:
        return None, actions.fall_through("unknown_session", "report for an unknown session", **context)
    return session, None


def _no_op(result) -> tuple[dict, int]:
    return {"status": result.status, "reason": result.details.get("reason", "")}, status.HTTP_202_ACCEPTED


def _queued(task_id: str, key: str) -> tuple[dict, int]:
    return {"status": "queued", "task_id": task_id, "idempotency_key": key}, status.HTTP_202_ACCEPTED


def resolve_use_items(graph, items: list[dict]) -> list[dict]:
    """Turn node ids and edge ids/keys into checked ids of this graph (two queries, whatever the count)."""
    node_ids = {i["node"] for i in items if "node" in i}
    edge_ids = {i["edge"] for i in items if isinstance(i.get("edge"), int)}
    triplets = [i["edge"] for i in items if isinstance(i.get("edge"), dict)]
    nodes = set(Node.objects.filter(graph=graph, archived=False, pk__in=node_ids).values_list("pk", flat=True))
    edge_filter = Q(pk__in=edge_ids)
    for t in triplets:
        edge_filter |= Q(source_id=t["source"], target_id=t["target"], edge_type__name=t["type"])
    edges = {}
    for pk, src, dst, name in Edge.objects.filter(edge_filter, graph=graph, archived=False).values_list(
        "pk", "source_id", "target_id", "edge_type__name"
    ):
        edges[pk] = pk
        edges[(src, dst, name)] = pk
    out, seen = [], {}
    for index, item in enumerate(items):
        if "node" in item:
            if item["node"] not in nodes:
                raise ValidationError({"items": {index: {"node": [f"Unknown node {item['node']} in this graph."]}}})
            kind, pk = "node", item["node"]
        else:
            ref = item["edge"]
            pk = edges.get(ref if isinstance(ref, int) else (ref["source"], ref["target"], ref["type"]))
            if pk is None:
                raise ValidationError({"items": {index: {"edge": [f"Unknown edge {ref} in this graph."]}}})
            kind = "edge"
        if seen.setdefault((kind, pk), item["signal"]) != item["signal"]:
            raise ValidationError(
                {"items": {index: {"signal": [f"{kind} {pk} is reported with two different signals."]}}}
            )
        out.append({"kind": kind, "id": pk, "signal": item["signal"]})
    return out


def report_uses(user, graph, external_id: str, data: dict, client_key: str = "") -> tuple[dict, int]:
    """Validated uses (UsesSerializer) of a session: resolve the items, enqueue reinforcement on commit."""
    session, skipped = session_or_status(graph, external_id)
    if skipped:
        return _no_op(skipped)
    items = resolve_use_items(graph, data["items"])
    key = _key(client_key, "uses", session)
    task_id = _enqueue(
        tasks.apply_uses_task,
        graph_id=graph.pk,
        external_id=external_id,
        items=items,
        learning_rate=data.get("learning_rate"),
        idempotency_key=key,
        user_id=user.pk,
    )
    return _queued(task_id, key)


def report_response(user, graph, external_id: str, data: dict, client_key: str = "") -> tuple[dict, int]:
    """A validated response text (ResponseTextSerializer): enqueue implicit-use detection on commit."""
    session, skipped = session_or_status(graph, external_id)
    if skipped:
        return _no_op(skipped)
    key = _key(client_key, "response", session)
    task_id = _enqueue(
        tasks.apply_response_task,
        graph_id=graph.pk,
        external_id=external_id,
        response=data["response"],
        idempotency_key=key,
        user_id=user.pk,
    )
    return _queued(task_id, key)


def report_outcome(user, graph, external_id: str, data: dict, client_key: str = "") -> tuple[dict, int]:
    """A validated outcome (OutcomeSerializer): duplicate (200), a no-op status, or the EMA enqueued on commit."""
    outcome = data["outcome"]
    session, skipped = session_or_status(graph, external_id)
    if skipped:
        return _no_op(skipped)
    context = {"graph": session.graph_id, "session": external_id, "outcome": outcome}
    if session.outcome == outcome:
        previous = UpdateBatch.objects.filter(trigger_session=session, kind="outcome").order_by("-id").first()
        if previous is not None:
            return {"status": "duplicate", "batch": previous.pk}, status.HTTP_200_OK
    # A selected candidate implies an injection: one query in the usual case.
    if not InjectionCandidate.objects.filter(
        graph_id=session.graph_id, injection__session=session, selected=True
    ).exists():
        if not session.injections.exists():
            return _no_op(actions.fall_through("no_injection", "the session has no context injection", **context))
        return _no_op(actions.fall_through("nothing_surfaced", "the session's injections surfaced nothing", **context))
    key = _key(client_key, "outcome", session)
    task_id = _enqueue(
        tasks.apply_outcome_task,
        graph_id=session.graph_id,
        external_id=external_id,
        outcome=outcome,
        alpha=data.get("alpha"),
        idempotency_key=key,
        user_id=user.pk,
    )
    return _queued(task_id, key)


class SessionReportView(GraphScopedMixin, APIView):
    """Base of the three session reports: graph through tenancy, analyst role; the work is in report_*()."""

    write_role = "analyst"
    serializer_class = None
    report = None

    def post(self, request, graph_pk: int, external_id: str):
        serializer = self.serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        body, code = type(self).report(
            request.user,
            self.graph(),
            external_id,
            serializer.validated_data,
            request.headers.get("Idempotency-Key", ""),
        )
        return Response(body, status=code)


class UsesView(SessionReportView):
    """Report the items a session used (explicit), or flagged wrong (negative): reinforcement on the worker."""

    serializer_class = UsesSerializer
    report = staticmethod(report_uses)

    @extend_schema(
        parameters=[GRAPH_ID, EXTERNAL_ID, IDEMPOTENCY], request=UsesSerializer, responses={202: AcceptedSerializer}
    )
    def post(self, request, graph_pk: int, external_id: str):
        return super().post(request, graph_pk, external_id)


class ResponseView(SessionReportView):
    """Send the agent's response text: implicit uses are detected (distinctive n-gram overlap) on the worker."""

    serializer_class = ResponseTextSerializer
    report = staticmethod(report_response)

    @extend_schema(
        parameters=[GRAPH_ID, EXTERNAL_ID, IDEMPOTENCY],
        request=ResponseTextSerializer,
        responses={202: AcceptedSerializer},
    )
    def post(self, request, graph_pk: int, external_id: str):
        return super().post(request, graph_pk, external_id)


class OutcomeView(SessionReportView):
    """Report how a session ended: outcome EMA on every surfaced node and edge, on the worker."""

    serializer_class = OutcomeSerializer
    report = staticmethod(report_outcome)

    @extend_schema(
        parameters=[GRAPH_ID, EXTERNAL_ID, IDEMPOTENCY],
        request=OutcomeSerializer,
        responses={202: AcceptedSerializer, 200: AcceptedSerializer},
    )
    def post(self, request, graph_pk: int, external_id: str):
        return super().post(request, graph_pk, external_id)


class GraphOperationView(GraphScopedMixin, APIView):
    write_role = "operator"


class DecayView(GraphOperationView):
    """Run the graph's decay for the current period now, on the worker (operators)."""

    @extend_schema(parameters=[GRAPH_ID], request=None, responses={202: AcceptedSerializer})
    def post(self, request, graph_pk: int):
        task_id = _enqueue(tasks.decay_graph_task, graph_id=self.graph().pk, user_id=request.user.pk)
        return Response({"status": "queued", "task_id": task_id}, status=status.HTTP_202_ACCEPTED)


class NormalizeView(GraphOperationView):
    """Rescale the graph's edge weights so the largest is 1.0, on the worker (operators)."""

    @extend_schema(parameters=[GRAPH_ID], request=None, responses={202: AcceptedSerializer})
    def post(self, request, graph_pk: int):
        # The run's key: a redelivered task skips the chunks its first run applied.
        task_id = _enqueue(
            tasks.normalize_graph_task,
            graph_id=self.graph().pk,
            user_id=request.user.pk,
            idempotency_key=f"api-{uuid.uuid4().hex}",
        )
        return Response({"status": "queued", "task_id": task_id}, status=status.HTTP_202_ACCEPTED)


class ManualWeightsView(GraphOperationView):
    """Set weights by hand (operators): one ``manual`` batch, synchronous."""

    @extend_schema(parameters=[GRAPH_ID], request=ManualSetSerializer, responses={200: ResultSerializer})
    def post(self, request, graph_pk: int):
        serializer = ManualSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = [
            actions.ManualValue("node" if "node" in v else "edge", v.get("node", v.get("edge")), v["field"], v["value"])
            for v in serializer.validated_data["values"]
        ]
        try:
            result = actions.do_set_weights(
                self.graph(), values, actor=request.user, reason=serializer.validated_data["reason"]
            )
        except actions.FeedbackError as exc:
            raise ValidationError({exc.field: [exc.message]}) from exc
        return Response(result.as_dict())


class MetricsView(GraphScopedMixin, generics.ListAPIView):
    """A graph's daily metrics rollup between ``from`` and ``to`` (UTC dates, inclusive; default: last 30 days)."""

    serializer_class = DailyMetricSerializer
    pagination_class = None

    def get_queryset(self):
        params = self.request.query_params
        try:
            start, end = metrics.day_range(params.get("from"), params.get("to"))
        except metrics.RangeError as exc:
            raise ValidationError({exc.field: [str(exc)]}) from exc
        return DailyMetric.objects.filter(graph=self.graph(), day__gte=start, day__lte=end).order_by("day")

    @extend_schema(
        parameters=[
            GRAPH_ID,
            OpenApiParameter("from", date, description="First day (inclusive)."),
            OpenApiParameter("to", date, description="Last day (inclusive), default today."),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class BatchScopedMixin:
    """Batches of the caller's organizations; another organization's batch is a 404."""

    permission_classes = [IsAuthenticated, RoleForWrites]
    write_role = "operator"

    def batch(self) -> UpdateBatch:
        if not hasattr(self, "_batch"):
            self._batch = get_object_or_404(
                UpdateBatch.objects.for_user(self.request.user).select_related("graph"), pk=self.kwargs["pk"]
            )
        return self._batch

    def organization_id(self):
        return self.batch().graph.organization_id


class BatchListView(generics.ListAPIView):
    """Update batches of the caller's organizations, newest first; filter by graph, kind, status, session."""

    serializer_class = UpdateBatchSerializer

    def get_queryset(self):
        qs = (
            UpdateBatch.objects.for_user(self.request.user)
            .select_related("trigger_session", "trigger_user", "rolled_back_by")
            .order_by("-id")
        )
        params = self.request.query_params
        for name in ("graph", "kind", "status"):
            if params.get(name):
                value = params[name]
                if name == "graph" and not value.isdigit():
                    raise ValidationError({"graph": ["Expected a graph id."]})
                qs = qs.filter(**{name: value})
        if params.get("session"):
            qs = qs.filter(trigger_session__external_id=params["session"])
        return qs

    @extend_schema(
        parameters=[
            OpenApiParameter("graph", int, description="Graph id."),
            OpenApiParameter(
                "kind", str, description="reinforce, outcome, decay, normalize, manual, import, rollback."
            ),
            OpenApiParameter("status", str, description="applied or rolled_back."),
            OpenApiParameter("session", str, description="The triggering session's external id."),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class BatchDetailView(BatchScopedMixin, generics.RetrieveAPIView):
    """One batch with its first changes (all of them at .../changes/)."""

    serializer_class = UpdateBatchDetailSerializer

    def get_object(self):
        return self.batch()

    @extend_schema(parameters=[BATCH_ID])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class BatchChangesView(BatchScopedMixin, generics.ListAPIView):
    """Every WeightChange of one batch, in order, paginated."""

    serializer_class = WeightChangeSerializer

    def get_queryset(self):
        return WeightHistory.objects.filter(batch=self.batch()).in_order()

    @extend_schema(parameters=[BATCH_ID])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class BatchRollbackView(BatchScopedMixin, APIView):
    """Roll a batch back (operators): restores before values; rows changed since are conflicts unless force."""

    @extend_schema(
        parameters=[BATCH_ID], request=RollbackSerializer, responses={200: ResultSerializer, 409: AcceptedSerializer}
    )
    def post(self, request, pk: int):
        serializer = RollbackSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            result = actions.do_rollback_batch(
                self.batch(), actor=request.user, force=serializer.validated_data["force"]
            )
        except actions.RollbackRefused as exc:
            return Response({"status": "already_rolled_back", "reason": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(result.as_dict())


# ---------------------------------------------------------------------------------------------
# Vault import


class VaultUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        help_text=f"The vault as a zip archive (at most {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB)."
    )
    dry_run = serializers.BooleanField(default=False, help_text="Report what would change; write nothing.")
    create_missing = serializers.BooleanField(default=False, help_text="Create placeholder nodes for unresolved links.")

    def validate_file(self, value):
        if value.size > MAX_ARCHIVE_BYTES:
            raise serializers.ValidationError(f"The archive is larger than {MAX_ARCHIVE_BYTES // (1024 * 1024)} MiB.")
        return value


class UnresolvedLinkSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="Key of the linking note.")
    target = serializers.CharField(help_text="The link as written.")
    edge_type = serializers.CharField()
    reason = serializers.CharField(help_text="no such note, ambiguous or attachment missing.")
    candidates = serializers.ListField(
        child=serializers.CharField(), help_text="For ambiguous: the notes tied for the link."
    )


class UnresolvedGroupSerializer(serializers.Serializer):
    reason = serializers.CharField()
    count = serializers.IntegerField()
    links = UnresolvedLinkSerializer(many=True)


class ImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    batch = serializers.IntegerField(allow_null=True)
    audit_seq = serializers.IntegerField(allow_null=True)
    embedding = serializers.CharField(help_text="sync, task (Celery queue 'embeddings') or none (dry run).")
    duration_ms = serializers.FloatField()
    counts = serializers.DictField(child=serializers.IntegerField())
    unresolved = UnresolvedLinkSerializer(many=True)
    unresolved_by_reason = UnresolvedGroupSerializer(
        many=True, help_text="The same links grouped by reason: no such note, ambiguous, attachment missing."
    )
    warnings = serializers.ListField(child=serializers.CharField())


class VaultImportView(GraphScopedMixin, generics.GenericAPIView):
    """POST /api/graphs/{graph_pk}/import/: import a zipped Obsidian vault into this graph (operators and admins).

    Thin: it checks the role, hands the upload to the parser and the import action, and answers with
    the counts: one batch, one audit event. A refused archive (zip-slip, symlink, oversize, no notes)
    is a 400 and writes nothing.
    """

    serializer_class = VaultUploadSerializer
    parser_classes = [MultiPartParser]

    @extend_schema(
        parameters=[GRAPH_ID],
        request={"multipart/form-data": VaultUploadSerializer},
        responses={200: ImportResultSerializer, 201: ImportResultSerializer},
    )
    def post(self, request, graph_pk=None):
        upload = self.get_serializer(data=request.data)
        upload.is_valid(raise_exception=True)
        data = upload.validated_data
        try:
            parsed = parse_vault(data["file"], create_missing=data["create_missing"])
        except VaultError as exc:
            raise ValidationError({"file": [str(exc)]}) from exc
        result = do_import_vault(self.graph(), parsed, actor=request.user, dry_run=data["dry_run"])
        code = status.HTTP_200_OK if result.dry_run else status.HTTP_201_CREATED
        return Response(ImportResultSerializer(result.as_dict()).data, status=code)
