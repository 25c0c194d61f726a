"""The per-organization audit hash chain: append and verify.

hash = sha256(prev_hash || RFC 8785 canonical JSON of {seq, time, actor, action, scope, payload}).
Appends take a transaction-scoped advisory lock per organization, so concurrent writers queue
instead of forking the chain; the unique (organization, seq) constraint is the backstop.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

import rfc8785
from django.conf import settings
from django.db import connection, transaction
from django.utils.module_loading import import_string
from psycopg import sql as psql

from graphadmin import anchor as anchors
from graphadmin import clock
from graphadmin.models import AuditCheckpoint, AuditEvent, Organization
from graphadmin.models.sql import (
    advisory_lock,
    column,
    columns,
    execute,
    fetch,
    fetch_all,
    placeholders,
    statement,
)
from graphadmin.runtime.locks import AdvisoryLock

GENESIS = "0" * 64


def actor_label(actor) -> str:
    """A stable text label for whoever acted: a user, or a string such as 'task:decay'."""
    if actor is None:
        return "system"
    if isinstance(actor, str):
        return actor
    return f"user:{actor.get_username()}"


def _canonical_time(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def compute_hash(prev_hash: str, seq: int, created_at: datetime, actor: str, action: str, scope, payload) -> str:
    """The hash of one link, from its predecessor's hash and its own canonical content."""
    body = rfc8785.dumps(
        {
            "seq": seq,
            "time": _canonical_time(created_at),
            "actor": actor,
            "action": action,
            "scope": scope,
            "payload": payload,
        }
    )
    return hashlib.sha256(prev_hash.encode("ascii") + body).hexdigest()


class Deferred:
    """Events appended inside ``deferred()``: chained and written together by ``flush`` (one lock, one
    read of the chain's head and one INSERT per organization, instead of three statements per event).

    For a caller that appends many events in one transaction (the report drain: one event per
    report's batch). ``mark`` and ``undo_to`` drop the events of a part that rolled back to its
    savepoint, so only events whose changes stand are chained.
    """

    def __init__(self):
        self.events: list[AuditEvent] = []

    def mark(self) -> int:
        return len(self.events)

    def undo_to(self, mark: int) -> None:
        del self.events[mark:]

    def flush(self) -> list[AuditEvent]:
        """Chain and insert the collected events (in the caller's transaction), oldest first; empties the list."""
        events, self.events = self.events, []
        by_org: dict[int, list[AuditEvent]] = {}
        for event in events:
            by_org.setdefault(event.organization_id, []).append(event)
        now = clock.now()
        with transaction.atomic(savepoint=False):
            for org_id in sorted(by_org):
                advisory_lock(AdvisoryLock.AUDIT, org_id)  # one append at a time per organization
                last = fetch(LAST_EVENT_SQL, {"organization": org_id})
                seq, prev_hash = (last[0], last[1]) if last else (0, GENESIS)
                for event in by_org[org_id]:
                    seq += 1
                    event.seq, event.created_at, event.prev_hash = seq, now, prev_hash
                    event.hash = compute_hash(
                        prev_hash, seq, now, event.actor, event.action, event.scope, event.payload
                    )
                    prev_hash = event.hash
                _insert_many(by_org[org_id])
        return events


_DEFERRED: ContextVar[Deferred | None] = ContextVar("audit_deferred", default=None)


@contextmanager
def deferred():
    """Within this block ``append`` collects its events in the returned ``Deferred`` instead of
    writing them; the caller flushes it before its transaction commits (events not flushed are lost)."""
    collector = Deferred()
    token = _DEFERRED.set(collector)
    try:
        yield collector
    finally:
        _DEFERRED.reset(token)


