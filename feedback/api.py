"""REST views of the feedback engine: thin. Parse, check the role, call the action or enqueue its task.

Sessions are addressed by graph and external id: ``/api/graphs/{graph_pk}/sessions/{external_id}/...``
(agents know their own session ids, not ours). Roles (DESIGN.md, ``graphadmin.tenancy``): reporting
feedback (uses, response, outcome) is the act ``report``: an ``agent`` (a service account) on the
sessions it created, an operator or admin on any session; reviewers and analysts change nothing
(403), and a report on another user's session is a 403 too. Decay, normalize, manual weights and
rollback need ``operator``. Reviewers and up read batches and metrics; an agent reads only the
batches its own sessions caused. Another organization's graph or batch is a 404.

Reports answer 202 and run on the Celery worker: each is stored in the outbox in the request's
transaction (ATOMIC_REQUESTS; ``feedback.outbox``) and the graph's drain is poked with
``transaction.on_commit``. Input is validated first, so a bad item is a 400 naming it and nothing is
stored. A report the action would ignore (unknown session, no injection,
nothing surfaced, feedback disabled) answers 202 with that status and is logged, not stored; an
outcome equal to the session's current one answers 200 with status ``duplicate`` and its batch.;
any other report after the outcome is a 409; a use of something the session was not given is a 400
naming the item (``feedback.reports``).
An ``Idempotency-Key`` header makes a client's retry of the same report apply once.
"""

from __future__ import annotations

import uuid
from datetime import date, timedelta

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status, viewsets
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from graphadmin import clock, readiness
from graphadmin.api.permissions import ActAllowed
from graphadmin.api.views import GRAPH_ID, GraphScopedMixin
from graphadmin.params import optional, parse_bool, parse_id, parse_int
from graphadmin.tenancy import NEEDS, graph_access
from graphadmin.vault.parse import MAX_ARCHIVE_BYTES, parse_vault

