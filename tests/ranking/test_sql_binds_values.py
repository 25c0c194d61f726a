"""SQL you can read: no value is pasted into SQL text (DESIGN.md, "SQL you can read").

A static check of the modules whose SQL was rewritten: SQL text (a string with two SQL keywords in
capitals) is never built with an f-string, ``str.format``, ``%`` or ``.replace``, nor glued to
another expression with ``+``; ``psycopg.sql.Literal`` (a value composed into the text) is not
used. Identifiers go through ``psycopg.sql.Identifier`` and values are bound parameters. The
checker itself is tested on bad code, so this test can fail.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKED = [
    "ranking/queries.py",
    "ranking/retrieval.py",
    "graphadmin/audit.py",
    "graphadmin/embeddings.py",
    "graphadmin/models/sql.py",
    "graphadmin/readiness.py",
    "graphadmin/runtime/embedded_db.py",
    "bench/common.py",
    "bench/generate.py",
    "bench/run.py",
]
SQL_WORDS = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|COPY|VALUES|WHERE|FROM|JOIN|SET|WITH|LIMIT)\b"
)


def _looks_like_sql(text: str) -> bool:
    # Two different keywords in capitals: "SELECT ... FROM", "UPDATE ... SET"; a log line with "raw UPDATE" is not SQL.
    return len(set(SQL_WORDS.findall(text))) >= 2


def _is_sql(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_like_sql(node.value)


def pasted_values(source: str) -> list[str]:
    """Where ``source`` builds SQL text from a value: one "line: what" entry per finding."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if _looks_like_sql(text) and any(isinstance(v, ast.FormattedValue) for v in node.values):
                found.append(f"{line}: f-string SQL")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_sql(node.left):
            found.append(f"{line}: % on SQL")
        elif (
            isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and (_is_sql(node.left) or _is_sql(node.right))
        ):
            found.append(f"{line}: SQL glued with +")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("format", "replace") and _is_sql(node.func.value):
                found.append(f"{line}: str.{node.func.attr} on SQL")
            if node.func.attr == "Literal":
                found.append(f"{line}: sql.Literal")
    return found


@pytest.mark.parametrize("path", CHECKED)
def test_no_value_is_pasted_into_sql(path):
    assert pasted_values((ROOT / path).read_text()) == []


@pytest.mark.parametrize(
    "bad",
    [
        'cur.execute(f"SELECT * FROM t WHERE id = {node_id}")',
        'cur.execute("SELECT * FROM t WHERE w > {lr!r}".format(lr=lr))',
        'cur.execute("SELECT * FROM t WHERE id = %d" % node_id)',
        'cur.execute("SELECT * FROM t WHERE g = %(graph)s".replace("%(graph)s", str(g)))',
        'cur.execute("SELECT * FROM t LIMIT " + str(n))',
        'sql.SQL("SELECT {v}").format(v=sql.Literal(value))',
    ],
)
def test_the_check_finds_a_pasted_value(bad):
    assert pasted_values(bad)


def test_the_check_lets_bound_values_and_identifiers_through():
    good = """
cur.execute("SELECT * FROM t WHERE id = %(id)s", {"id": node_id})
text = sql.SQL("SELECT * FROM {table} WHERE id = %s").format(table=sql.Identifier(Node._meta.db_table))
message = f"Unknown node(s): {missing}"
"""
    assert pasted_values(good) == []
