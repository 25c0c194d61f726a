"""Sessions, context injections and their candidates, use events, update batches and weight changes.

The weight history is append-only (enforced by database triggers) and stored in one of two shapes:
WeightChange, one row per change (scattered, small batches: uses, outcomes, manual sets), and
WeightChangeBlock, one row per chunk holding arrays (bulk batches over id ranges: decay, normalize
and their rollbacks). Charts, audits and rollbacks read both through one view, WeightHistory, one
row per change. Every table carries ``graph_id`` itself.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.urls import reverse
from pgvector.django import HnswIndex, VectorField

from graphadmin import clock
from graphadmin.models import Edge, Graph, Node, PolicyRevision
from graphadmin.models.tenancy import TenantQuerySet

OUTCOMES = ("accepted", "rework", "rejected")
SIGNALS = ("explicit", "implicit", "negative")
BATCH_KINDS = ("reinforce", "outcome", "decay", "normalize", "manual", "import", "link", "memory", "rollback")
# partially_rolled_back: its rollback left some of its changes alone (conflicts: changed again since), so
# part of the batch still stands; like rolled_back, it cannot be rolled back a second time.
BATCH_STATUSES = ("applied", "rolled_back", "partially_rolled_back")
ROLLED_BACK = ("rolled_back", "partially_rolled_back")
STATUS_LABELS = [(s, s.replace("_", " ")) for s in BATCH_STATUSES]


class AgentSession(models.Model):
    """One agent session: the unit that retrieves context, reports uses and ends with an outcome.

    ``owner`` is the user whose first context call created it: only the owner (or an operator) adds
    context to it or reports on it (``graphadmin.tenancy.may_act_on_session``). Null for sessions
    older than owners, and for sessions written without a caller (tests, the bench).
    """

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="sessions")
    external_id = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="agent_sessions",
        help_text="The user whose first context call created the session.",
    )
    started_at = models.DateTimeField(default=clock.now, editable=False)
    outcome = models.CharField(max_length=20, null=True, blank=True, choices=[(o, o) for o in OUTCOMES])
    outcome_at = models.DateTimeField(null=True, blank=True)
    vectors_pending = models.IntegerField(
        default=0,
        db_default=0,
        help_text="The most vectors the graph's embeddings task still had to write when a question of this session "
        "was answered (0: no answer came from a graph being built). Reports on a session above 0 teach nothing.",
    )

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["graph", "external_id"], name="session_external_id_per_graph"),
            models.CheckConstraint(
                condition=Q(outcome__isnull=True) | Q(outcome__in=OUTCOMES), name="session_outcome_valid"
            ),
        ]

    def __str__(self):
        return self.external_id


class ContextInjection(models.Model):
    """What one retrieval surfaced to a session: the frozen candidate set explanations replay."""

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="injections")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="injections")
    policy_revision = models.ForeignKey(PolicyRevision, on_delete=models.PROTECT, related_name="injections")
    query = models.TextField(blank=True)
    mode = models.CharField(
        max_length=20, default="retrieve", help_text="retrieve (the pipeline); traversal or hybrid (older logs)"
    )
    budget_unit = models.CharField(max_length=10, default="items", help_text="items or tokens")
    budget = models.PositiveIntegerField(default=0)
    spent = models.PositiveIntegerField(default=0)
    params = models.JSONField(
        default=dict, blank=True, help_text="The request as received: start nodes, k, hops, anchors."
    )
    # The query's embedding: past retrievals nearest to a new query are its "similar questions"
    # (the exploration bonus counts what they surfaced).
    query_embedding = VectorField(dimensions=settings.EMBEDDING_DIM, null=True, blank=True)
    # The model that embedded the query ("" for a vector the caller sent): only queries of one model are compared.
    query_model = models.CharField(max_length=200, blank=True, default="", db_default="")
    created_at = models.DateTimeField(default=clock.now, editable=False, db_index=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["graph", "-created_at"], name="injection_graph_recent"),
            HnswIndex(
                name="injection_query_hnsw",
                fields=["query_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self):
        return f"injection {self.pk} ({self.session})"

    def get_absolute_url(self):
        """Its dashboard page (the admin's "View on site")."""
        return reverse("injection", args=[self.graph_id, self.pk])


class InjectionCandidate(models.Model):
    """One candidate considered by an injection: its raw features, components, total and rank.

    ``features`` holds the raw inputs (weight, feedback_weight, similarity, priority, hops, ...) so a
    what-if replay can rescore it under a draft policy; ``components`` holds each component's raw
    value, coefficient and contribution as computed at the time.
    """

    # No foreign keys in the database (migration 0019): a row's parents are the rows its context call wrote
    # or read in the same transaction, and a deferred trigger on each parent table refuses a delete that
    # would leave log rows naming it. The ORM's CASCADE and PROTECT rules are as before.
    injection = models.ForeignKey(
        ContextInjection, on_delete=models.CASCADE, related_name="candidates", db_constraint=False
    )
    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    rank = models.PositiveIntegerField()
    selected = models.BooleanField()
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="+", db_constraint=False)
    edge = models.ForeignKey(
        Edge, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_constraint=False
    )
    hops = models.PositiveSmallIntegerField(default=1)
    tokens = models.PositiveIntegerField(default=0)
    total = models.FloatField()
    features = models.JSONField(default=dict)
    components = models.JSONField(default=dict)
    # The table is partitioned by month of created_at (migration 0016): retention drops whole months
    # (feedback.retention, CANDIDATE_LOG_RETENTION_DAYS). Its primary key is (id, created_at) in the database.
    created_at = models.DateTimeField(
        default=clock.now,
        db_default=Now(),
        editable=False,
        help_text="Its injection's time: the candidate log is partitioned by month of it.",
    )

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["injection", "rank", "created_at"], name="candidate_rank_per_injection")
        ]
        indexes = [models.Index(fields=["graph", "node"], name="candidate_graph_node")]
        ordering = ["injection", "rank"]


