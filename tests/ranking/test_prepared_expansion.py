"""The expansion statement (EXPAND_SQL) is prepared once per connection (graphadmin.models.sql.prepared_cursor):
the same rows as Django's cursor with inlined values, bit for bit, on its first runs (plans made for the
values) and once PostgreSQL keeps one plan for any values (after five); DATABASE_PREPARED_STATEMENTS=0
sends it as every other statement."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from graphadmin.embeddings import embed_texts
from ranking import queries as sql

pytestmark = pytest.mark.django_db

QUESTION = "ranking weights in the graph"


def _expand(rg, starts):
    return sql.expand(
        rg["graph"].pk,
        starts,
        embed_texts([QUESTION])[0],
        2,
        50,
        extra=[rg["nodes"]["g"].pk],
        text=QUESTION,
        config="english",
        lexical=True,
    )


def _prepared_runs():
    """How many times this connection ran a prepared expansion (earlier tests on it may have)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%f0 AS%"],
        )
        return cur.fetchone()[0]


def test_the_prepared_expansion_gives_the_rows_of_the_inlined_one(rg, settings):
    starts_by_run = [[rg["nodes"][k].pk] for k in "abcae"] + [[rg["nodes"]["a"].pk, rg["nodes"]["e"].pk]] * 3
    before = _prepared_runs()
    settings.DATABASE_PREPARED_STATEMENTS = False
    inlined = [_expand(rg, starts) for starts in starts_by_run]
    assert _prepared_runs() == before
    settings.DATABASE_PREPARED_STATEMENTS = True
    for _ in range(2):  # past the five runs after which PostgreSQL may keep one plan for any values
        assert [_expand(rg, starts) for starts in starts_by_run] == inlined
    assert _prepared_runs() == before + 2 * len(starts_by_run)
    edges, _rows, bm25 = inlined[0]
    assert edges and bm25  # the comparison covers the expansion and BM25 (k1 and b bound as numeric)


def test_the_query_log_shows_the_prepared_statement(rg):
    with CaptureQueriesContext(connection) as captured:
        _expand(rg, [rg["nodes"]["a"].pk])
    (query,) = captured.captured_queries
    assert query["sql"] and "WITH f0" in query["sql"]
