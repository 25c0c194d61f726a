"""Every advisory lock class the service takes, in one place.

Each lock is ``pg_advisory_xact_lock(class, id)`` (or its ``try`` form) on two int4 keys: the class below and the
id of the row it guards (an organization, a graph). The classes keep our locks apart from each other and from
any other user of advisory locks on the same database.

Never reuse or renumber a class: a process of the previous release still running beside a new one during a
deploy must take the same lock for the same thing, and a number freed by one lock and given to another would
make two unrelated writers queue behind each other (or, worse, each believe it holds the other's lock).
"""

from __future__ import annotations

from enum import IntEnum


class AdvisoryLock(IntEnum):
    # One audit chain append at a time per organization (graphadmin.audit; the id: the organization).
    AUDIT = 0x6A7D
    # One drain per graph (feedback.outbox.drain, feedback.queries.reports.try_drain_lock; the id: the graph).
    DRAIN = 0x6A7E
    # Memory calls on one graph queue behind each other (feedback.memory; the id: the graph). "mem".
    MEMORY = 0x6D656D