class UseEvent(models.Model):
    """A surfaced node or edge that was used (explicit or implicit) or flagged wrong (negative)."""

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="use_events")
    injection = models.ForeignKey(
        ContextInjection, on_delete=models.SET_NULL, null=True, blank=True, related_name="use_events"
    )
    node = models.ForeignKey(Node, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    edge = models.ForeignKey(Edge, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    signal = models.CharField(max_length=20, choices=[(s, s) for s in SIGNALS])
    source = models.CharField(max_length=50, default="api", help_text="api, response, mcp, dashboard")
    created_at = models.DateTimeField(default=clock.now, editable=False)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(signal__in=SIGNALS), name="use_signal_valid"),
            models.CheckConstraint(
                condition=(Q(node__isnull=False) & Q(edge__isnull=True))
                | (Q(node__isnull=True) & Q(edge__isnull=False)),
                name="use_one_target",
            ),
        ]


class UpdateBatch(models.Model):
    """One set of weight changes with one cause; the unit of audit and rollback."""

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="batches")
    kind = models.CharField(max_length=20, choices=[(k, k) for k in BATCH_KINDS])
    status = models.CharField(max_length=30, default="applied", choices=STATUS_LABELS)
    trigger_session = models.ForeignKey(
        AgentSession, on_delete=models.SET_NULL, null=True, blank=True, related_name="batches"
    )
    trigger_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    trigger_task = models.CharField(max_length=200, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    node_updates = models.PositiveIntegerField(default=0)
    edge_updates = models.PositiveIntegerField(default=0)
    conflicts = models.PositiveIntegerField(default=0)
    details = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.FloatField(default=0.0)
    rollback_of = models.OneToOneField(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="rolled_back_by"
    )
    correction_of = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="corrections",
        help_text="For an outcome batch: the earlier outcome batch of the same session it corrects.",
    )

    objects = TenantQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "update batches"
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=BATCH_KINDS), name="batch_kind_valid"),
            models.CheckConstraint(condition=Q(status__in=BATCH_STATUSES), name="batch_status_valid"),
        ]
        indexes = [models.Index(fields=["graph", "-started_at"], name="batch_graph_recent")]

    def __str__(self):
        return f"batch {self.pk} ({self.kind}, {self.status})"

    @property
    def restored_nothing(self) -> bool:
        """A finished rollback that changed no value and no row (every row a conflict, or already as wanted)."""
        return self.kind == "rollback" and self.finished_at is not None and not (self.node_updates or self.edge_updates)

    def status_text(self) -> str:
        """The status as people read it: an applied rollback that restored nothing says "nothing restored"."""
        if self.status == "applied" and self.restored_nothing:
            return "nothing restored"
        return self.get_status_display()

    def get_absolute_url(self):
        """Its dashboard page (the admin's "View on site")."""
        return reverse("batch", args=[self.graph_id, self.pk])


