"""Where a call's CPU goes, stage by stage, in this process and in its PostgreSQL backend (bench/profile_paths.py).

``Stages`` wraps named functions of the request path (found by dotted name; a name that no longer exists is
skipped and listed) and every SQL statement (Django's execute wrapper, labelled by verb and first table), and
adds up for each stage the CPU it used itself, its children excluded:

* ``web``: this process's CPU (``time.process_time``);
* ``db``: the CPU of the connection's PostgreSQL backend process, from ``/proc/<pid>/schedstat`` (nanoseconds;
  the database runs on this machine). 0 where the kernel does not let us read it.

What no wrapped stage claims is ``rest``: Django, DRF and middleware around the view. Each SELECT is also
run a second time on the driver's connection, past Django, and its CPU kept as that statement's floor (its
own work without the ORM's; not counted in any stage). Reads only: a write is shown without a floor.
Instrumentation is for the bench: nothing here is imported by the product.
"""

from __future__ import annotations

import importlib
import re
import time
from collections import defaultdict
from contextlib import contextmanager

_VERB = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)?(WITH|SELECT|INSERT|UPDATE|DELETE|COPY|SAVEPOINT|RELEASE|ROLLBACK)\b", re.I | re.S
)
# Reads that change something (a lock, a sequence, a setting) are not run a second time.
_SIDE_EFFECTS = re.compile(r"FOR UPDATE|FOR SHARE|advisory|nextval|set_config|INSERT|UPDATE|DELETE", re.I)
_TABLE = re.compile(r'\b(?:FROM|INTO|UPDATE|JOIN)\s+"?([a-z_][a-z0-9_]*)"?', re.I)


def statement_label(sql: str) -> str:
    """``SQL SELECT knox_authtoken``: the verb and the first table named (a CTE's first real table)."""
    verb = _VERB.match(sql or "")
    tables = [t for t in _TABLE.findall(sql or "") if not t.lower().startswith(("pg_", "unnest", "lateral"))]
    return f"SQL {(verb.group(1).upper() if verb else '?')} {tables[0] if tables else ''}".rstrip()