def append(organization, actor, action: str, payload: dict, scope: dict | None = None) -> AuditEvent:
    """Append one event to the organization's chain, inside the caller's transaction if any.

    ``payload`` must be JSON (finite numbers only). Serialised per organization by an advisory lock.
    Inside ``deferred()`` the event is collected, unsaved, and chained by the collector's ``flush``.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    scope = scope or {}
    collector = _DEFERRED.get()
    if collector is not None:
        event = AuditEvent(
            organization_id=org_id, actor=actor_label(actor), action=action, scope=scope, payload=payload
        )
        collector.events.append(event)
        return event
    # Inside the caller's transaction no savepoint is needed (nothing here is retried on error, and
    # a failed append must fail the whole change it records): two round trips saved per append.
    with transaction.atomic(savepoint=False):
        # The lock is its own statement, taken before the last event is read: under READ COMMITTED a
        # statement's snapshot is taken when it starts, so a read in the same statement as the lock
        # could miss the event of the writer it waited for, and fork the chain.
        advisory_lock(AdvisoryLock.AUDIT, org_id)  # one append at a time per organization
        # Plain SQL: this read is on every write path, and building it through the ORM cost more than running it.
        last = fetch(LAST_EVENT_SQL, {"organization": org_id})
        seq = last[0] + 1 if last else 1
        prev_hash = last[1] if last else GENESIS
        # Microsecond precision is what PostgreSQL stores; truncate now so verify recomputes the same.
        now = clock.now()
        label = actor_label(actor)
        return _insert(
            AuditEvent(
                organization_id=org_id,
                seq=seq,
                created_at=now,
                actor=label,
                action=action,
                scope=scope,
                payload=payload,
                prev_hash=prev_hash,
                hash=compute_hash(prev_hash, seq, now, label, action, scope, payload),
            )
        )


# The organization's last event (the chain's head), read under the advisory lock.
LAST_EVENT_SQL = statement(
    "SELECT seq, hash FROM {audit_event} WHERE organization_id = %(organization)s ORDER BY seq DESC LIMIT 1"
)

# One event: every concrete column but the id, each a bound parameter named for its column; the new id returned.
_EVENT_FIELDS = [f for f in AuditEvent._meta.concrete_fields if not f.primary_key]
INSERT_EVENT_SQL = statement(
    "INSERT INTO {audit_event} ({columns}) VALUES ({values}) RETURNING {pk}",
    columns=columns(AuditEvent, fields=_EVENT_FIELDS),
    values=placeholders(f.column for f in _EVENT_FIELDS),
    pk=column(AuditEvent, AuditEvent._meta.pk.name),
)


def _event_params(event: AuditEvent, suffix: str = "") -> dict:
    """The bound values of one event's row (``INSERT_EVENT_SQL``), each named for its column (and ``suffix``)."""
    return {f.column + suffix: f.get_db_prep_save(getattr(event, f.attname), connection) for f in _EVENT_FIELDS}


def _insert(event: AuditEvent) -> AuditEvent:
    """INSERT the event in plain SQL and set its id; returns it, saved.

    Every write path appends an event, and ``Model.save`` costs about as much again as the
    statement itself. AuditEvent has no ``save`` override and no signal receivers (a receiver added
    later would not see events inserted here).
    """
    (event.pk,) = fetch(INSERT_EVENT_SQL, _event_params(event))
    event._state.adding, event._state.db = False, connection.alias
    return event


def _insert_many(events: list[AuditEvent]) -> None:
    """INSERT chained events in one statement (``INSERT_EVENT_SQL``'s columns, one row each) and set their ids."""
    if not events:
        return
    # One row of placeholders per event (``%(column_n)s``): the statement's shape depends on how many there are.
    rows = psql.SQL(", ").join(
        psql.SQL("({})").format(placeholders(f"{f.column}_{n}" for f in _EVENT_FIELDS)) for n in range(len(events))
    )
    insert = statement(
        "INSERT INTO {audit_event} ({columns}) VALUES {rows} RETURNING {pk}, {seq}",
        columns=columns(AuditEvent, fields=_EVENT_FIELDS),
        rows=rows,
        pk=column(AuditEvent, AuditEvent._meta.pk.name),
        seq=column(AuditEvent, "seq"),
    )
    params = {key: value for n, e in enumerate(events) for key, value in _event_params(e, f"_{n}").items()}
    ids = dict((seq, pk) for pk, seq in fetch_all(insert, params))
    for event in events:
        event.pk = ids[event.seq]
        event._state.adding, event._state.db = False, connection.alias


