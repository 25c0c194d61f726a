"""Graphs, nodes, edge types and edges, with their narrow counter tables.

Every table on a hot path carries ``graph_id`` itself, so a distributed PostgreSQL can shard by
graph without a rewrite. Counters that change on every retrieval live in NodeStats/EdgeStats:
updating a column beside an HNSW-indexed vector costs far more than updating a narrow row.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, FloatField, Func, Q
from django.db.models.lookups import GreaterThan
from django.urls import reverse
from pgvector.django import HnswIndex, VectorField

from graphadmin import clock
from graphadmin.runtime import hotcache

from .tenancy import Organization, TenantQuerySet

WEIGHT_DEFAULT = 0.5


def unit_interval(field: str, name: str) -> models.CheckConstraint:
    """A database check that ``field`` lies in [0, 1]."""
    return models.CheckConstraint(condition=Q(**{f"{field}__gte": 0.0, f"{field}__lte": 1.0}), name=name)


def has_direction(field: str, name: str) -> models.CheckConstraint:
    """A database check that the vector ``field`` is NULL or not all zero.

    A zero vector has no direction: pgvector's cosine distance to it is NaN, which would make every
    similarity it enters NaN. Text that gives an embedder nothing to embed stores NULL instead.
    """
    norm = Func(F(field), function="vector_norm", output_field=FloatField())
    return models.CheckConstraint(condition=Q(**{f"{field}__isnull": True}) | GreaterThan(norm, 0.0), name=name)


class Graph(models.Model):
    """One agent memory graph, owned by an organization."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="graphs")
    slug = models.SlugField(max_length=100)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    feedback_enabled = models.BooleanField(default=True, help_text="When off, feedback reports are recorded as no-ops.")
    text_search_config = models.CharField(
        max_length=20,
        choices=[("english", "english"), ("simple", "simple")],
        default="english",
        db_default="english",
        help_text="PostgreSQL text-search configuration of the lexical index and of queries: english (stemmed, "
        "English stop words) or simple (lower-cased words, for other languages).",
    )
    evidence_similarity = models.FloatField(
        null=True,
        blank=True,
        editable=False,
        help_text="The similarity at which a past question's reported uses count as evidence for a new question, "
        "derived from the graph's own reported sessions (feedback.rules.evidence_similarity); empty: not enough "
        "reported questions yet (near-repeats only).",
    )
    created_at = models.DateTimeField(default=clock.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="graph_slug_per_org")]

    def __str__(self):
        return f"{self.organization.slug}/{self.slug}" if self.organization_id else self.slug

    def get_absolute_url(self):
        """Its dashboard page (the admin's "View on site")."""
        return reverse("overview", args=[self.pk])

    def current_policy(self):
        """The newest PolicyRevision of this graph (kept briefly per process: a new revision is seen at once,
        graphadmin.runtime.hotcache)."""
        return hotcache.current_policy(self.pk, lambda: self.policy_revisions.order_by("-revision").first())


class GraphChildQuerySet(TenantQuerySet):
    """Nodes and edges: tenancy, plus the rows retrieval may return."""

    def active(self):
        return self.filter(archived=False)


class EdgeType(models.Model):
    """A kind of edge in one graph, with the static priority bonus operators tune."""

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="edge_types")
    name = models.CharField(max_length=100)
    priority = models.FloatField(
        default=0.0, help_text="Static bonus in [-1, 1] added through the priority coefficient."
    )
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=clock.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["graph", "name"], name="edgetype_name_per_graph"),
            models.UniqueConstraint(fields=["id", "graph"], name="edgetype_id_graph"),
            models.CheckConstraint(condition=Q(priority__gte=-1.0, priority__lte=1.0), name="edgetype_priority_range"),
        ]

    def __str__(self):
        return self.name