class WeightChange(models.Model):
    """One change of one weight: append-only history read by charts, audits and rollbacks.

    Append-only is enforced by a trigger; expiry is by whole monthly partitions (feedback.retention).
    """

    FIELDS = ("weight", "feedback_weight")

    # No single-column FK indexes: the composite indexes below serve every read, and each extra
    # index is paid on every history row written (a decay writes one per edge).
    batch = models.ForeignKey(UpdateBatch, on_delete=models.PROTECT, related_name="changes", db_index=False)
    graph = models.ForeignKey(Graph, on_delete=models.PROTECT, related_name="+", db_index=False)
    node = models.ForeignKey(Node, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False)
    edge = models.ForeignKey(Edge, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False)
    field = models.CharField(max_length=20, choices=[(f, f) for f in FIELDS])
    before = models.FloatField()
    after = models.FloatField()
    event = models.CharField(
        max_length=50, blank=True, help_text="What caused it: explicit, implicit, negative, accepted, decay, ..."
    )
    use_event = models.ForeignKey(
        UseEvent, on_delete=models.PROTECT, null=True, blank=True, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        # The table is partitioned by month of created_at (migration 0006): retention drops whole
        # partitions (feedback.retention), never rows. Its primary key is (id, created_at) in the
        # database; id alone is unique (one sequence), which is what Django relies on.
        constraints = [
            models.CheckConstraint(
                condition=(Q(node__isnull=False) & Q(edge__isnull=True))
                | (Q(node__isnull=True) & Q(edge__isnull=False)),
                name="weightchange_one_target",
            ),
            models.CheckConstraint(
                condition=Q(field__in=("weight", "feedback_weight")), name="weightchange_field_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["batch"], name="weightchange_batch"),
            # Partial: a change has one target, so each row enters one of the two history indexes only.
            models.Index(
                fields=["graph", "edge", "created_at"],
                name="weightchange_edge_history",
                condition=Q(edge__isnull=False),
            ),
            models.Index(
                fields=["graph", "node", "created_at"],
                name="weightchange_node_history",
                condition=Q(node__isnull=False),
            ),
            models.Index(fields=["graph", "created_at"], name="weightchange_graph_time"),
        ]


HISTORY_TARGETS = ("edge", "node")


class WeightChangeBlock(models.Model):
    """The changes of one field of many nodes or edges by one batch, as three aligned arrays.

    Written by the bulk actions (decay, normalize, and the rollback of a block batch): one row per
    chunk and event instead of one row per change, so a decay of a million edges writes about 100
    rows, some 25 bytes per edge. ``before[i]`` and ``after[i]`` belong to ``ids[i]`` (a decay or
    normalize chunk's ids are in ascending order); ``id_min``/``id_max`` bound ``ids``, so the
    history of one edge reads only the blocks whose span holds it. Append-only (trigger) and
    partitioned by month like WeightChange.
    """

    batch = models.ForeignKey(UpdateBatch, on_delete=models.PROTECT, related_name="blocks", db_index=False)
    graph = models.ForeignKey(Graph, on_delete=models.PROTECT, related_name="+", db_index=False)
    target = models.CharField(max_length=4, choices=[(t, t) for t in HISTORY_TARGETS])
    field = models.CharField(max_length=20, choices=[(f, f) for f in WeightChange.FIELDS])
    event = models.CharField(max_length=50, blank=True)
    created_at = models.DateTimeField()
    id_min = models.BigIntegerField()
    id_max = models.BigIntegerField()
    size = models.PositiveIntegerField()
    ids = ArrayField(models.BigIntegerField())
    before = ArrayField(models.FloatField())
    after = ArrayField(models.FloatField())

    objects = TenantQuerySet.as_manager()

    class Meta:
        # Created by migration 0007 (partitioned by month, arrays stored uncompressed, trigger).
        indexes = [
            models.Index(fields=["batch"], name="weightblock_batch"),
            models.Index(fields=["graph", "id_min", "id_max"], name="weightblock_span"),
            models.Index(fields=["graph", "created_at"], name="weightblock_graph_time"),
        ]

    def __str__(self):
        return f"batch {self.batch_id}: {self.size} {self.target} {self.field} changes ({self.event})"


class WeightHistoryQuerySet(TenantQuerySet):
    ORDER = ("change_id", "block_id", "seq")

    def in_order(self):
        """A batch's changes in the order they were written (rows by id, then blocks in id order)."""
        return self.order_by(*self.ORDER)


class WeightHistory(models.Model):
    """One change per row, from either storage shape: the database view ``feedback_weighthistory``.

    The view's SELECT is written once, in migration 0007. One target's history (the node and edge
    pages) is read by ``feedback.queries.reads.history_of``, which reaches into the blocks at the target's
    position instead of unnesting them.

    ``key`` is ``c<change id>`` for a WeightChange row and ``b<block id>.<position>`` for a block
    element; ``change_id`` or ``block_id`` says which. Read-only.
    """

    key = models.TextField(primary_key=True)
    change_id = models.BigIntegerField(null=True)
    block_id = models.BigIntegerField(null=True)
    seq = models.BigIntegerField()
    batch = models.ForeignKey(UpdateBatch, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    graph = models.ForeignKey(Graph, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="+")
    edge = models.ForeignKey(Edge, on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="+")
    field = models.CharField(max_length=20)
    before = models.FloatField()
    after = models.FloatField()
    event = models.CharField(max_length=50)
    use_event = models.ForeignKey(
        UseEvent, on_delete=models.DO_NOTHING, db_constraint=False, null=True, related_name="+"
    )
    created_at = models.DateTimeField()
    span_min = models.BigIntegerField()
    span_max = models.BigIntegerField()

    objects = WeightHistoryQuerySet.as_manager()

    class Meta:
        managed = False
        db_table = "feedback_weighthistory"
        verbose_name_plural = "weight history"


class DailyMetric(models.Model):
    """One graph's metrics for one UTC day, rolled up by a Celery task so charts never scan raw history.

    ``data`` holds: ``scores`` (traversal-score histogram and spread of that day's candidates),
    ``updates`` (weight changes by batch kind and edge type), ``weights`` (weight and feedback_weight
    distribution by edge type, as of the rollup), ``top_used`` (sessions whose top-ranked candidates
    were used) and ``outcomes`` (sessions ended that day, by outcome).
    """

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="daily_metrics")
    day = models.DateField()
    data = models.JSONField(default=dict)
    computed_at = models.DateTimeField()

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["graph", "day"], name="dailymetric_one_per_graph_day")]
        ordering = ["graph", "day"]

    def __str__(self):
        return f"{self.graph_id} {self.day}"


