"""Every SQL statement of the hot paths filters its graph-scoped tables by ``graph_id`` (docs/scaling.md).

The plan for more than one database server distributes the graph-scoped tables by ``graph_id`` (Citus):
a statement is then sent to the one server holding its graph only when every distributed table it
reads or writes is constrained by ``graph_id``. This test runs each hot path (context, search, a use
report, an outcome, a decay chunk, a rollback) against the real database, captures every statement
with its text, parses it with PostgreSQL's own parser (pglast, libpg_query) and checks each reference
to a distributed table:

* in SELECT, UPDATE and DELETE: a ``graph_id`` column of that table (by its alias) appears in a
  WHERE or JOIN condition (an unqualified ``graph_id`` counts when the statement names only one
  distributed table);
* in INSERT: ``graph_id`` is one of the inserted columns (the row carries its graph).

Every named statement of the feedback queries (``feedback/queries/``: weights, reports, reads) and the core's
named reads is also checked on its text alone, run or not.

The tables that stay whole on every server (reference tables: organizations, graphs, edge types,
policy revisions, users) and the audit chain (on the coordinator) are not checked.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from pglast import parse_sql

from feedback import actions as feedback_actions
from feedback import outbox
from feedback.models import AgentSession, InjectionCandidate, UpdateBatch
from feedback.queries import WEIGHTS, reads, reports, weights
from graphadmin import clock, embeddings, readiness

pytestmark = pytest.mark.django_db

# The tables distributed by graph_id in docs/scaling.md ("Distributed tables").
DISTRIBUTED = {
    "graphadmin_node",
    "graphadmin_edge",
    "graphadmin_nodestats",
    "graphadmin_edgestats",
    "graphadmin_nodelexeme",
    "graphadmin_nodelexicon",
    "feedback_agentsession",
    "feedback_contextinjection",
    "feedback_injectioncandidate",
    "feedback_useevent",
    "feedback_updatebatch",
    "feedback_weightchange",
    "feedback_weightchangeblock",
    "feedback_weighthistory",
    "feedback_dailymetric",
    "feedback_pendingreport",
}

_PLACEHOLDER = re.compile(r"%\(\w+\)s|%s")


def _parseable(text: str) -> str:
    """The statement with Django's and psycopg's placeholders as PostgreSQL's ($1, $2, ...)."""
    count = iter(range(1, 10_000))
    return _PLACEHOLDER.sub(lambda _: f"${next(count)}", text).replace("%%", "%")


def _walk(node, stop=()):
    """Every dict in a pglast tree (``Node.__call__`` form), not descending into nodes of the types in ``stop``."""
    if isinstance(node, dict):
        yield node
        if node.get("@") in stop:
            return
        for value in node.values():
            yield from _walk(value, stop)
    elif isinstance(node, list | tuple):
        for value in node:
            yield from _walk(value, stop)


_QUERIES = ("SelectStmt", "UpdateStmt", "DeleteStmt")


def _inside(node):
    """The dicts of ``node``'s own query level: not those of the subqueries it holds."""
    for child in node.values() if isinstance(node, dict) else node:
        yield from _walk(child, stop=_QUERIES)


def _from_items(items):
    """The tables and the join conditions of a FROM list (joins followed, subqueries not)."""
    tables, conditions = [], []
    stack = list(items or ())
    while stack:
        item = stack.pop()
        kind = item.get("@")
        if kind == "RangeVar":
            tables.append(item)
        elif kind == "JoinExpr":
            stack += [item["larg"], item["rarg"]]
            if "quals" in item:
                conditions.append(item["quals"])
    return tables, conditions