class Stages:
    def __init__(self, floors: bool = True):
        self.web = defaultdict(float)  # stage -> seconds of this process's CPU, its children excluded
        self.db = defaultdict(float)  # stage -> seconds of the backend's CPU, its children excluded
        self.calls = defaultdict(int)
        self.floor_web = defaultdict(float)
        self.floor_db = defaultdict(float)
        self.floor_calls = defaultdict(int)
        self.missing: list[str] = []
        self._stack: list[list] = []  # [name, web0, db0, child_web, child_db]
        self._excluded = [0.0, 0.0]  # floor runs: on no stage's bill
        self._patches: list[tuple[object, str, object]] = []
        self._floors = floors
        self._backend_pid = None

    # --- clocks ------------------------------------------------------------------------------------------
    def _db_clock(self) -> float:
        from django.db import connection

        raw = connection.connection
        if raw is None:
            return 0.0
        pid = raw.info.backend_pid
        try:
            with open(f"/proc/{pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e9
        except OSError:
            return 0.0

    def _clocks(self) -> tuple[float, float]:
        return time.process_time() - self._excluded[0], self._db_clock() - self._excluded[1]

    # --- stages ------------------------------------------------------------------------------------------
    @contextmanager
    def stage(self, name: str):
        web0, db0 = self._clocks()
        self._stack.append([name, web0, db0, 0.0, 0.0])
        try:
            yield
        finally:
            _, web0, db0, child_web, child_db = self._stack.pop()
            web1, db1 = self._clocks()
            web, db = web1 - web0, max(0.0, db1 - db0)
            self.web[name] += web - child_web
            self.db[name] += db - child_db
            self.calls[name] += 1
            if self._stack:
                self._stack[-1][3] += web
                self._stack[-1][4] += db

    def wrap(self, dotted: str, name: str) -> None:
        """Make ``module.attr`` or ``module.Class.method`` a stage called ``name``."""
        module_name, _, attr = dotted.rpartition(".")
        owner = None
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            mod, _, cls = module_name.rpartition(".")
            try:
                owner = getattr(importlib.import_module(mod), cls)
            except (ImportError, AttributeError):
                owner = None
        original = owner.__dict__.get(attr) if owner is not None else None
        if original is None:
            self.missing.append(dotted)
            return
        func = original.__func__ if isinstance(original, staticmethod | classmethod) else original
        stages = self

        def staged(*args, **kwargs):
            with stages.stage(name):
                return func(*args, **kwargs)

        staged.__wrapped__ = func
        if isinstance(original, staticmethod):
            staged = staticmethod(staged)
        elif isinstance(original, classmethod):
            staged = classmethod(staged)
        setattr(owner, attr, staged)
        self._patches.append((owner, attr, original))

    def unwrap(self) -> None:
        for owner, attr, original in reversed(self._patches):
            setattr(owner, attr, original)
        self._patches.clear()

    # --- SQL -----------------------------------------------------------------------------------------------
    def sql_wrapper(self, execute, sql, params, many, context):
        text = sql if isinstance(sql, str) else sql.as_string(context["connection"].connection)
        label = statement_label(text)
        with self.stage(label):
            result = execute(sql, params, many, context)
        readonly = label.startswith(("SQL SELECT", "SQL WITH")) and not _SIDE_EFFECTS.search(text)
        if self._floors and not many and readonly:
            self._floor(label, sql, params, context["connection"])
        return result

    def _floor(self, label, sql, params, connection) -> None:
        web0, db0 = time.process_time(), self._db_clock()
        with connection.connection.cursor() as cur:
            cur.execute(sql, params)
            cur.fetchall()
        web, db = time.process_time() - web0, max(0.0, self._db_clock() - db0)
        self._excluded[0] += web
        self._excluded[1] += db
        self.floor_web[label] += web
        self.floor_db[label] += db
        self.floor_calls[label] += 1

    def measure_floor(self, name: str, fn, repeat: int = 20) -> None:
        """A named floor measured outside any call: ``fn()`` ``repeat`` times (CPU of this process and the backend)."""
        fn()
        web0, db0 = time.process_time(), self._db_clock()
        for _ in range(repeat):
            fn()
        self.floor_web[name] += time.process_time() - web0
        self.floor_db[name] += max(0.0, self._db_clock() - db0)
        self.floor_calls[name] += repeat

    # --- the table -----------------------------------------------------------------------------------------
    def table(self, per: int, total_web: float, total_db: float, floors_by_stage: dict[str, str]) -> str:
        """Markdown rows: stage, calls per call, web ms, db ms, floor ms (per call of the profiled path)."""
        claimed_web = sum(self.web.values())
        rows = []
        names = sorted(self.web, key=lambda n: -(self.web[n] + self.db[n]))
        for name in names:
            rows.append((name, self.calls[name] / per, self.web[name] / per * 1e3, self.db[name] / per * 1e3))
        rows.append(("rest (Django, DRF, middleware)", 1.0, max(0.0, total_web - claimed_web) / per * 1e3, 0.0))
        out = [
            "| stage | calls per call | web CPU ms | db CPU ms | floor ms (web + db) | floor is |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, calls, web, db in rows:
            floor_name = floors_by_stage.get(name, name if name in self.floor_calls else "")
            if floor_name and self.floor_calls.get(floor_name):
                n = self.floor_calls[floor_name]
                f = (self.floor_web[floor_name] + self.floor_db[floor_name]) / n * 1e3 * max(1.0, calls)
                floor, what = f"{f:.2f}", ("the statement alone, past Django" if floor_name == name else floor_name)
            else:
                floor, what = "", ""
            out.append(f"| {name} | {calls:.1f} | {web:.2f} | {db:.2f} | {floor} | {what} |")
        out.append(f"| **total** | | **{total_web / per * 1e3:.2f}** | **{total_db / per * 1e3:.2f}** | | |")
        return "\n".join(out)
