"""What the pages, the API's reads and the daily rollup read from the ledgers: each statement whole and named.

Reads only, never a lock: one target's history (the node and edge pages), learning at a glance (the overview's
weekly figures and marks), the ranks of the impact page (``SESSION_RANKS``, ``feedback.analysis``), learning
health (``feedback.health``) and the daily metrics rollup (``feedback.metrics``). Why raw SQL: each is one round
trip where the ORM would need one query per week, per session or per edge type (a LATERAL pick of the revision
in effect, a window function over ``jsonb_each``, a percentile, a weight as it stood at a day's end).
"""

from __future__ import annotations

from datetime import datetime

from graphadmin.models.sql import fetch, fetch_all

from ..models import WeightHistory
from . import WEIGHTS, statement

# --------------------------------------------------------------------------------------------------
# One target's history


# The changes of one node or edge (``{target_column}``: ``node_id`` or ``edge_id``), newest first, as
# rows of the view ``feedback_weighthistory`` (model WeightHistory, the same columns). Not a filter on
# the view: the view unnests each block whole, and a block holds up to BLOCK_SPAN changes, so on an
# edge decayed a hundred times the view takes about twenty times longer
# (docs/history/performance-first-build.md, "One target's history"). Here rows come from the (graph,
# target, time) index; a block is read only when its id bounds hold the target, and only at the
# target's position (``array_position``). ``only_field``: the field or NULL
# for both; ``latest``: at most that many (NULL: all).
def _history_of(target_column) -> str:
    return statement(
        """
        SELECT * FROM (
            SELECT 'c' || w.id AS key, w.id AS change_id, NULL::bigint AS block_id, w.id AS seq, w.batch_id,
                   w.graph_id, w.node_id, w.edge_id, w.field, w.before, w.after, w.event, w.use_event_id,
                   w.created_at, %(target)s::bigint AS span_min, %(target)s::bigint AS span_max
            FROM {change} w
            WHERE w.graph_id = %(graph)s AND w.{target_column} = %(target)s
              AND (%(only_field)s::text IS NULL OR w.field = %(only_field)s)
            UNION ALL
            SELECT 'b' || b.id || '.' || p, NULL::bigint, b.id, p::bigint, b.batch_id, b.graph_id,
                   CASE WHEN b.target = 'node' THEN %(target)s::bigint END,
                   CASE WHEN b.target = 'edge' THEN %(target)s::bigint END,
                   b.field, b.before[p], b.after[p], b.event, NULL::bigint, b.created_at, b.id_min, b.id_max
            FROM {block} b
            CROSS JOIN LATERAL array_position(b.ids, %(target)s::bigint) AS p
            WHERE b.graph_id = %(graph)s AND b.target = %(kind)s AND b.id_min <= %(target)s AND b.id_max >= %(target)s
              AND p IS NOT NULL AND (%(only_field)s::text IS NULL OR b.field = %(only_field)s)
        ) h
        ORDER BY created_at DESC, change_id DESC NULLS LAST, block_id DESC, seq DESC
        LIMIT %(latest)s
        """,
        target_column=target_column,
    )


HISTORY_OF = {kind: _history_of(column) for (kind, _field), column in WEIGHTS.items()}


def history_of(graph, kind: str, target_id: int, *, field: str | None = None, latest: int | None = None):
    """The changes of one node or edge, newest first (at most ``latest``), as WeightHistory rows with
    their batches prefetched (``HISTORY_OF``)."""
    if kind not in HISTORY_OF:
        raise ValueError(f"kind must be one of {tuple(HISTORY_OF)}")
    params = {
        "graph": getattr(graph, "pk", graph),
        "kind": kind,
        "target": target_id,
        "only_field": field,
        "latest": latest or None,
    }
    return WeightHistory.objects.raw(HISTORY_OF[kind], params).prefetch_related("batch")


# --------------------------------------------------------------------------------------------------
# Learning at a glance (the overview): per week, from the ledgers