REPORT_KINDS = ("uses", "response", "outcome")
REPORT_STATES = ("pending", "applied", "refused", "failed")


class PendingReport(models.Model):
    """A report the API accepted (202), kept in PostgreSQL until the worker has applied it: the outbox.

    Written in the request's own transaction (``feedback.outbox.record``), so a 202 is never an
    answer for a report that was not stored, and a report is never stored for a request that rolled
    back. The worker drains a graph's pending rows oldest first (``feedback.outbox.drain``); each is
    applied once through ``feedback.actions`` by its ``idempotency_key`` (also the key of the update
    batch it writes), then marked ``applied`` (``result`` holds the action's status and batch),
    ``refused`` (the action refused its input; ``last_error`` says why) or, after ``MAX_ATTEMPTS``
    failures of another kind, ``failed``. A row still ``pending`` after a worker died, or waiting out
    its backoff (``not_before``), is picked up again by the beat sweeper.
    """

    # No single-column index on graph or user: the partial index below serves every read by graph.
    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="+", db_index=False)
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="pending_reports")
    kind = models.CharField(max_length=10, choices=[(k, k) for k in REPORT_KINDS])
    payload = models.JSONField(default=dict, help_text="The validated report: items, response text or outcome.")
    idempotency_key = models.CharField(max_length=200, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", db_index=False
    )
    state = models.CharField(max_length=10, default="pending", choices=[(s, s) for s in REPORT_STATES])
    created_at = models.DateTimeField(default=clock.now, editable=False)
    not_before = models.DateTimeField(default=clock.now, help_text="Backoff: not applied again before this time.")
    applied_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=REPORT_KINDS), name="pendingreport_kind_valid"),
            models.CheckConstraint(condition=Q(state__in=REPORT_STATES), name="pendingreport_state_valid"),
        ]
        indexes = [
            # The drain's claim and the sweeper read pending rows only: a small index whatever the history.
            models.Index(fields=["graph", "id"], name="pendingreport_pending", condition=Q(state="pending")),
            models.Index(fields=["created_at"], name="pendingreport_created"),
        ]

    def __str__(self):
        return f"{self.kind} report {self.idempotency_key} ({self.state})"