class Node(models.Model):
    """A note, decision or observation: the unit of memory an agent retrieves."""

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="nodes")
    key = models.CharField(max_length=500, help_text="Stable external key, unique per graph.")
    kind = models.CharField(max_length=50, default="note")
    title = models.CharField(max_length=500)
    text = models.TextField(blank=True)
    source = models.CharField(
        max_length=1000, blank=True, help_text="Where it came from: a vault path, a URL, an agent."
    )
    aliases = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    content_hash = models.CharField(max_length=64, blank=True)
    embedding = VectorField(dimensions=settings.EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(
        max_length=200,
        blank=True,
        default="",
        db_default="",
        help_text=(
            "The model that made the embedding ('' when there is none, or a caller sent it without naming its model)."
        ),
    )
    feedback_weight = models.FloatField(default=WEIGHT_DEFAULT)
    archived = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The agent (or person) that wrote it through the memory API; null for imported notes.",
    )
    created_at = models.DateTimeField(default=clock.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = GraphChildQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["graph", "key"], name="node_key_per_graph"),
            models.UniqueConstraint(fields=["id", "graph"], name="node_id_graph"),
            unit_interval("feedback_weight", "node_feedback_weight_unit"),
            has_direction("embedding", "node_embedding_not_zero"),
        ]
        indexes = [
            # Retrieval reads the min and max model of a graph from it (graphadmin.embeddings.stored_models).
            models.Index(fields=["graph", "embedding_model"], name="node_graph_embedding_model"),
            # Is a link's far end live context (its graph, not archived, not a question node)? The expansion asks
            # it of every link it weighs (ranking.queries.EXPAND_LEVELS), answered from this index alone instead
            # of the node row (a vector and the note's text). The learned EMA is not in it: its writes stay HOT.
            models.Index(fields=["id"], include=["graph", "archived", "kind"], name="node_live_kind"),
            # The vectors still to write (a large import's, until its embeddings task has run): what the graph's
            # ``vectors_pending`` counts (graphadmin.readiness). Empty for a ready graph, so the count every
            # context answer carries is one probe of an empty index.
            models.Index(
                fields=["graph"],
                name="node_vector_pending",
                condition=models.Q(embedding__isnull=True, archived=False),
            ),
            # m=24, ef_construction=128: on a large graph of tight clusters, m=16/64 left some queries with a
            # low recall whatever ef_search; this denser build does not (bench figures: docs/performance.md).
            HnswIndex(
                name="node_embedding_hnsw",
                fields=["embedding"],
                m=24,
                ef_construction=128,
                opclasses=["vector_cosine_ops"],
            ),
            # The question nodes alone (feedback.rules.QUESTION_KIND: what agents asked, with the evidence of
            # their sessions on ``answered`` edges): found by similarity without searching the notes.
            HnswIndex(
                name="node_question_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
                condition=models.Q(kind="question"),
            ),
        ]

    def __str__(self):
        return self.title or self.key

    def get_absolute_url(self):
        """Its dashboard page (the admin's "View on site")."""
        return reverse("node", args=[self.graph_id, self.pk])