# Per UTC week (Monday first) of the sessions whose first injection falls in it (within [since, until)): how
# many, how many used at least one of their top ``k`` ranked selected candidates (an explicit or implicit
# use event on that node or on the edge that reached it; path credit is not a use, as in the daily
# rollup), how many had an outcome reported, and their mean outcome score. A score is the outcome's
# number in the policy revision in effect when it was reported (the number its outcome EMA used; the
# first revision for an outcome stamped before any, as an import's clock may leave it). Raw
# SQL: a per-session EXISTS over candidates and use events and a LATERAL pick of the revision in effect,
# which the ORM would write as one query per week; every table filtered by graph_id. The EXISTS starts
# from the session's own use events (index on session_id), not from the candidates' nodes: a popular
# node has use events in thousands of sessions, a session has a handful.
WEEKLY_LEARNING = statement("""
    WITH first_seen AS (
        SELECT j.session_id, min(j.created_at) AS at FROM {injection} j
        WHERE j.graph_id = %(graph)s AND j.created_at >= %(since)s AND j.created_at < %(until)s
          AND NOT EXISTS (
              SELECT 1 FROM {injection} j0
              WHERE j0.graph_id = %(graph)s AND j0.session_id = j.session_id AND j0.created_at < %(since)s
          )
        GROUP BY j.session_id
    ),
    cohort AS (
        SELECT f.session_id, date_trunc('week', f.at AT TIME ZONE 'UTC')::date AS week, s.outcome, s.outcome_at,
               EXISTS (
                   SELECT 1 FROM {use_event} u
                   WHERE u.session_id = f.session_id AND u.graph_id = %(graph)s
                     AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
                     AND EXISTS (
                         SELECT 1 FROM {injection} j JOIN {candidate} c ON c.injection_id = j.id
                         WHERE j.session_id = f.session_id AND j.graph_id = %(graph)s AND c.graph_id = %(graph)s
                           AND c.selected AND c.rank <= %(k)s AND (c.node_id = u.node_id OR c.edge_id = u.edge_id)
                     )
               ) AS used
        FROM first_seen f JOIN {session} s ON s.id = f.session_id AND s.graph_id = %(graph)s
        WHERE %(owners)s::bigint[] IS NULL OR s.owner_id = ANY(%(owners)s::bigint[])
              OR (%(unowned)s AND s.owner_id IS NULL)
    )
    SELECT c.week, count(*) AS sessions, count(*) FILTER (WHERE c.used) AS used,
           count(c.outcome) AS outcomes, avg(score.value) AS mean_score
    FROM cohort c
    LEFT JOIN LATERAL (
        SELECT CASE c.outcome WHEN 'accepted' THEN p.outcome_accepted WHEN 'rework' THEN p.outcome_rework
                              WHEN 'rejected' THEN p.outcome_rejected END AS value
        FROM {policy} p
        WHERE p.graph_id = %(graph)s AND (p.created_at <= c.outcome_at OR p.revision = 1)
        ORDER BY p.revision DESC LIMIT 1
    ) score ON c.outcome IS NOT NULL
    GROUP BY c.week ORDER BY c.week
""")

# The marks on the weekly axis, in time order: each policy revision after the first written in
# [since, until) (kind ``policy``: its number and note), and each decay run (kind ``decay``): one
# period's chunk batches (``do_decay`` writes one batch per chunk, keyed by the period), at its first
# batch's time, with the edges it changed and whether every batch of it was rolled back since. One
# statement for both (a UNION the ORM has no readable form for), each part filtered by graph_id.
LEARNING_MARKS = statement("""
    SELECT 'policy' AS kind, p.created_at AS at, p.revision::bigint AS number, p.note AS note,
           0::bigint AS edges, false AS rolled_back
    FROM {policy} p
    WHERE p.graph_id = %(graph)s AND p.revision > 1 AND p.created_at >= %(since)s AND p.created_at < %(until)s
    UNION ALL
    SELECT 'decay', min(b.started_at), (b.details ->> 'period')::bigint, '', sum(b.edge_updates)::bigint,
           bool_and(b.status <> 'applied')
    FROM {batch} b
    WHERE b.graph_id = %(graph)s AND b.kind = 'decay' AND b.started_at >= %(since)s AND b.started_at < %(until)s
    GROUP BY (b.details ->> 'period')::bigint
    ORDER BY at, kind
""")