IMPORT_STATES = ("queued", "parsing", "importing", "succeeded", "failed")


class VaultImport(models.Model):
    """A vault import run in the background (uploads above VAULT_IMPORT_ASYNC_BYTES): its progress record.

    The upload is kept in ``archive`` until the task has read it (then emptied); ``state`` moves
    queued -> parsing (``done`` of ``total`` notes read) -> importing -> succeeded (``result``: the
    import's counts, batch and warnings, as the synchronous answer) or failed (``error``: why). The
    API (``/api/graphs/{id}/imports/{id}/``) and the overview page show it.
    """

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="vault_imports")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    state = models.CharField(max_length=20, default="queued", choices=[(s, s) for s in IMPORT_STATES])
    dry_run = models.BooleanField(default=False)
    create_missing = models.BooleanField(default=False)
    filename = models.CharField(max_length=255, blank=True)
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the uploaded archive.")
    archive = models.BinaryField(default=bytes, editable=False)
    done = models.PositiveIntegerField(default=0, help_text="Notes read so far.")
    total = models.PositiveIntegerField(default=0, help_text="Notes in the archive.")
    counts = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=clock.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(state__in=IMPORT_STATES), name="vaultimport_state_valid")]
        indexes = [models.Index(fields=["graph", "-created_at"], name="vaultimport_graph_recent")]

    def __str__(self):
        return f"import {self.pk} ({self.state})"


RECORD_OPS = ("create", "update", "archive", "restore")


class RecordChange(models.Model):
    """One node or edge a batch created, changed, archived or restored: its tracked fields before and after.

    Written by the batches that change rows rather than weights (``memory``, ``import`` and their
    rollbacks; ``feedback.records``). A rollback restores ``before`` where the row still holds
    ``after`` and reports the others as conflicts. A node's ``update`` rows are its versions: the
    text it had before each change. Append-only by convention: nothing updates or deletes a row.
    """

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="+", db_index=False)
    batch = models.ForeignKey(UpdateBatch, on_delete=models.CASCADE, related_name="record_changes")
    target = models.CharField(max_length=4, choices=[("node", "node"), ("edge", "edge")])
    record_id = models.BigIntegerField()
    op = models.CharField(max_length=10, choices=[(o, o) for o in RECORD_OPS])
    before = models.JSONField(help_text="The tracked fields before the batch (for a created row: archived).")
    after = models.JSONField(help_text="The tracked fields as the batch left them.")
    created_at = models.DateTimeField(default=clock.now, editable=False)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(op__in=RECORD_OPS), name="record_change_op_valid"),
            models.CheckConstraint(condition=Q(target__in=("node", "edge")), name="record_change_target_valid"),
        ]
        indexes = [models.Index(fields=["graph", "target", "record_id"], name="record_change_target")]

    def __str__(self):
        return f"{self.op} {self.target} {self.record_id} (batch {self.batch_id})"
