"""No SQL in the feedback app is built by pasting values into its text (DESIGN.md: "SQL you can read").

Statements are whole strings, values are bound (``%(name)s``), and identifiers go in through
``psycopg.sql`` (``sql.SQL(...).format(sql.Identifier(...))``). This test reads the source (no
database): it fails on an f-string, ``str.format``, ``%`` formatting, ``+`` concatenation or
``.replace`` applied to a string that holds SQL. Migrations are frozen history and are not read.
"""

import ast
import pathlib
import re

import feedback

SQL = re.compile(
    r"\b(SELECT|INSERT INTO|UPDATE|DELETE FROM|WHERE|JOIN|VALUES|RETURNING|FROM|CREATE TABLE|ALTER TABLE|DROP TABLE)\b"
)
ROOT = pathlib.Path(feedback.__file__).parent


def _text(node) -> str:
    """The literal text of a string constant or the literal parts of an f-string ('' otherwise)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return ""


def pasted_sql(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place ``source`` builds SQL text from something that is not a literal."""
    tree = ast.parse(source)
    # Names bound to SQL literals anywhere in the module (``sql = "SELECT ..."; sql.format(...)``).
    holds_sql = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and SQL.search(_text(n.value))
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    def is_sql(node) -> bool:
        return bool(SQL.search(_text(node))) or (isinstance(node, ast.Name) and node.id in holds_sql)

    found = []
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.JoinedStr)
            and SQL.search(_text(n))
            and any(isinstance(v, ast.FormattedValue) for v in n.values)
        ):
            found.append((n.lineno, "f-string"))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("format", "replace"):
            if is_sql(n.func.value) or any(is_sql(a) for a in n.args):
                found.append((n.lineno, f".{n.func.attr}()"))
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and is_sql(n.left):
            found.append((n.lineno, "% formatting"))
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (is_sql(n.left) or is_sql(n.right)):
            if not all(isinstance(side, ast.Constant) for side in (n.left, n.right)):
                found.append((n.lineno, "+ concatenation"))
    return sorted(found)


def test_the_detector_finds_pasted_values_and_accepts_composed_sql():
    bad = """
lr = 0.1
a = f"UPDATE t SET w = w + {lr!r} * (1 - w)"
b = "SELECT p.outcome_{o} FROM p".format(o=outcome)
c = "SELECT * FROM t WHERE id = %d" % ident
d = "SELECT * FROM t WHERE field = '" + field + "'"
query = "UPDATE t SET w = i.before"
e = query.replace("i.before", "t.w")
"""
    assert [what for _line, what in pasted_sql(bad)] == [
        "f-string",
        ".format()",
        "% formatting",
        "+ concatenation",
        ".replace()",
    ]
    good = """
from psycopg import sql
Q = sql.SQL("UPDATE {table} SET {column} = %(value)s WHERE id = %(id)s").format(
    table=sql.Identifier(Model._meta.db_table), column=sql.Identifier(name))
R = "SELECT 1 " "FROM t WHERE id = %(id)s"
message = f"batch {pk} has already been rolled back."
"""
    assert pasted_sql(good) == []


def test_no_feedback_module_pastes_values_into_sql():
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        places = pasted_sql(path.read_text())
        if places:
            found[str(path.relative_to(ROOT.parent))] = places
    assert found == {}