@dataclass(frozen=True)
class Verification:
    """The result of walking one chain: ok, how many events, and the first broken seq if any."""

    ok: bool
    count: int
    broken_at: int | None = None
    reason: str = ""

    def as_dict(self) -> dict:
        return {"ok": self.ok, "count": self.count, "broken_at": self.broken_at, "reason": self.reason}


def ledger_checks() -> list:
    """The checks of other ledgers against the chain that a full ``verify`` runs after its walk.

    Named in ``settings.AUDIT_LEDGER_CHECKS`` by dotted path, since they belong to the apps that own those
    ledgers (``feedback.ledger.check_batches_audited``: every UpdateBatch has exactly one event), which the
    core does not import. Each takes an organization id and returns a reason, or "" when sound.
    """
    return [import_string(path) for path in getattr(settings, "AUDIT_LEDGER_CHECKS", ())]


def verify(organization, full: bool = True) -> Verification:
    """Walk the organization's chain in seq order and name the first broken link. Never writes.

    Detects an edited row (its hash no longer matches its content), a deleted row (a gap in seq,
    or a prev_hash that does not match its predecessor) and a reordered chain. The organization's
    checkpoint (the head the last ``advance_checkpoint`` proved) is checked too: a full walk fails when
    the chain ends before it (a deleted tail) or its event disagrees with its hash. So is its last
    anchor (``graphadmin.anchor``, a head recorded outside the database): a chain rewritten and
    rehashed whole, checkpoint included, still disagrees with it. A full walk then runs the registered
    ledger checks (every UpdateBatch has exactly one audit event). ``full=False`` starts from the
    checkpoint (after checking the checkpointed and the anchored events are unchanged), which keeps
    dashboard badges cheap.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    prev_hash, expected_seq, count = GENESIS, 1, 0
    rows = AuditEvent.objects.filter(organization_id=org_id)
    checkpoint = AuditCheckpoint.objects.filter(organization_id=org_id).first()
    try:
        anchor = anchors.last_anchor(org_id)
    except OSError as exc:
        # Unreadable anchors are no pass: a file made unreadable would otherwise switch the check off.
        return Verification(False, 0, None, f"the audit anchor file cannot be read: {exc}")
    if anchor is not None and not full:
        anchored = rows.filter(seq=anchor.seq).values_list("hash", flat=True).first()
        if anchored != anchor.hash:
            return Verification(False, 0, anchor.seq, _anchor_reason(anchor, anchored is None))
    if checkpoint is not None and not full:
        checkpointed = rows.filter(seq=checkpoint.seq).values_list("hash", flat=True).first()
        if checkpointed != checkpoint.hash:
            return Verification(False, 0, checkpoint.seq, "the last verified event was changed or removed")
        prev_hash, expected_seq, count = checkpoint.hash, checkpoint.seq + 1, checkpoint.seq
        rows = rows.filter(seq__gt=checkpoint.seq)
    columns = ("seq", "created_at", "actor", "action", "scope", "payload", "prev_hash", "hash")
    for seq, created_at, actor, action, scope, payload, stored_prev, stored_hash in (
        rows.order_by("seq").values_list(*columns).iterator(chunk_size=2000)
    ):
        count += 1
        if seq != expected_seq:
            return Verification(False, count, expected_seq, f"seq {expected_seq} is missing (next found: {seq})")
        if stored_prev != prev_hash:
            return Verification(False, count, seq, "prev_hash does not match the previous event's hash")
        if compute_hash(prev_hash, seq, created_at, actor, action, scope, payload) != stored_hash:
            return Verification(False, count, seq, "content does not match its hash")
        if checkpoint is not None and seq == checkpoint.seq and stored_hash != checkpoint.hash:
            return Verification(False, count, seq, "the checkpointed event disagrees with the checkpoint's hash")
        if anchor is not None and seq == anchor.seq and stored_hash != anchor.hash:
            return Verification(False, count, seq, _anchor_reason(anchor, False))
        prev_hash, expected_seq = stored_hash, seq + 1
    if checkpoint is not None and expected_seq <= checkpoint.seq:
        return Verification(
            False,
            count,
            expected_seq,
            f"the chain ends at seq {expected_seq - 1}, before the checkpoint at seq {checkpoint.seq}: "
            "events were removed",
        )
    if anchor is not None and expected_seq <= anchor.seq:
        return Verification(False, count, expected_seq, _anchor_reason(anchor, True))
    if full:
        for check in ledger_checks():
            if reason := check(org_id):
                return Verification(False, count, None, reason)
    return Verification(True, count)


def _anchor_reason(anchor, missing: bool) -> str:
    where = f"the anchor of seq {anchor.seq} taken at {anchor.anchored_at} (outside the database)"
    if missing:
        return f"the chain ends before {where}: events were removed"
    return f"the event at seq {anchor.seq} disagrees with {where}: the chain was rewritten"


# Upsert that only ever moves a checkpoint forward (the table's trigger refuses a lower seq anyway).
ADVANCE_CHECKPOINT_SQL = statement(
    "INSERT INTO {audit_checkpoint} (organization_id, seq, hash, verified_at)"
    " VALUES (%(organization)s, %(seq)s, %(hash)s, %(verified_at)s) "
    "ON CONFLICT (organization_id) DO UPDATE "
    "SET seq = EXCLUDED.seq, hash = EXCLUDED.hash, verified_at = EXCLUDED.verified_at "
    "WHERE {audit_checkpoint}.seq <= EXCLUDED.seq"
)


def advance_checkpoint(organization) -> Verification:
    """Fully verify the organization's chain and, if it holds, move its checkpoint to the chain's head.

    The one writer of checkpoints: the hourly ``verify_audit_chains`` task and ``manage.py verify_audit
    --checkpoint`` call it; reads (the API's verify, the badges, the plain command) never write. A broken
    chain leaves the checkpoint where it was; a checkpoint never moves back.
    """
    org_id = organization if isinstance(organization, int) else organization.pk
    result = verify(org_id, full=True)
    if result.ok and result.count:
        head = AuditEvent.objects.filter(organization_id=org_id, seq=result.count).values_list("hash", flat=True)
        with transaction.atomic():
            params = {"organization": org_id, "seq": result.count, "hash": head.get(), "verified_at": datetime.now(UTC)}
            execute(ADVANCE_CHECKPOINT_SQL, params)
    return result


def anchor_heads(organizations=None) -> dict[str, Verification]:
    """Fully verify each organization's chain, advance its checkpoint and anchor its head outside the database.

    Only a chain that holds (against its checkpoint and its last anchor) is anchored, and only when its
    head moved since its last anchor; all anchors of one run go out in one append
    (``graphadmin.anchor.write_anchors``). Called by the hourly ``verify_audit_chains`` task and by
    ``manage.py anchor_audit``. Returns each organization's verification, by slug.
    """
    results, heads = {}, []
    for org in organizations if organizations is not None else Organization.objects.order_by("slug"):
        result = advance_checkpoint(org)
        results[org.slug] = result
        if not (result.ok and result.count):
            continue
        seq, hash_, created_at = (
            AuditEvent.objects.filter(organization_id=org.pk, seq=result.count)
            .values_list("seq", "hash", "created_at")
            .get()
        )
        last = anchors.last_anchor(org.pk)
        if last is None or (last.seq, last.hash) != (seq, hash_):
            heads.append({"organization": org.pk, "slug": org.slug, "seq": seq, "hash": hash_, "time": created_at})
    anchors.write_anchors(heads)
    return results