def unscoped_tables(text: str) -> list[str]:
    """The distributed tables of one statement that are not constrained by graph_id (empty: all are).

    Each query level (the statement, each CTE, each subquery) is checked on its own: the tables of
    its FROM list (and the UPDATE or DELETE target) against the ``graph_id`` columns of its WHERE,
    JOIN ... ON and HAVING conditions. Only tables named ``DISTRIBUTED`` are checked."""
    problems = []
    for raw in parse_sql(_parseable(text)):
        for level in _walk(raw.stmt(skip_none=True)):
            kind = level.get("@")
            if kind == "InsertStmt":
                columns = {c.get("name") for c in level.get("cols", ())}
                if level["relation"]["relname"] in DISTRIBUTED and "graph_id" not in columns:
                    problems.append(level["relation"]["relname"])
                continue
            if kind not in _QUERIES:
                continue
            tables, conditions = _from_items(level.get("fromClause", ()) + level.get("usingClause", ()))
            if kind != "SelectStmt":
                tables.append(level["relation"])
            conditions += [level[k] for k in ("whereClause", "havingClause") if k in level]
            tables = [t for t in tables if t.get("relname") in DISTRIBUTED]
            qualifiers, unqualified = set(), False
            for node in _inside(conditions):
                if node.get("@") == "ColumnRef":
                    parts = [f.get("sval", "*") for f in node.get("fields", ())]
                    if parts[-1] == "graph_id":
                        unqualified |= len(parts) == 1
                        qualifiers.add(parts[-2] if len(parts) > 1 else None)
            for t in tables:
                name = t.get("alias", {}).get("aliasname") or t["relname"]
                if name not in qualifiers and not (unqualified and len(tables) == 1):
                    problems.append(t["relname"])
    return problems


class Captured:
    def __init__(self):
        self.statements: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if isinstance(sql, bytes):
            sql = sql.decode()
        elif not isinstance(sql, str):  # psycopg.sql.Composed
            sql = sql.as_string(context["connection"].connection)
        self.statements.append(sql)
        return execute(sql, params, many, context)


def capture(run) -> list[str]:
    captured = Captured()
    with connection.execute_wrapper(captured):
        run()
    return captured.statements


def unscoped(path: str, statements: list[str]) -> list[str]:
    """One line per statement of ``path`` that leaves a distributed table unfiltered."""
    touching = [s for s in statements if any(t in s for t in DISTRIBUTED)]
    assert touching, f"{path}: no statement touched a distributed table (the capture is broken)"
    lines = []
    for statement in touching:
        tables = unscoped_tables(statement)
        if tables:
            lines.append(f"{path}: {sorted(set(tables))}: {' '.join(statement.split())[:300]}")
    return lines


def test_the_checker_catches_a_missing_filter():
    """The checker itself: a join, a subquery and an update without graph_id are caught, filtered ones pass."""
    assert unscoped_tables("SELECT 1 FROM graphadmin_edge e WHERE e.graph_id = %s AND e.id = %s") == []
    assert unscoped_tables("SELECT 1 FROM graphadmin_edge WHERE graph_id = %(g)s") == []
    assert (
        unscoped_tables('SELECT "graphadmin_edge"."id" FROM "graphadmin_edge" WHERE "graphadmin_edge"."graph_id" = %s')
        == []
    )
    assert unscoped_tables(
        "SELECT e.id FROM graphadmin_edge e JOIN graphadmin_node t ON t.id = e.target_id WHERE e.graph_id = %s"
    ) == ["graphadmin_node"]
    assert unscoped_tables(
        "SELECT e.graph_id FROM graphadmin_edge e WHERE NOT EXISTS "
        "(SELECT 1 FROM graphadmin_edgestats s WHERE s.edge_id = e.id) AND e.graph_id = %s"
    ) == ["graphadmin_edgestats"]
    assert unscoped_tables("UPDATE graphadmin_edge SET weight = 1 WHERE id = %s") == ["graphadmin_edge"]
    assert unscoped_tables("INSERT INTO feedback_useevent (graph_id, session_id) VALUES (%s, %s)") == []
    assert unscoped_tables("INSERT INTO feedback_useevent (session_id) VALUES (%s)") == ["feedback_useevent"]