# The overview's counts of one graph's sessions, injections and batches, in one round trip.
GRAPH_COUNTS = statement("""
    SELECT (SELECT count(*) FROM {session} WHERE graph_id = %(graph)s),
           (SELECT count(*) FROM {injection} WHERE graph_id = %(graph)s),
           (SELECT count(*) FROM {batch} WHERE graph_id = %(graph)s)
""")


def weekly_learning(
    graph, since: datetime, until: datetime, k: int, owners: list[int] | None = None, unowned: bool = False
) -> list[tuple]:
    """Rows of WEEKLY_LEARNING: (week start, sessions, used, outcomes, mean outcome score or None), over the
    sessions of ``owners`` (user ids; None: every session) and, with ``unowned``, those without an owner."""
    params = {"graph": getattr(graph, "pk", graph), "since": since, "until": until, "k": k}
    params.update(owners=owners, unowned=unowned)
    return fetch_all(WEEKLY_LEARNING, params)


# One row per session whose first injection falls in [since, until): where the first item it used was ranked,
# for the rank-dependent measures of feedback.analysis (mean reciprocal rank of the first used item, the share
# of sessions whose top item was used) and the per-session CSV. "Used" is what WEEKLY_LEARNING counts (an
# explicit or implicit use, not path credit) of a candidate the session was given (selected); the rank is the
# candidate log's, the best over the session's injections. The outcome is scored by the policy revision in
# effect when it was reported, as in WEEKLY_LEARNING; the revision is the one the first injection ran under.
# A statement of its own: a per-session minimum over a join of three ledgers, with the two laterals.
# Its ranks MATERIALIZED: docs/decisions/0010-session-ranks-materialized.md
SESSION_RANKS = statement("""
    WITH first_seen AS MATERIALIZED (
        SELECT j.session_id, min(j.created_at) AS at FROM {injection} j
        WHERE j.graph_id = %(graph)s
        GROUP BY j.session_id
        HAVING min(j.created_at) >= %(since)s AND min(j.created_at) < %(until)s
    ),
    -- Computed once for all the sessions (MATERIALIZED): inlined, a planner without statistics (a graph
    -- just filled) ran it once per session over every first_seen row, seconds instead of milliseconds.
    ranks AS MATERIALIZED (
        SELECT j.session_id, min(c.rank) AS first_used_rank
        FROM {injection} j
        JOIN {candidate} c ON c.injection_id = j.id AND c.graph_id = %(graph)s AND c.selected
        WHERE j.graph_id = %(graph)s AND j.session_id IN (SELECT session_id FROM first_seen)
          AND EXISTS (
              SELECT 1 FROM {use_event} u
              WHERE u.session_id = j.session_id AND u.graph_id = %(graph)s
                AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
                AND (c.node_id = u.node_id OR c.edge_id = u.edge_id)
          )
        GROUP BY j.session_id
    )
    SELECT s.id, s.external_id, s.owner_id, f.at, s.outcome, score.value, rev.revision, r.first_used_rank
    FROM first_seen f
    JOIN {session} s ON s.id = f.session_id AND s.graph_id = %(graph)s
    LEFT JOIN ranks r ON r.session_id = f.session_id
    LEFT JOIN LATERAL (
        SELECT p.revision FROM {injection} j JOIN {policy} p ON p.id = j.policy_revision_id
        WHERE j.session_id = f.session_id AND j.graph_id = %(graph)s
        ORDER BY j.created_at, j.id LIMIT 1
    ) rev ON true
    LEFT JOIN LATERAL (
        SELECT CASE s.outcome WHEN 'accepted' THEN p.outcome_accepted WHEN 'rework' THEN p.outcome_rework
                              WHEN 'rejected' THEN p.outcome_rejected END AS value
        FROM {policy} p
        WHERE p.graph_id = %(graph)s AND (p.created_at <= s.outcome_at OR p.revision = 1)
        ORDER BY p.revision DESC LIMIT 1
    ) score ON s.outcome IS NOT NULL
    WHERE %(owners)s::bigint[] IS NULL OR s.owner_id = ANY(%(owners)s::bigint[])
          OR (%(unowned)s AND s.owner_id IS NULL)
    ORDER BY f.at, s.id
""")


