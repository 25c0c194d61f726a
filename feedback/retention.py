"""Retention of the weight history: monthly partitions, created ahead and expired whole.

Both history tables (WeightChange rows, migration 0006, and WeightChangeBlock, migration 0007) are
partitioned by month of ``created_at``. ``ensure_partitions`` creates the monthly partitions a
period needs (the beat task keeps three months ahead); ``do_expire_history`` drops every partition that ends
on or before the retention cutoff, in both tables, and records each drop in the audit chain of
every organization that had rows in it (how many, which months). Expiry never deletes rows one by
one: the append-only triggers stay, and only whole months go. Rows that fall outside every monthly
partition sit in a DEFAULT partition, which is never dropped.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, date, datetime, timedelta

from django.db import connection as default_connection
from django.db import transaction
from psycopg import sql

from graphadmin import audit
from graphadmin.models import Graph

log = logging.getLogger(__name__)

# Each partitioned history table and the name its expiry is audited under.
LEDGERS = {"feedback_weightchange": "weight_changes", "feedback_weightchangeblock": "weight_change_blocks"}
MONTHS_AHEAD = 3
_NAME = re.compile(r"^(feedback_\w+)_(\d{4})_(\d{2})$")


def _month_start(moment) -> date:
    return date(moment.year, moment.month, 1)


def _next_month(day: date) -> date:
    return date(day.year + (day.month == 12), day.month % 12 + 1, 1)


def partition_name(month: date, parent: str = "feedback_weightchange") -> str:
    return f"{parent}_{month.year:04d}_{month.month:02d}"


def existing_partitions(connection=None, parent: str = "feedback_weightchange") -> dict[str, date]:
    """Monthly partitions of one history table: name -> first day of the month."""
    with (connection or default_connection).cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s",
            [parent],
        )
        names = [row[0] for row in cur.fetchall()]
    return {
        n: date(int(m.group(2)), int(m.group(3)), 1) for n in names if (m := _NAME.match(n)) and m.group(1) == parent
    }


def refuse_truncate_sql(table: str) -> str:
    """The statement-level TRUNCATE refusal every history table and partition carries (migration 0010)."""
    return (
        sql.SQL(
            "CREATE TRIGGER feedback_history_refuse_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION graphadmin_refuse_truncate()"
        )
        .format(table=sql.Identifier(table))
        .as_string()
    )


def _refuses_truncate(connection, table: str) -> bool:
    """Whether the table carries the TRUNCATE refusal (not yet while migrations 0006 and 0007 run)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE c.relname = %s AND t.tgname = 'feedback_history_refuse_truncate')",
            [table],
        )
        return cur.fetchone()[0]


def _has_function(connection, name: str) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT to_regprocedure(%s) IS NOT NULL", [f"{name}(text, date)"])
        return cur.fetchone()[0]


def ensure_partitions(
    since=None, months_ahead: int = MONTHS_AHEAD, connection=None, parents=tuple(LEDGERS)
) -> list[str]:
    """Create each history table's monthly partitions from ``since`` (default: this month) to ``months_ahead``
    months on.

    A month whose rows already sit in the DEFAULT partition is skipped (PostgreSQL refuses to
    create it) and logged; those rows stay until the default partition is split by hand.
    """
    connection = connection or default_connection
    today = _month_start(datetime.now(UTC))
    month = _month_start(since) if since else today
    last = today
    for _ in range(months_ahead):
        last = _next_month(last)
    first = month
    created = []
    # From migration 0013 on, partitions are made by the table owner's function (the application role may
    # not run DDL); migrations 0006 and 0007, before it, run as the owner and create them directly.
    by_function = _has_function(connection, "feedback_history_create_partition")
    for parent in parents:
        have = set(existing_partitions(connection, parent).values())
        refusing = _refuses_truncate(connection, parent)
        month = first
        while month <= last:
            if month not in have:
                name, upper = partition_name(month, parent), _next_month(month)
                with connection.cursor() as cur:
                    # Through the parent, not the default partition by name (the application role may
                    # read only the parent): with no partition for the month, its rows are in the default one.
                    cur.execute(
                        sql.SQL(
                            "SELECT EXISTS (SELECT 1 FROM {parent} WHERE created_at >= %s AND created_at < %s)"
                        ).format(parent=sql.Identifier(parent)),
                        [month, upper],
                    )
                    if cur.fetchone()[0]:
                        log.warning("weight history for %s is in the default partition; not creating %s", month, name)
                    elif by_function:
                        cur.execute("SELECT feedback_history_create_partition(%s, %s)", [parent, month])
                        created.append(name)
                    else:
                        cur.execute(
                            sql.SQL("CREATE TABLE {name} PARTITION OF {parent} FOR VALUES FROM (%s) TO (%s)").format(
                                name=sql.Identifier(name), parent=sql.Identifier(parent)
                            ),
                            [month, upper],
                        )
                        if refusing:
                            cur.execute(refuse_truncate_sql(name))
                        created.append(name)
            month = _next_month(month)
    return created


def do_expire_history(retention_days: int, *, actor, now: datetime | None = None) -> list[dict]:
    """Drop every monthly partition (of both history tables) that ends on or before now - retention_days.

    Each drop is audited. Returns one dict per dropped partition: name, ledger, month, rows, rows per
    organization.
    """
    if retention_days <= 0:
        return []
    cutoff = (now or datetime.now(UTC)) - timedelta(days=retention_days)
    dropped = []
    months = [(month, parent, name) for parent in LEDGERS for name, month in existing_partitions(parent=parent).items()]
    for month, parent, name in sorted(months):
        upper = _next_month(month)
        if datetime(upper.year, upper.month, upper.day, tzinfo=UTC) > cutoff:
            continue
        with transaction.atomic():
            with default_connection.cursor() as cur:
                # Counted through the parent over the month (pruned to the partition): the application
                # role reads the parent only. The drop is the owner's function (migration 0013), which
                # refuses a month not over yet.
                cur.execute(
                    sql.SQL(
                        "SELECT g.organization_id, count(*) FROM {parent} w JOIN {graph} g ON g.id = w.graph_id "
                        "WHERE w.created_at >= %s AND w.created_at < %s "
                        "GROUP BY g.organization_id ORDER BY g.organization_id"
                    ).format(parent=sql.Identifier(parent), graph=sql.Identifier(Graph._meta.db_table)),
                    [month, upper],
                )
                per_org = dict(cur.fetchall())
                cur.execute("SELECT feedback_history_drop_partition(%s, %s)", [parent, month])
            payload = {
                "ledger": LEDGERS[parent],
                "partition": name,
                "month": month.isoformat(),
                "retention_days": retention_days,
            }
            for org_id, rows in per_org.items():
                audit.append(org_id, actor, "ledger.expire", {**payload, "rows": rows})
        total = sum(per_org.values())
        log.info("expired weight history partition", extra={"partition": name, "rows": total})
        dropped.append(
            {
                "partition": name,
                "ledger": LEDGERS[parent],
                "month": month.isoformat(),
                "rows": total,
                "per_organization": per_org,
            }
        )
    return dropped