def named_statements(module) -> dict[str, str]:
    """Every whole statement ``module`` names: its upper-case str constants (and dicts of them) composed by the
    toolkit (no ``{name}`` left: a fragment is checked inside the statements that use it), and, in the weights'
    module, the statement of each weight (``set_weight``, ``rollback_restore``, ``rollback_preview``)."""
    found = {}
    for name, value in vars(module).items():
        if not name.isupper() or name.startswith("_"):
            continue
        values = value.items() if isinstance(value, dict) else [(None, value)]
        for key, text in values:
            if isinstance(text, str) and "{" not in text and re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b", text):
                found[name if key is None else f"{name}[{key}]"] = text
    if module is weights:
        for target, field in WEIGHTS:
            for make in (weights.set_weight, weights.rollback_restore, weights.rollback_preview):
                found[f"{make.__name__}({target}, {field})"] = make(target, field)
    return found


QUERY_MODULES = (weights, reads, reports, readiness, embeddings)


def test_every_named_statement_filters_every_distributed_table_by_graph_id():
    """Beyond the hot paths below: every statement of the feedback queries (weights, reports, reads: the pages and
    the rollup too) and of the core's named reads, checked on its text, without running it."""
    problems, checked = [], 0
    for module in QUERY_MODULES:
        for name, text in named_statements(module).items():
            checked += 1
            tables = unscoped_tables(text)
            if tables:
                problems.append(f"{module.__name__}.{name}: {sorted(set(tables))}")
    assert checked > 70, checked  # the collection is not broken
    assert not problems, "statements not filtered by graph_id:\n" + "\n".join(problems)


def test_hot_paths_filter_every_distributed_table_by_graph_id(rg, api, alice):
    graph = rg["graph"]
    client = api(alice)
    start = rg["nodes"]["a"].pk

    def context():
        r = client.post(
            f"/api/graphs/{graph.pk}/context/",
            {"session": "scoped", "query": "vector search in postgres", "k": 1, "budget": 4, "start_nodes": [start]},
            format="json",
        )
        assert r.status_code == 201, r.content

    problems = unscoped("context", capture(context))

    def search():
        r = client.post(f"/api/graphs/{graph.pk}/search/", {"query": "ranking weights", "k": 5}, format="json")
        assert r.status_code == 200, r.content

    problems += unscoped("search", capture(search))

    session = AgentSession.objects.get(graph=graph, external_id="scoped")
    chosen = list(InjectionCandidate.objects.filter(injection__session=session, selected=True, node__isnull=False))
    assert chosen
    reports = f"/api/graphs/{graph.pk}/sessions/scoped/"

    def report(kind, body):
        # The request stores the report in the outbox (its poke of the drain runs on commit, which a
        # test transaction never reaches); the drain then applies it as the worker would.
        def run():
            r = client.post(reports + kind + "/", body, format="json")
            assert r.status_code == 202 and r.json()["status"] == "queued", r.content

        return run

    def drain():
        assert outbox.drain(graph.pk)["applied"] == 1

    items = [{"node": c.node_id, "signal": "explicit"} for c in chosen[:2]]
    problems += unscoped("uses (request)", capture(report("uses", {"items": items})))
    problems += unscoped("uses (drain)", capture(drain))
    uses_batch = UpdateBatch.objects.get(graph=graph, kind="reinforce")
    problems += unscoped("outcome (request)", capture(report("outcome", {"outcome": "accepted"})))
    problems += unscoped("outcome (drain)", capture(drain))
    assert UpdateBatch.objects.filter(graph=graph, kind="outcome").exists()

    def decay():
        later = clock.now() + timedelta(days=60)
        result = feedback_actions.do_decay(graph, actor=alice, now=later)
        assert result.status == "applied", result

    problems += unscoped("decay chunk", capture(decay))

    def rollback():
        result = feedback_actions.do_rollback_batch(uses_batch, actor=alice)
        assert result.status == "applied", result

    problems += unscoped("rollback", capture(rollback))
    assert not problems, "statements not filtered by graph_id:\n" + "\n".join(problems)
