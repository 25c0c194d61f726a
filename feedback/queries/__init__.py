"""The feedback app's SQL, by job: each statement whole and named, composed and run by the core's toolkit
(``graphadmin.models.sql``: ``statement``, ``fetch``, ``fetch_all``, ``execute``).

- ``weights``: the weight writes (reinforcement, the outcome EMA, decay and normalize chunks, a manual set,
  rollback, learned links, question evidence), their batches and the reads their write path makes;
- ``reports``: the report intake (a session and what its report checks, the outbox INSERT) and the drain
  (its lock, the claim, the rows it reads and the states it writes);
- ``reads``: what the pages and the rollups read (one target's history, learning at a glance, the ranks of
  the impact page, learning health, the daily metrics).

Here: the feedback tables beside the core's (``TABLES``, what ``{name}`` in a statement's text becomes), the
weights a write may change (``WEIGHTS``) and the history blocks' span, shared by the three. Rules for every
statement: values bound (``%(name)s``), tables from the models' ``_meta.db_table``, every graph-scoped table
filtered by ``graph_id`` (the sharding key, DESIGN.md "Scale"; tests/test_graph_scoped_sql.py).
"""

from __future__ import annotations

from functools import partial

from django.contrib.auth import get_user_model

from graphadmin.models import sql

from ..models import (
    AgentSession,
    ContextInjection,
    DailyMetric,
    InjectionCandidate,
    PendingReport,
    UpdateBatch,
    UseEvent,
    WeightChange,
    WeightChangeBlock,
    WeightHistory,
)

BLOCK_SPAN = 10000  # ids covered by one history block at most (one edge's history reads one block per batch)

TABLES = sql.TABLES | sql.tables(
    session=AgentSession,
    injection=ContextInjection,
    candidate=InjectionCandidate,
    use_event=UseEvent,
    batch=UpdateBatch,
    change=WeightChange,
    block=WeightChangeBlock,
    history=WeightHistory,
    report=PendingReport,
    daily_metric=DailyMetric,
    user=get_user_model(),
)

# A named statement over the core's and the feedback tables (``graphadmin.models.sql.statement``).
statement = partial(sql.statement, tables=TABLES)

# The weights a write may change: (target, field) -> the history's target column (``node_id``, ``edge_id``).
WEIGHTS = {
    ("edge", "weight"): sql.column(WeightChange, "edge"),
    ("edge", "feedback_weight"): sql.column(WeightChange, "edge"),
    ("node", "feedback_weight"): sql.column(WeightChange, "node"),
}