def session_ranks(
    graph, since: datetime, until: datetime, owners: list[int] | None = None, unowned: bool = False
) -> list[tuple]:
    """Rows of SESSION_RANKS: (session id, external id, owner id, first injection time, outcome, outcome score
    or None, policy revision of the first injection, first used rank or None), in time order."""
    params = {"graph": getattr(graph, "pk", graph), "since": since, "until": until}
    params.update(owners=owners, unowned=unowned)
    return fetch_all(SESSION_RANKS, params)


def learning_marks(graph, since: datetime, until: datetime) -> list[tuple]:
    """Rows of LEARNING_MARKS: (kind, time, revision or period, note, edges changed, all rolled back)."""
    return fetch_all(LEARNING_MARKS, {"graph": getattr(graph, "pk", graph), "since": since, "until": until})


def graph_counts(graph) -> dict:
    """The graph's sessions, injections and batches (GRAPH_COUNTS)."""
    sessions, injections, batches = fetch(GRAPH_COUNTS, {"graph": getattr(graph, "pk", graph)})
    return {"sessions": sessions, "injections": injections, "batches": batches}


# --------------------------------------------------------------------------------------------------
# Learning health (feedback.health): what the candidate log and the weight history say about learning

# The window: the graph's last ``n`` injections (the index injection_graph_recent), and their candidates by
# injection (the unique index on injection, rank, created_at), the partitions pruned by the window's first time.
_HEALTH_WINDOW = """
    WITH inj AS MATERIALIZED (
        SELECT i.id, i.created_at FROM {injection} i
        WHERE i.graph_id = %(graph)s ORDER BY i.created_at DESC, i.id DESC LIMIT %(n)s
    ),
    cand AS MATERIALIZED (
        SELECT c.injection_id, c.node_id, c.hops, c.total, c.selected, c.components, c.features
        FROM {candidate} c JOIN inj ON inj.id = c.injection_id
        WHERE c.graph_id = %(graph)s AND c.created_at >= (SELECT min(created_at) FROM inj)
    )
"""

# Per score component: in how many candidates (and selected items) of the window taking the component out of
# the total moves the candidate's place in its injection's order (and takes a selected item that is among the
# first ``selected`` places out of them). Orders are row_number over (total desc, hops, node id), the log's tie
# rule, both with and without the component, so only the component's own effect counts. ORM: no window function
# over a jsonb_each.
HEALTH_COMPONENTS = statement(
    """{window},
    flat AS MATERIALIZED (
        SELECT c.injection_id, c.node_id, c.hops, c.selected, k.key AS component,
               round(c.total * 1e12) AS with_key,
               round((c.total - coalesce((k.value ->> 'contribution')::double precision, 0)) * 1e12) AS without_key,
               coalesce((k.value ->> 'contribution')::double precision, 0) AS contribution
        FROM cand c CROSS JOIN LATERAL jsonb_each(c.components) k
        WHERE jsonb_typeof(k.value) = 'object'
    ),
    per AS (
        SELECT f.selected, f.component, f.contribution,
               row_number() OVER (PARTITION BY f.injection_id, f.component
                                  ORDER BY f.with_key DESC, f.hops, f.node_id) AS with_rank,
               row_number() OVER (PARTITION BY f.injection_id, f.component
                                  ORDER BY f.without_key DESC, f.hops, f.node_id) AS without_rank,
               count(*) FILTER (WHERE f.selected) OVER (PARTITION BY f.injection_id, f.component) AS n_selected
        FROM flat f
    )
    SELECT component,
           count(*) AS candidates,
           count(*) FILTER (WHERE contribution <> 0) AS nonzero,
           count(*) FILTER (WHERE with_rank <> without_rank) AS moved,
           count(*) FILTER (WHERE selected) AS selected,
           count(*) FILTER (WHERE selected AND with_rank <= n_selected AND without_rank > n_selected) AS selected_moved
    FROM per GROUP BY component ORDER BY component
    """,
    window=_HEALTH_WINDOW,
)