class NodeStats(models.Model):
    """Retrieval counters of a node, kept out of the wide, vector-indexed node row."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="stats")
    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="+")
    surfaced_count = models.BigIntegerField(default=0)
    traversed_count = models.BigIntegerField(default=0)
    used_count = models.BigIntegerField(default=0)
    last_surfaced_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "node stats"


def edge_label(source: str, edge_type: str, target: str) -> str:
    """An edge in plain words: "A -> type -> B" (the pages name edges this way, never by id)."""
    return f"{source} -> {edge_type} -> {target}"


class Edge(models.Model):
    """A directed, typed link between two nodes of the same graph, with its learned weights."""

    # Indexed by (graph, id) below, which serves every graph_id lookup and walks a graph's ids in order.
    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="edges", db_index=False)
    source = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="out_edges")
    target = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="in_edges")
    edge_type = models.ForeignKey(EdgeType, on_delete=models.PROTECT, related_name="edges")
    weight = models.FloatField(default=WEIGHT_DEFAULT, help_text="Reinforcement weight in [0, 1].")
    feedback_weight = models.FloatField(default=WEIGHT_DEFAULT, help_text="Outcome EMA in [0, 1].")
    triplet_embedding = VectorField(dimensions=settings.EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(
        max_length=200,
        blank=True,
        default="",
        db_default="",
        help_text="The model that made the triplet embedding ('' when there is none, or a caller sent it unnamed).",
    )
    archived = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The agent (or person) that linked it through the memory API; null otherwise.",
    )
    created_at = models.DateTimeField(default=clock.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = GraphChildQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "edge_type"], name="edge_one_per_triplet"),
            unit_interval("weight", "edge_weight_unit"),
            unit_interval("feedback_weight", "edge_feedback_weight_unit"),
            has_direction("triplet_embedding", "edge_triplet_embedding_not_zero"),
        ]
        indexes = [
            models.Index(fields=["graph", "id"], name="edge_graph_id"),
            models.Index(fields=["graph", "embedding_model"], name="edge_graph_embedding_model"),
            # By type too: the question-evidence edges (type ``answered``) have no vector by design, and the count
            # skips their range (graphadmin.readiness).
            models.Index(
                fields=["graph", "edge_type"],
                name="edge_vector_pending",
                condition=models.Q(triplet_embedding__isnull=True, archived=False),
            ),
            models.Index(fields=["graph", "source"], name="edge_graph_source"),
            models.Index(fields=["graph", "target"], name="edge_graph_target"),
            # A note's live links by either end, with their type: the expansion counts every end's degree
            # (ranking.queries.EXPAND_LEVELS) from these alone (an index-only count; the edge rows, a vector
            # each, are read for the links it keeps). No column a weight write changes: those updates stay HOT.
            models.Index(
                fields=["graph", "source"],
                include=["edge_type"],
                name="edge_live_source",
                condition=models.Q(archived=False),
            ),
            models.Index(
                fields=["graph", "target"],
                include=["edge_type"],
                name="edge_live_target",
                condition=models.Q(archived=False),
            ),
            HnswIndex(
                name="edge_triplet_hnsw",
                fields=["triplet_embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self):
        return f"{self.source_id} -[{self.edge_type_id}]-> {self.target_id}"

    @property
    def label(self) -> str:
        """The edge as people read it, "Source title -> type -> Target title" (select_related the three)."""
        return edge_label(
            self.source.title or self.source.key, self.edge_type.name, self.target.title or self.target.key
        )

    def get_absolute_url(self):
        """Its dashboard page (the admin's "View on site")."""
        return reverse("edge", args=[self.graph_id, self.pk])


class EdgeStats(models.Model):
    """Retrieval counters and last traversal time of an edge, kept out of the wide edge row."""

    edge = models.OneToOneField(Edge, on_delete=models.CASCADE, primary_key=True, related_name="stats")
    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="+")
    surfaced_count = models.BigIntegerField(default=0)
    traversed_count = models.BigIntegerField(default=0)
    used_count = models.BigIntegerField(default=0)
    last_traversed_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "edge stats"


class NodeLexeme(models.Model):
    """The lexical index (BM25): one row per (active node, lexeme) with the lexeme's count in the node.

    Kept by database triggers on the node table (migration ``lexical_index``): a node's title,
    aliases and text through ``to_tsvector`` with its graph's ``text_search_config``, on every insert,
    update of those columns or of ``archived``, and delete; archived nodes have none. Never written
    by Python. ranking.queries reads it (document frequency per graph and lexeme is counted there).
    """

    pk = models.CompositePrimaryKey("node", "lexeme")
    graph = models.ForeignKey(Graph, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    lexeme = models.TextField()
    tf = models.IntegerField(help_text="Occurrences of the lexeme in the node (to_tsvector positions, at most 256).")

    class Meta:
        indexes = [models.Index(fields=["graph", "lexeme"], include=["node", "tf"], name="nodelexeme_graph_lexeme")]


class NodeLexicon(models.Model):
    """A node's document length for BM25 (sum of its lexemes' counts), kept with NodeLexeme by the same triggers."""

    node = models.OneToOneField(
        Node, on_delete=models.DO_NOTHING, db_constraint=False, primary_key=True, related_name="+"
    )
    graph = models.ForeignKey(Graph, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    length = models.IntegerField()

    class Meta:
        indexes = [models.Index(fields=["graph"], include=["length"], name="nodelexicon_graph")]