from . import actions, health, memory, metrics, reports, tasks
from .imports import do_import_vault, do_queue_import, runs_in_background
from .models import DailyMetric, UpdateBatch, VaultImport, WeightHistory
from .serializers import (
    AcceptedSerializer,
    DailyMetricSerializer,
    ForgetSerializer,
    HealthSerializer,
    LinkSerializer,
    ManualSetSerializer,
    MemoryAnswerSerializer,
    OutcomeSerializer,
    RememberSerializer,
    ResponseTextSerializer,
    ResultSerializer,
    RollbackPreviewSerializer,
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


# Authenticated first (an anonymous caller gets 401/403, not a tenancy 404), then the act's role
# (graphadmin.tenancy). Domain errors are mapped once, by graphadmin.api.errors.


class SessionReportView(GraphScopedMixin, APIView):
    """Base of the three session reports: graph through tenancy, the ``report`` act. Each report's ``post``
    validates its body and hands it to its intake in ``feedback.reports`` (the session's own checks: owner,
    open, surfaced), then answers with ``accepted``."""

    write_act = "report"


def validated(serializer_class, request) -> dict:
    """The request's body through the report's serializer (a 400 naming the field otherwise)."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def idempotency_key(request) -> str:
    """The client's ``Idempotency-Key`` header ("" without one)."""
    return request.headers.get("Idempotency-Key", "")


def accepted(body: dict) -> Response:
    """A report's answer: 200 for a ``duplicate`` (the same outcome again), 202 for the rest."""
    code = status.HTTP_200_OK if body["status"] == "duplicate" else status.HTTP_202_ACCEPTED
    return Response(body, status=code)


class UsesView(SessionReportView):
    """Report the items a session used (explicit), or flagged wrong (negative): reinforcement on the worker."""

    @extend_schema(
        parameters=[GRAPH_ID, EXTERNAL_ID, IDEMPOTENCY], request=UsesSerializer, responses={202: AcceptedSerializer}
    )
    def post(self, request, graph_pk: int, external_id: str):
        data = validated(UsesSerializer, request)
        return accepted(reports.report_uses(request.user, self.graph(), external_id, data, idempotency_key(request)))


class ResponseView(SessionReportView):
    """Send the agent's response text: implicit uses are detected (distinctive n-gram overlap) on the worker."""

    @extend_schema(
        parameters=[GRAPH_ID, EXTERNAL_ID, IDEMPOTENCY],
        request=ResponseTextSerializer,
        responses={202: AcceptedSerializer},
    )
    def post(self, request, graph_pk: int, external_id: str):
        data = validated(ResponseTextSerializer, request)
        body = reports.report_response(request.user, self.graph(), external_id, data, idempotency_key(request))
        return accepted(body)


class OutcomeView(SessionReportView):
    """Report how a session ended: outcome EMA on every surfaced node and edge, on the worker."""

    @extend_schema(
        parameters=[GRAPH_ID, EXTERNAL_ID, IDEMPOTENCY],
        request=OutcomeSerializer,
        responses={202: AcceptedSerializer, 200: AcceptedSerializer},
    )
    def post(self, request, graph_pk: int, external_id: str):
        data = validated(OutcomeSerializer, request)
        body = reports.report_outcome(request.user, self.graph(), external_id, data, idempotency_key(request))
        return accepted(body)


class GraphOperationView(GraphScopedMixin, APIView):
    write_act = "operate"


class DecayView(GraphOperationView):
    """Run the graph's decay for the current period now, on the worker (operators)."""

    @extend_schema(parameters=[GRAPH_ID], request=None, responses={202: AcceptedSerializer})
    def post(self, request, graph_pk: int):
        task_id = reports.enqueue(tasks.decay_graph_task, graph_id=self.graph().pk, user_id=request.user.pk)
        return Response({"status": "queued", "task_id": task_id}, status=status.HTTP_202_ACCEPTED)


class NormalizeView(GraphOperationView):
    """Rescale the graph's edge weights so the largest is 1.0, on the worker (operators)."""

    @extend_schema(parameters=[GRAPH_ID], request=None, responses={202: AcceptedSerializer})
    def post(self, request, graph_pk: int):
        # The run's key: a redelivered task skips the chunks its first run applied.
        task_id = reports.enqueue(
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
        result = actions.do_set_weights(
            self.graph(), values, actor=request.user, reason=serializer.validated_data["reason"]
        )
        return Response(result.as_dict())


class MetricsView(GraphScopedMixin, generics.ListAPIView):
    """A graph's daily metrics rollup between ``from`` and ``to`` (UTC dates, inclusive; default: last 30 days)."""

    serializer_class = DailyMetricSerializer
    pagination_class = None

    def get_queryset(self):
        params = self.request.query_params
        start, end = metrics.day_range(params.get("from"), params.get("to"))
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


class HealthView(GraphScopedMixin, APIView):
    """Learning health over the graph's last ``n`` injections (feedback.health): every role that reads the graph."""

    @extend_schema(
        parameters=[
            GRAPH_ID,
            OpenApiParameter(
                "n",
                int,
                description=f"Last N injections (default {health.DEFAULT_INJECTIONS}, at most "
                f"{health.MAX_INJECTIONS}).",
            ),
        ],
        responses=HealthSerializer,
    )
    def get(self, request, graph_pk: int):
        n = optional(request.query_params, "n", parse_int, low=1, high=health.MAX_INJECTIONS)
        return Response(health.graph_health(self.graph(), n=n or health.DEFAULT_INJECTIONS))


class BatchScopedMixin:
    """Batches of the caller's organizations; another organization's batch is a 404."""

    permission_classes = [IsAuthenticated, ActAllowed]
    write_act = "operate"

    def batch(self) -> UpdateBatch:
        if not hasattr(self, "_batch"):
            self._batch = get_object_or_404(
                UpdateBatch.objects.for_user(
                    self.request.user, NEEDS["read"], or_own="trigger_session__owner"
                ).select_related("graph"),
                pk=self.kwargs["pk"],
            )
        return self._batch

    def check_access(self, act: str) -> None:
        # The batch through the caller's tenancy first (another organization's is a 404), then the act.
        if act != "read":
            graph_access(self.request.user, self.batch().graph_id, act)


class BatchListView(generics.ListAPIView):
    """Update batches of the caller's organizations, newest first; filter by graph, kind, status, session."""

    serializer_class = UpdateBatchSerializer

    def get_queryset(self):
        qs = (
            UpdateBatch.objects.for_user(self.request.user, NEEDS["read"], or_own="trigger_session__owner")
            .select_related("trigger_session", "trigger_user", "rolled_back_by")
            .order_by("-id")
        )
        params = self.request.query_params
        graph = optional(params, "graph", parse_id)  # '²' or 'abc': a 400 naming graph
        if graph is not None:
            qs = qs.filter(graph=graph)
        for name in ("kind", "status"):
            if params.get(name):
                qs = qs.filter(**{name: params[name]})
        if params.get("session"):
            qs = qs.filter(trigger_session__external_id=params["session"])
        return qs

    @extend_schema(
        parameters=[
            OpenApiParameter("graph", int, description="Graph id."),
            OpenApiParameter(
                "kind", str, description="reinforce, outcome, decay, normalize, manual, import, rollback."
            ),
            OpenApiParameter("status", str, description="applied, rolled_back or partially_rolled_back."),
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
        result = actions.do_rollback_batch(self.batch(), actor=request.user, force=serializer.validated_data["force"])
        return Response(result.as_dict())


class BatchRollbackPreviewView(BatchScopedMixin, APIView):
    """What rolling the batch back would restore and which rows would conflict, now; with ``?finish=1``, what
    finishing its partial rollback would force. Writes nothing; readable by every role that reads the batch."""

    @extend_schema(
        parameters=[
            BATCH_ID,
            OpenApiParameter("finish", bool, description="Preview finishing a partial rollback (forcing the rest)."),
        ],
        responses=RollbackPreviewSerializer,
    )
    def get(self, request, pk: int):
        finish = optional(request.query_params, "finish", parse_bool) or False
        return Response(actions.preview_rollback(self.batch(), finish=finish).as_dict())


class BatchFinishRollbackView(BatchScopedMixin, APIView):
    """Finish a partial rollback (operators): force the rows its rollback left alone, as a new rollback batch
    audited as a forced finish. The batch or its rollback may be named. A 409 when nothing is partial."""

    @extend_schema(parameters=[BATCH_ID], request=None, responses={200: ResultSerializer, 409: AcceptedSerializer})
    def post(self, request, pk: int):
        result = actions.do_finish_rollback(self.batch(), actor=request.user)
        return Response(result.as_dict())


# ---------------------------------------------------------------------------------------------
# Agent-written memory (feedback.memory)


class MemoryView(GraphScopedMixin, APIView):
    """Base of remember, link and forget: the ``remember`` act (an agent in its organization, operators
    and up), the per-user rate limit, one ``memory`` batch per call that wrote anything."""

    write_act = "remember"
    serializer_class = None
    do = None  # the feedback.memory action (not ``action``: DRF's name for a viewset's action)

    def post(self, request, graph_pk: int):
        memory.check_rate(request.user)
        serializer = self.serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if "links" in data:
            data["links"] = [dict(link) for link in data["links"]]
        session = data.pop("session", None)
        graph = self.graph()
        body = type(self).do(graph, data, actor=request.user, role=self._access.role, session_id=session)
        created = body["status"] == "created"
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


class RememberView(MemoryView):
    """Remember a note (create, update by key, or find its near-duplicate); wikilinks and links become edges."""

    serializer_class = RememberSerializer
    do = staticmethod(memory.do_remember)

    @extend_schema(
        parameters=[GRAPH_ID],
        request=RememberSerializer,
        responses={201: MemoryAnswerSerializer, 200: MemoryAnswerSerializer},
    )
    def post(self, request, graph_pk: int):
        return super().post(request, graph_pk)


class LinkView(MemoryView):
    """Link two existing notes with an existing edge type (an agent: from a note it wrote)."""

    serializer_class = LinkSerializer
    do = staticmethod(memory.do_link)

    @extend_schema(
        parameters=[GRAPH_ID],
        request=LinkSerializer,
        responses={201: MemoryAnswerSerializer, 200: MemoryAnswerSerializer},
    )
    def post(self, request, graph_pk: int):
        return super().post(request, graph_pk)


class ForgetView(MemoryView):
    """Archive notes and edges (an agent: those it wrote); nothing is deleted, a rollback restores them."""

    serializer_class = ForgetSerializer
    do = staticmethod(memory.do_forget)

    @extend_schema(parameters=[GRAPH_ID], request=ForgetSerializer, responses={200: MemoryAnswerSerializer})
    def post(self, request, graph_pk: int):
        return super().post(request, graph_pk)


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
    vectors_pending = serializers.IntegerField(
        required=False,
        help_text="The graph's vectors still to write once the import committed (embedding 'task': the Celery task "
        "writes them; the graph's own vectors_pending says when it is 0).",
    )


class VaultImportSerializer(serializers.ModelSerializer):
    """A background import's progress record; ``state`` is ``failed`` once a run outlived its time limit."""

    state = serializers.SerializerMethodField(help_text="queued, parsing, importing, succeeded or failed.")
    error = serializers.SerializerMethodField()

    class Meta:
        model = VaultImport
        fields = [
            "id",
            "graph",
            "state",
            "dry_run",
            "create_missing",
            "filename",
            "size",
            "done",
            "total",
            "counts",
            "result",
            "error",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def _overdue(self, obj) -> bool:
        # A worker killed at the hard limit cannot record it: past the limit, a run still "in progress" failed.
        limit = settings.VAULT_IMPORT_TIME_LIMIT + 60
        return (
            obj.state in ("parsing", "importing")
            and obj.started_at
            and clock.now() - obj.started_at > timedelta(seconds=limit)
        )

    def get_state(self, obj) -> str:
        return "failed" if self._overdue(obj) else obj.state

    def get_error(self, obj) -> str:
        return f"Ran past the time limit of {settings.VAULT_IMPORT_TIME_LIMIT} s." if self._overdue(obj) else obj.error


class VaultImportView(GraphScopedMixin, generics.GenericAPIView):
    """POST /api/graphs/{graph_pk}/import/: import a zipped Obsidian vault into this graph (operators and admins).

    Thin: it checks the role, hands the upload to the parser and the import action, and answers with
    the counts: one batch, one audit event. A refused archive (zip-slip, symlink, oversize, no notes)
    is a 400 and writes nothing. An upload that is large (VAULT_IMPORT_ASYNC_BYTES), unpacks large
    (VAULT_IMPORT_ASYNC_UNPACKED_BYTES) or holds many notes (VAULT_IMPORT_ASYNC_NOTES) is imported by a
    Celery task instead: a 202 with its progress record (``.../imports/{id}/``).
    """

    serializer_class = VaultUploadSerializer
    parser_classes = [MultiPartParser]

    @extend_schema(
        parameters=[GRAPH_ID],
        request={"multipart/form-data": VaultUploadSerializer},
        responses={200: ImportResultSerializer, 201: ImportResultSerializer, 202: VaultImportSerializer},
    )
    def post(self, request, graph_pk=None):
        upload = self.get_serializer(data=request.data)
        upload.is_valid(raise_exception=True)
        data = upload.validated_data
        if runs_in_background(data["file"]):
            record = do_queue_import(
                self.graph(),
                data["file"],
                actor=request.user,
                dry_run=data["dry_run"],
                create_missing=data["create_missing"],
            )
            return Response(VaultImportSerializer(record).data, status=status.HTTP_202_ACCEPTED)
        parsed = parse_vault(data["file"], create_missing=data["create_missing"])  # VaultError: a 400 on file
        result = do_import_vault(self.graph(), parsed, actor=request.user, dry_run=data["dry_run"])
        code = status.HTTP_200_OK if result.dry_run else status.HTTP_201_CREATED
        body = {**result.as_dict(), "vectors_pending": readiness.vectors_pending(self.graph().pk)}
        return Response(ImportResultSerializer(body).data, status=code)


class VaultImportStatusViewSet(GraphScopedMixin, viewsets.ReadOnlyModelViewSet):
    """Background vault imports of a graph, newest first, with their progress (every member reads)."""

    serializer_class = VaultImportSerializer
    lookup_value_converter = "int"

    def get_queryset(self):
        return VaultImport.objects.filter(graph=self.graph()).defer("archive").order_by("-created_at", "-id")

    @extend_schema(parameters=[GRAPH_ID])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(parameters=[GRAPH_ID, OpenApiParameter("id", int, OpenApiParameter.PATH)])
    def retrieve(self, request, *args, **kwargs):
        return super().retrieve(request, *args, **kwargs)