# The window's size, time span and how its candidates (and selected items) were reached: how they entered
# (vector, lexical, triplet, start, expansion, memory) and, for those reached by following links from an entry
# point (path_hops > 0), the type of the last link. A triplet hit carries its link as its path but entered
# directly (0 hops): it is not "reached through a link".
HEALTH_REACH = statement(
    """{window}
    SELECT coalesce(c.features ->> 'entry', '') AS entry,
           CASE WHEN coalesce((c.features ->> 'path_hops')::int, 0) > 0
                THEN coalesce(nullif(c.features ->> 'edge_type', ''), '?') END AS edge_type,
           count(*) AS candidates, count(*) FILTER (WHERE c.selected) AS selected,
           (SELECT count(*) FROM inj) AS injections,
           (SELECT min(created_at) FROM inj) AS since, (SELECT max(created_at) FROM inj) AS until
    FROM cand c GROUP BY 1, 2 ORDER BY 1, 2 NULLS FIRST
    """,
    window=_HEALTH_WINDOW,
)

# Distinct weights that moved since each of two times, by weight (target, field) and by the kind of batch
# that moved them, beside the live rows holding that weight. The history view (rows and blocks) by graph and
# time; rolled-back batches count (a move is a move).
HEALTH_MOVED = statement("""
    WITH moved AS (
        SELECT CASE WHEN h.node_id IS NOT NULL THEN 'node' ELSE 'edge' END AS target, h.field, b.kind,
               coalesce(h.node_id, h.edge_id) AS id, h.created_at
        FROM {history} h JOIN {batch} b ON b.id = h.batch_id AND b.graph_id = %(graph)s
        WHERE h.graph_id = %(graph)s AND h.created_at >= %(since_long)s AND h.before IS DISTINCT FROM h.after
    )
    SELECT target, field, kind,
           count(DISTINCT id) FILTER (WHERE created_at >= %(since_short)s) AS short,
           count(DISTINCT id) AS long
    FROM moved GROUP BY target, field, kind ORDER BY target, field, kind
    """)

HEALTH_LIVE = statement("""
    SELECT (SELECT count(*) FROM {node} WHERE graph_id = %(graph)s AND NOT archived),
           (SELECT count(*) FROM {edge} WHERE graph_id = %(graph)s AND NOT archived)
    """)

# Per edge type: its live edges, how many still hold the default weight and feedback weight, and the means.
HEALTH_EDGE_TYPES = statement("""
    SELECT et.name, count(e.id) AS edges,
           count(e.id) FILTER (WHERE e.weight = %(default)s) AS weight_default,
           count(e.id) FILTER (WHERE e.feedback_weight = %(default)s) AS feedback_default,
           avg(e.weight) AS mean_weight, avg(e.feedback_weight) AS mean_feedback
    FROM {edge_type} et
    LEFT JOIN {edge} e ON e.edge_type_id = et.id AND e.graph_id = %(graph)s AND NOT e.archived
    WHERE et.graph_id = %(graph)s
    GROUP BY et.name ORDER BY et.name
    """)


def health_rows(graph_id: int, n: int, since_short: datetime, since_long: datetime) -> dict[str, list[tuple]]:
    """The learning-health figures of a graph (feedback.health): components, reach, moved weights, live rows,
    edge types, each one named statement above."""
    params = {"graph": graph_id, "n": n, "since_short": since_short, "since_long": since_long, "default": 0.5}
    return {
        "components": fetch_all(HEALTH_COMPONENTS, params),
        "reach": fetch_all(HEALTH_REACH, params),
        "moved": fetch_all(HEALTH_MOVED, params),
        "live": fetch_all(HEALTH_LIVE, params),
        "edge_types": fetch_all(HEALTH_EDGE_TYPES, params),
    }


# --------------------------------------------------------------------------------------------------
# The daily metrics rollup (feedback.metrics): one graph and one UTC day, [%(start)s, %(end)s)

# Traversal-score totals of the day's candidates: count, min, max, mean, spread, p10/p50/p90, and how many
# were selected.
ROLLUP_SCORES = statement("""
        SELECT count(*), min(c.total), max(c.total), avg(c.total), stddev_pop(c.total),
               percentile_cont(0.1) WITHIN GROUP (ORDER BY c.total),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY c.total),
               percentile_cont(0.9) WITHIN GROUP (ORDER BY c.total),
               count(*) FILTER (WHERE c.selected)
        FROM {candidate} c JOIN {injection} j ON j.id = c.injection_id
        WHERE c.graph_id = %(graph)s AND j.graph_id = %(graph)s
              AND j.created_at >= %(start)s AND j.created_at < %(end)s
        """)

# The same totals in %(bins)s bins of %(width)s from %(lo)s: (bin, count).
ROLLUP_SCORE_BINS = statement("""
            SELECT least(width_bucket(c.total, %(lo)s, %(lo)s + %(width)s * %(bins)s, %(bins)s), %(bins)s) AS b,
                   count(*)
            FROM {candidate} c JOIN {injection} j ON j.id = c.injection_id
            WHERE c.graph_id = %(graph)s AND j.graph_id = %(graph)s
              AND j.created_at >= %(start)s AND j.created_at < %(end)s
            GROUP BY b
            """)

# The day's weight changes by batch kind, edge type (``(node)`` for a node's) and field. Every table filtered by
# graph_id, the joined batch and edge too (a history row's batch and edge are of its graph: the same rows).
ROLLUP_UPDATES = statement("""
        SELECT b.kind, coalesce(t.name, '(node)'), w.field, count(*)
        FROM {history} w
        JOIN {batch} b ON b.id = w.batch_id AND b.graph_id = %(graph)s
        LEFT JOIN {edge} e ON e.id = w.edge_id AND e.graph_id = %(graph)s
        LEFT JOIN {edge_type} t ON t.id = e.edge_type_id
        WHERE w.graph_id = %(graph)s AND w.created_at >= %(start)s AND w.created_at < %(end)s
        GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        """)

# The edges' weights as they stood at the end of the day (``end``), the CTE ``asof`` of both statements below: an
# edge's value is the ``before`` of its first change at or after ``end`` (the value that change replaced), else
# its stored value. So a day rolled up later (a backfill, a recomputation) shows that day's weights, not today's.
# Edges created after the day are left out; the archived flag is today's (archiving is not in the weight history).
_ASOF = """
    WITH later AS (
        SELECT DISTINCT ON (h.edge_id, h.field) h.edge_id, h.field, h.before
        FROM {history} h
        WHERE h.graph_id = %(graph)s AND h.edge_id IS NOT NULL AND h.created_at >= %(end)s
        ORDER BY h.edge_id, h.field, h.created_at, h.batch_id, h.change_id NULLS LAST, h.block_id, h.seq
    ),
    asof AS (
        SELECT e.id, e.edge_type_id,
               coalesce(lw.before, e.weight) AS weight, coalesce(lf.before, e.feedback_weight) AS feedback_weight
        FROM {edge} e
        LEFT JOIN later lw ON lw.edge_id = e.id AND lw.field = 'weight'
        LEFT JOIN later lf ON lf.edge_id = e.id AND lf.field = 'feedback_weight'
        WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.created_at < %(end)s
    )"""

# Weight and feedback_weight by edge type at the day's end: count, mean, min, max, p50 of each.
ROLLUP_WEIGHTS = statement(
    """{asof}
        SELECT t.name, count(*),
               avg(e.weight), min(e.weight), max(e.weight), percentile_cont(0.5) WITHIN GROUP (ORDER BY e.weight),
               avg(e.feedback_weight), min(e.feedback_weight), max(e.feedback_weight),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY e.feedback_weight)
        FROM asof e JOIN {edge_type} t ON t.id = e.edge_type_id
        GROUP BY t.name ORDER BY t.name
        """,
    asof=_ASOF,
)

# Their histograms over [0, 1] in %(bins)s bins: (edge type, field, bin, count).
ROLLUP_WEIGHT_BINS = statement(
    """{asof}
        SELECT t.name, f.field, least(width_bucket(f.value, 0.0, 1.0, %(bins)s), %(bins)s), count(*)
        FROM asof e JOIN {edge_type} t ON t.id = e.edge_type_id
        CROSS JOIN LATERAL (VALUES ('weight', e.weight), ('feedback_weight', e.feedback_weight)) AS f(field, value)
        GROUP BY 1, 2, 3
        """,
    asof=_ASOF,
)

# Of the sessions with an injection that day: how many, and how many used (an explicit or implicit use, not
# path credit) at least one of their top %(k)s ranked selected candidates. Every table filtered by graph_id.
ROLLUP_TOP_USED = statement("""
        WITH s AS (
            SELECT DISTINCT j.session_id FROM {injection} j
            WHERE j.graph_id = %(graph)s AND j.created_at >= %(start)s AND j.created_at < %(end)s
        ),
        top AS (
            SELECT j.session_id, c.node_id, c.edge_id FROM {candidate} c
            JOIN {injection} j ON j.id = c.injection_id AND j.graph_id = %(graph)s
            WHERE j.session_id IN (SELECT session_id FROM s)
              AND c.graph_id = %(graph)s AND c.selected AND c.rank <= %(k)s
        )
        SELECT (SELECT count(*) FROM s),
               (SELECT count(DISTINCT top.session_id) FROM top JOIN {use_event} u
                  ON u.session_id = top.session_id AND u.graph_id = %(graph)s AND u.signal IN ('explicit', 'implicit')
                 AND u.source <> 'path'
                 AND (u.node_id = top.node_id OR u.edge_id = top.edge_id))
        """)

# The sessions whose outcome was reported that day, by outcome.
ROLLUP_OUTCOMES = statement("""
        SELECT outcome, count(*) FROM {session}
        WHERE graph_id = %(graph)s AND outcome_at >= %(start)s AND outcome_at < %(end)s
        GROUP BY outcome ORDER BY outcome
        """)

# ROLLUP_SCORES by the session's owner (the agent): owner, count, mean, spread, p10/p50/p90.
ROLLUP_AGENT_SCORES = statement("""
        SELECT s.owner_id, count(*), avg(c.total), stddev_pop(c.total),
               percentile_cont(0.1) WITHIN GROUP (ORDER BY c.total),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY c.total),
               percentile_cont(0.9) WITHIN GROUP (ORDER BY c.total)
        FROM {candidate} c
        JOIN {injection} j ON j.id = c.injection_id
        JOIN {session} s ON s.id = j.session_id
        WHERE c.graph_id = %(graph)s AND j.graph_id = %(graph)s AND s.graph_id = %(graph)s
              AND j.created_at >= %(start)s AND j.created_at < %(end)s
        GROUP BY s.owner_id
        """)

# ROLLUP_TOP_USED by the session's owner: owner, sessions, used.
ROLLUP_AGENT_TOP_USED = statement("""
        WITH s AS (
            SELECT DISTINCT j.session_id FROM {injection} j
            WHERE j.graph_id = %(graph)s AND j.created_at >= %(start)s AND j.created_at < %(end)s
        )
        SELECT a.owner_id, count(*),
               count(*) FILTER (WHERE EXISTS (
                   SELECT 1 FROM {candidate} c
                   JOIN {injection} j ON j.id = c.injection_id
                   JOIN {use_event} u ON u.session_id = j.session_id AND u.graph_id = %(graph)s
                        AND u.signal IN ('explicit', 'implicit') AND u.source <> 'path'
                        AND (u.node_id = c.node_id OR u.edge_id = c.edge_id)
                   WHERE j.session_id = s.session_id AND j.graph_id = %(graph)s AND c.graph_id = %(graph)s
                         AND c.selected AND c.rank <= %(k)s))
        FROM s JOIN {session} a ON a.id = s.session_id AND a.graph_id = %(graph)s
        GROUP BY a.owner_id
        """)

# ROLLUP_OUTCOMES by the session's owner: owner, outcome, count.
ROLLUP_AGENT_OUTCOMES = statement("""
        SELECT owner_id, outcome, count(*) FROM {session}
        WHERE graph_id = %(graph)s AND outcome_at >= %(start)s AND outcome_at < %(end)s
        GROUP BY owner_id, outcome
        """)

# The graph's live nodes at rollup time.
ROLLUP_LIVE_NODES = statement("SELECT count(*) FROM {node} WHERE graph_id = %(graph)s AND NOT archived")
