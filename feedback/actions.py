"""The one write path for weights: reinforcement, outcome EMA, decay, normalisation, manual set, links, rollback.

Every ``do_*`` function here is the only way its change reaches the database (DESIGN.md: one write
path), and nothing else in this module writes. Each one:

- runs in one transaction (decay and normalize: one transaction per id-range chunk);
- takes the acting user, or a task label such as ``"task:decay"``, as the keyword-only ``actor``;
- writes one ``UpdateBatch`` (``ledger``), its history (``WeightChange`` rows, or ``WeightChangeBlock``
  arrays for the bulk writes over id ranges) and one ``AuditEvent``;
- changes weights with one set-based statement per step (``queries.weights``: no Python loop issuing
  per-row queries), computing the rules of ``rules``;
- returns a ``Result`` with node_updates, edge_updates, triplet_embeddings and duration_ms.

Lock order, everywhere: the session row, then edges by id, then nodes by id, then the
organization's audit advisory lock. Concurrent writers therefore queue instead of deadlocking, and
since each statement reads the *locked* value as ``before``, no update is lost. Rows are locked
``FOR NO KEY UPDATE`` (no weight is a key), so a writer never blocks the foreign-key checks that a
context call's COMMIT makes on the same rows (``queries.weights``: lock mode).

Weights moved here never touch ``updated_at`` (it tracks content edits) nor triplet embeddings
(the triplet text "source -> type -> target" does not contain weights), so ``triplet_embeddings``
is always 0: the field is reported so callers need not assume it.
"""

from __future__ import annotations

import logging
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction

from graphadmin import clock
from graphadmin.embeddings import configured_model, embed_texts
from graphadmin.errors import Conflict, InputError
from graphadmin.models import Edge, EdgeType, Graph, Node
from graphadmin.models.policy import POLICY_NUMBERS
from graphadmin.models.sql import execute, fetch, fetch_all
from graphadmin.vault.plan import triplet_text

from . import ledger, records, rules
from .ledger import DECAY_CHUNK, Result, fall_through
from .models import (
    OUTCOMES,
    ROLLED_BACK,
    SIGNALS,
    AgentSession,
    UpdateBatch,
    WeightChange,
    WeightChangeBlock,
)
from .queries import weights
from .report import Report, unknown_item
from .rules import ManualValue, UseItem

__all__ = [
    "CO_USED",
    "DECAY_CHUNK",
    "ManualValue",
    "Result",
    "RollbackRefused",
    "UseItem",
    "do_apply_outcome",
    "do_apply_report",
    "do_decay",
    "do_link_co_used",
    "do_normalize",
    "do_record_response",
    "do_record_uses",
    "do_finish_rollback",
    "do_rollback_batch",
    "do_set_weights",
    "preview_rollback",
    "fall_through",
]

log = logging.getLogger(__name__)

CO_USED = rules.CO_USED
CO_USED_DESCRIPTION = (
    "Learned: both notes were used in the same accepted sessions (created by feedback, not by an import)."
)


class RollbackRefused(Conflict):
    """A batch that cannot be rolled back (already rolled back, or its history has expired): the API's 409."""

    def __init__(self, message: str):
        super().__init__(message, body={"status": "already_rolled_back", "reason": message})


def _refuse(refusal: rules.Refusal | None) -> None:
    """Raise a refusal of the rules (their checks return it) as the domain's InputError naming its field."""
    if refusal is not None:
        raise InputError.field(refusal.field, refusal.message)


def _bounded(name: str, value, policy_value):
    """A per-call override of a policy rate, checked against the policy's bounds (``rules.out_of_bounds``)."""
    _default, lo, hi, _integer, _help = POLICY_NUMBERS[name]
    _refuse(rules.out_of_bounds(name, value, lo, hi))
    return rules.bounded(value, policy_value)


def _check_targets(graph: Graph, items: list[UseItem]) -> None:
    """Refuse items that are not live nodes/edges of this graph (another graph's ids read as unknown),
    in the intake's words and error (``report.unknown_item``)."""
    unknown = weights.unknown_target(graph, items)
    if unknown:
        raise unknown_item(*unknown)


def _feedback_disabled(graph: Graph, session: AgentSession) -> Result:
    return fall_through(
        "feedback_disabled", "feedback is disabled for this graph", graph=graph.pk, session=session.external_id
    )


# --------------------------------------------------------------------------------------------------
# 1. Use reports and reinforcement


def do_record_uses(
    session: AgentSession,
    items: list[UseItem],
    *,
    actor,
    source: str = "api",
    learning_rate: float | None = None,
    idempotency_key: str | None = None,
    policy=None,
    targets_checked: bool = False,
) -> Result:
    """Record use events and reinforce what was used and the paths that surfaced it.

    A used node moves up, ``w += lr * (1 - w)``, and so does every edge on the path that surfaced
    it in this session's injections (credit to the path, ``rules.credit_paths``); a node flagged
    negative moves down, ``w -= negative_rate * w``, with the last edge of its path. Edges move
    ``weight``; nodes (which have no reinforcement weight of their own) move ``feedback_weight``.
    Surfaced but unreported items do not change. Each node or edge moves at most once per session: a
    target already credited (or flagged) in this session is skipped, so reporting a use again moves
    nothing more. The same target with two different signals in one call is refused.
    ``learning_rate`` overrides the policy's (for both signals) within its bounds. With
    ``idempotency_key`` a repeated call (a retried task) returns the first batch. ``policy`` is the
    graph's current PolicyRevision when the caller has read it already (a drain reads it once);
    ``targets_checked``: the caller found every item live in this transaction (a drain checks its
    whole batch at once, ``report.stale_items``).
    """
    started = time.perf_counter()
    graph = session.graph
    if not graph.feedback_enabled:
        return _feedback_disabled(graph, session)
    if not items:
        return fall_through("nothing_reported", "no items were reported", graph=graph.pk, session=session.external_id)
    _refuse(rules.refused_uses(items, SIGNALS))
    unique = rules.unique_uses(items)
    policy = policy or graph.current_policy()
    lr = _bounded("learning_rate", learning_rate, policy.learning_rate)
    neg = _bounded("negative_rate", learning_rate, policy.negative_rate)

    with transaction.atomic():
        # The session row orders concurrent reports of one session, so "once per session" holds; the
        # checks below run after the lock, so a report that waited sees what the first one committed.
        fetch(weights.LOCK_SESSION, {"graph": session.graph_id, "session": session.pk})
        replay = _replayed(graph, idempotency_key)
        if replay is not None:
            return replay
        if not targets_checked:
            _check_targets(graph, unique)
        targets = _uncredited_targets(session, unique, source)
        if not targets:
            return fall_through(
                "already_credited",
                "every reported item was already credited in this session",
                graph=graph.pk,
                session=session.external_id,
            )
        events = _insert_use_events(session, targets)
        reported = [i for i, s in targets if s != "path"]
        batch = _start_reinforce_batch(session, targets, reported, actor, idempotency_key, lr, neg, source)
        if batch is None:
            # A concurrent run with the same key committed first: drop our use events, answer with its batch.
            done = UpdateBatch.objects.get(idempotency_key=idempotency_key)
            transaction.set_rollback(True)
            return ledger.existing(done)
        params = _reinforce_params(batch, targets, events, lr, neg)
        edge_updates, node_updates, archived_edges, archived_nodes = fetch(weights.REINFORCE, params)
        _refuse_archived_meanwhile(items, reported, archived_edges, archived_nodes)
        # Counted apart (details.answered): edge_updates keeps counting what the report moved in the graph.
        batch.details["answered"] = _teach(batch, session, *_use_evidence(session, reported))
        return ledger.finish(
            batch,
            actor,
            started,
            node_updates=node_updates,
            edge_updates=edge_updates,
            audit_extra={"session": session.external_id, "source": source},
        )


def _refuse_archived_meanwhile(items, reported, archived_edges, archived_nodes) -> None:
    """Refuse the report (``report.unknown_item``, as the intake and the drain's check would) when one of
    its reported items was archived (a ``forget``) after it was checked: REINFORCE saw it under its row
    lock. The caller's transaction rolls back what the statement wrote. Path edges archived since are
    credited as before (the report did not name them)."""
    gone = {("edge", pk) for pk in archived_edges} | {("node", pk) for pk in archived_nodes}
    if not gone:
        return
    for item in reported:
        if (item.kind, item.id) in gone:
            index = next(i for i, x in enumerate(items) if (x.kind, x.id) == (item.kind, item.id))
            raise unknown_item(index, item.kind, item.id)


def _replayed(graph, idempotency_key: str | None) -> Result | None:
    """The result of the batch this idempotency key already committed, if any."""
    if idempotency_key:
        done = fetch(weights.BATCH_BY_KEY, {"graph": graph.pk, "key": idempotency_key})
        if done:
            return ledger.existing(UpdateBatch.objects.get(graph_id=graph.pk, pk=done[0]))
    return None


def _uncredited_targets(session: AgentSession, unique: list[UseItem], source: str) -> list[tuple[UseItem, str]]:
    """The reported items and the edges on the paths that surfaced them, as (item, source), without
    those already credited (or flagged) in this session."""
    path, credited = weights.credit_targets(session, unique)
    targets = [(i, source) for i in unique] + [(i, "path") for i in path]
    return [(i, s) for i, s in targets if (i.kind, i.id) not in credited]


def _start_reinforce_batch(session, targets, reported, actor, idempotency_key, lr, neg, source):
    """The reinforcement's UpdateBatch (None when a concurrent run with the same key committed first)."""
    return ledger.start_batch(
        session.graph,
        "reinforce",
        actor,
        session=session,
        key=idempotency_key,
        details={
            "learning_rate": lr,
            "negative_rate": neg,
            "source": source,
            "signals": {s: sum(1 for i in reported if i.signal == s) for s in SIGNALS},
            "path_edges": sorted(i.id for i, s in targets if s == "path"),
        },
    )


def _reinforce_params(batch, targets, events, lr: float, neg: float) -> dict:
    """REINFORCE's parameters: the batch's history fields, the rates, and per kind the ids, signals and events."""
    params = {**ledger.history_params(batch), "learning_rate": lr, "negative_rate": neg}
    for kind in ("edge", "node"):
        chosen = [(i, e) for (i, _s), e in zip(targets, events, strict=True) if i.kind == kind]
        params[f"{kind}_ids"] = [i.id for i, _e in chosen]
        params[f"{kind}_signals"] = [i.signal for i, _e in chosen]
        params[f"{kind}_events"] = [e for _i, e in chosen]
    return params


def _insert_use_events(session: AgentSession, targets: list[tuple[UseItem, str]]) -> list[int]:
    """One UseEvent per (item, source), in one statement; their ids in the same order."""
    rows = fetch_all(
        weights.INSERT_USE_EVENTS,
        {
            "graph": session.graph_id,
            "session": session.pk,
            "now": clock.now(),
            "injections": [i.injection_id for i, _s in targets],
            "nodes": [i.id if i.kind == "node" else None for i, _s in targets],
            "edges": [i.id if i.kind == "edge" else None for i, _s in targets],
            "signals": [i.signal for i, _s in targets],
            "sources": [s for _i, s in targets],
        },
    )
    return sorted(pk for (pk,) in rows)  # ids are drawn in insertion order (the arrays' order)


def do_record_response(
    session: AgentSession, response: str, *, actor, idempotency_key: str | None = None, policy=None
) -> Result:
    """Detect which selected candidates of the session the response used, and reinforce them as implicit.

    Detection is ``rules.detect_implicit`` at the policy's ``implicit_threshold``; a used candidate
    reinforces its node and, through ``do_record_uses``, the path that surfaced it.
    """
    graph = session.graph
    if not graph.feedback_enabled:
        return _feedback_disabled(graph, session)
    candidates = weights.selected_candidates(session)
    if not candidates:
        return fall_through(
            "nothing_surfaced", "the session has no selected candidates", graph=graph.pk, session=session.external_id
        )
    policy = policy or graph.current_policy()
    used = rules.detect_implicit(candidates, response, policy.implicit_threshold)
    if not used:
        return fall_through(
            "nothing_detected", "the response used no surfaced item", graph=graph.pk, session=session.external_id
        )
    items = [UseItem("node", c["node_id"], "implicit", c["injection_id"]) for c in used]
    return do_record_uses(
        session, items, actor=actor, source="response", idempotency_key=idempotency_key, policy=policy
    )


# --------------------------------------------------------------------------------------------------
# 1b. Question-conditional evidence (rules.answered_after), written inside a reinforce or outcome batch

ANSWERED_DESCRIPTION = (
    "Learned: a question agents asked -> a note; the weight is the evidence (0.5 none, 1 used, 0 flagged)."
)


# What one drain's reports look up again and again (``reused``): the question node of an injection and
# the ``answered`` edge type. Only inside ``outbox.drain``'s transaction, emptied whenever a report
# rolls back to its savepoint (what it created may be gone).
_REUSED: ContextVar[dict | None] = ContextVar("feedback_reused", default=None)


@contextmanager
def reused():
    """Within this block ``_teach`` keeps each injection's question node and the edge type it looked up;
    ``.clear()`` the returned dict after a rollback."""
    memo: dict = {}
    token = _REUSED.set(memo)
    try:
        yield memo
    finally:
        _REUSED.reset(token)


def _question_of(graph: Graph, vector, model: str, query: str, session: AgentSession) -> int:
    """The question node of a query: the graph's nearest question at least MERGE_SIMILARITY alike (a
    near-duplicate is the same question), else a new one (kind ``question``, the query as title and text)."""
    row = fetch(
        weights.NEAREST_QUESTION,
        {"graph": graph.pk, "query": rules.vector_text(vector), "kind": rules.QUESTION_KIND, "model": model},
    )
    if row is not None and row[1] is not None and row[1] >= rules.MERGE_SIMILARITY:
        return row[0]
    node = Node.objects.create(
        graph=graph,
        key=f"question:{uuid.uuid4().hex}",
        kind=rules.QUESTION_KIND,
        title=(query or "(question)")[:500],
        text=query,
        source=f"session:{session.external_id}"[:1000],
        embedding=[float(x) for x in vector],
        embedding_model=model,
    )
    return node.pk


def _use_evidence(session: AgentSession, items: list[UseItem]) -> tuple[dict[tuple[int, int], str], dict]:
    """(injection id, node id) -> evidence for reported node uses and flags: the injection the item names,
    else every injection of the session that selected the node; and the session's questions
    (``weights.Shown.asked``, read in the same statement)."""
    nodes = [i for i in items if i.kind == "node"]
    if not nodes:
        return {}, {}
    session_shown = weights.session_shown(session)
    evidence = {}
    for item in nodes:
        what = rules.FLAGGED if item.signal == "negative" else rules.USED
        injections = (
            [item.injection_id] if item.injection_id else [i for i, ns in session_shown.shown.items() if item.id in ns]
        )
        for injection in injections:
            evidence[(injection, item.id)] = what
    return evidence, session_shown.asked


def _outcome_evidence(session: AgentSession, outcome: str) -> tuple[dict[tuple[int, int], str], dict]:
    """(injection id, node id) -> evidence the outcome gives the notes shown and not reported
    (``rules.session_evidence``); and the session's questions (``weights.Shown.asked``)."""
    found = weights.session_shown(session)
    evidence = {}
    for injection, nodes in found.shown.items():
        for node, what in rules.session_evidence(outcome, nodes, found.used, found.flagged).items():
            evidence[(injection, node)] = what
    return evidence, found.asked


def _teach(batch: UpdateBatch, session: AgentSession, evidence: dict[tuple[int, int], str], asked: dict) -> int:
    """Write question-conditional evidence in ``batch``: (injection id, node id) -> evidence
    (``rules.EVIDENCE``). Each injection with a query vector (``asked``: injection id -> vector, model,
    query, the session's as ``weights.session_shown`` read them) maps to its question node (merged with
    near-duplicates); the ``answered`` edges question -> note are created neutral where missing, then
    moved (``weights.TEACH``) with their history in the batch, so its rollback takes the evidence back.
    Returns the edge weights changed (the batch's ``details.answered``)."""
    if not evidence:
        return 0
    graph = session.graph
    injections = {i for i, _n in evidence}
    found = {pk: asked[pk] for pk in injections if pk in asked}
    if not found:
        return 0
    memo = _REUSED.get()
    memo = {} if memo is None else memo
    questions = {}
    for pk, (v, m, q) in sorted(found.items()):
        if ("question", pk) not in memo:
            memo[("question", pk)] = _question_of(graph, v, m, q, session)
        questions[pk] = memo[("question", pk)]
    merged = rules.merge_evidence((questions[i], n, e) for (i, n), e in evidence.items() if i in questions)
    if not merged:
        return 0
    if ("answered", graph.pk) not in memo:
        memo[("answered", graph.pk)] = _answered_type(graph)
    keys = sorted(merged)
    params = {
        **ledger.history_params(batch),
        "type": memo[("answered", graph.pk)],
        "questions": [q for q, _n in keys],
        "nodes": [n for _q, n in keys],
        "evidence": [merged[k] for k in keys],
    }
    execute(weights.INSERT_ANSWERED, params)
    changed = fetch(weights.TEACH, params)[0]
    if changed:
        _derive_evidence_similarity(graph.pk, memo[("answered", graph.pk)])
    return changed


# How many reported questions the evidence similarity reads (the latest), and their nearest others each.
EVIDENCE_QUESTIONS = 300
EVIDENCE_NEAREST = 10


def _derive_evidence_similarity(graph_id: int, answered_type: int | None = None) -> None:
    """Set the graph's evidence similarity (Graph.evidence_similarity, rules.evidence_similarity) from the
    evidence that stands: after evidence is taught and after a rollback, in the same transaction, so the
    similarity ranking reads is always the one the graph's current evidence gives (a rollback of what taught
    it gives it back)."""
    if answered_type is None:
        found = fetch(weights.EDGE_TYPE_ID, {"graph": graph_id, "name": rules.ANSWERED})
        if found is None:
            return
        answered_type = found[0]
    pairs = fetch_all(
        weights.QUESTION_PAIRS,
        {
            "graph": graph_id,
            "kind": rules.QUESTION_KIND,
            "type": answered_type,
            "limit": EVIDENCE_QUESTIONS,
            "near": EVIDENCE_NEAREST,
            "used": rules.USED_WEIGHT,
        },
    )
    similarity = rules.evidence_similarity((float(p), bool(a)) for p, a in pairs)
    execute(weights.SET_EVIDENCE_SIMILARITY, {"graph": graph_id, "similarity": similarity})


def _answered_type(graph: Graph) -> int:
    """The id of the graph's ``answered`` edge type, created on first use (one named SELECT when it exists)."""
    found = fetch(weights.EDGE_TYPE_ID, {"graph": graph.pk, "name": rules.ANSWERED})
    if found is not None:
        return found[0]
    edge_type, _ = EdgeType.objects.get_or_create(
        graph=graph, name=rules.ANSWERED, defaults={"priority": 0.0, "description": ANSWERED_DESCRIPTION}
    )
    return edge_type.pk


# --------------------------------------------------------------------------------------------------
# 2. Outcome EMA


def do_apply_outcome(
    graph: Graph,
    external_id: str,
    outcome: str,
    *,
    actor,
    alpha: float | None = None,
    idempotency_key: str | None = None,
    policy=None,
) -> Result:
    """EMA on ``feedback_weight`` of every node and edge selected in the session's injections.

    ``w = alpha * score(outcome) + (1 - alpha) * w``, alpha from the policy unless overridden within
    its bounds. Reporting the session's current outcome again returns the batch that applied it
    (status ``duplicate``); a different outcome later is a new batch whose ``correction_of`` names
    the previous outcome batch (it moves the weights from where they are, it does not undo the first:
    roll that back for that). Unknown session, no injection, nothing selected, feedback disabled:
    a logged no-op with that status. With ``idempotency_key`` (one per report) a retried task returns
    the batch its first run wrote, even if another outcome was applied in between. ``policy``: the
    graph's current PolicyRevision when the caller has read it already (a drain reads it once per batch);
    without it, the current one is read in the statement that locks the session.
    """
    started = time.perf_counter()
    _refuse(rules.not_one_of("outcome", outcome, OUTCOMES))
    alpha = _bounded("ema_alpha", alpha, None)  # an override is checked first; the policy's is read below
    context = {"graph": graph.pk, "session": external_id, "outcome": outcome}
    if not graph.feedback_enabled:
        return fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    with transaction.atomic():
        state = weights.lock_session_for_outcome(graph.pk, external_id, outcome, idempotency_key)
        settled = _outcome_settled(state, outcome, context)
        if settled is not None:
            return settled
        revision, score = state.revision, state.score
        if policy is not None:
            revision, score = policy.revision, getattr(policy, f"outcome_{outcome}")
        alpha = (state.alpha if policy is None else policy.ema_alpha) if alpha is None else alpha
        previous_id = state.previous_id
        batch = ledger.new_batch(
            graph,
            "outcome",
            actor,
            key=idempotency_key,
            id=state.batch_id,
            correction_of_id=previous_id,
            details={
                "outcome": outcome,
                "score": score,
                "alpha": alpha,
                "policy_revision": revision,
                **({"correction_of": previous_id, "previous_outcome": state.outcome} if previous_id else {}),
            },
        )
        batch.trigger_session_id = state.session_id
        _write_outcome(batch, state.session_id, outcome, alpha, score, started)
        # The session's row is locked and known: no need to read it again for its evidence.
        session = AgentSession(pk=state.session_id, graph=graph, external_id=external_id, outcome=outcome)
        answered = _teach(batch, session, *_outcome_evidence(session, outcome))
        if answered:
            # Counted apart, as for a use report: edge_updates keeps counting the outcome EMA's changes.
            batch.details["answered"] = answered
            UpdateBatch.objects.filter(graph_id=graph.pk, pk=batch.pk).update(details=batch.details)
        return ledger.audit_batch(
            batch, actor, {"session": external_id, "outcome": outcome, "alpha": alpha, "correction_of": previous_id}
        )


def _outcome_settled(state: weights.OutcomeLock | None, outcome: str, context: dict) -> Result | None:
    """The answer when there is nothing to apply (unknown session, a retry, the same outcome again, no
    injection, nothing surfaced); None when the outcome is to be applied."""
    if state is None:
        return fall_through("unknown_session", "outcome for an unknown session", **context)
    if state.retry_id is not None:
        return ledger.existing(UpdateBatch.objects.get(pk=state.retry_id))
    if state.previous_id is not None and state.outcome == outcome:
        return ledger.existing(UpdateBatch.objects.get(pk=state.previous_id))
    if not state.has_injection:
        return fall_through("no_injection", "the session has no context injection", **context)
    if not state.has_selected:
        return fall_through("nothing_surfaced", "the session's injections surfaced nothing", **context)
    return None


def _write_outcome(batch: UpdateBatch, session_id: int, outcome: str, alpha: float, score: float, started) -> None:
    """The outcome EMA and the batch's row in one statement (OUTCOME_WRITE); the counts kept on ``batch``."""
    params = {
        **ledger.batch_params(batch),
        **ledger.history_params(batch),
        "session": session_id,
        "outcome": outcome,
        "alpha": alpha,
        "score": score,
        "elapsed_ms": (time.perf_counter() - started) * 1000.0,
    }
    edges, nodes, finished_at, duration_ms = fetch(weights.OUTCOME_WRITE, params)
    batch.edge_updates, batch.node_updates, batch.finished_at, batch.duration_ms = (
        edges,
        nodes,
        finished_at,
        duration_ms,
    )
    batch._state.adding = False


# --------------------------------------------------------------------------------------------------
# 2b. One accepted report (feedback.report.Report), whichever its kind


def do_apply_report(
    graph: Graph, session: AgentSession, report: Report, *, actor, policy=None, targets_checked: bool = False
) -> Result:
    """Apply one report the intake accepted: a use report (``do_record_uses``), a response text
    (``do_record_response``) or an outcome (``do_apply_outcome``; an accepted one may then link notes
    used together, ``do_link_co_used``: its Result in ``links``). ``policy``: the graph's
    current PolicyRevision, read once by the caller for many reports. The report's key is its
    batch's idempotency key, so a second delivery answers with the first batch."""
    if report.kind == "uses":
        return do_record_uses(
            session,
            list(report.items),
            actor=actor,
            source=report.source,
            learning_rate=report.learning_rate,
            idempotency_key=report.key,
            policy=policy,
            targets_checked=targets_checked,
        )
    if report.kind == "response":
        return do_record_response(session, report.response, actor=actor, idempotency_key=report.key, policy=policy)
    result = do_apply_outcome(
        graph,
        session.external_id,
        report.outcome,
        actor=actor,
        alpha=report.alpha,
        idempotency_key=report.key,
        policy=policy,
    )
    if report.outcome == "accepted" and result.status == "applied":
        session.outcome = report.outcome
        result.links = do_link_co_used(session, actor=actor, policy=policy)
    return result


# --------------------------------------------------------------------------------------------------
# 3. Decay and the normalize ceiling


def do_decay(
    graph: Graph, *, actor, now: datetime | None = None, chunk_size: int = DECAY_CHUNK, dry_run: bool = False
) -> Result:
    """Multiply the weight of edges not traversed during the period by ``decay_rate``, never below the floor.

    Chunk semantics (``ledger.run_chunks``): the graph's edge ids are cut into fixed ranges
    ``[k * chunk_size, (k + 1) * chunk_size)``; each range is its own short transaction and, when it
    changes anything, its own UpdateBatch (kind ``decay``, idempotency key
    ``decay:<graph>:<period>:<k>``) with its history blocks and AuditEvent. So row locks are held for
    one chunk only, a killed run leaves whole chunk batches and no partial one, and a second run in
    the same period skips every chunk already applied. Archived edges, edges at or below the floor,
    and edges traversed since the cutoff (``rules.decay_period``) are untouched. The returned Result
    sums the run; ``details`` lists the chunk batches. ``dry_run`` counts what would change
    (``weights.decay_preview``) and writes nothing.
    """
    started = time.perf_counter()
    policy = graph.current_policy()
    period, _start, cutoff = weights.decay_period(graph, now, policy=policy)
    rate, floor = policy.decay_rate, policy.weight_floor
    details = {"period": period, "cutoff": cutoff.isoformat(), "rate": rate, "floor": floor}
    summary = {**details, "batches": [], "skipped_chunks": 0}
    chunks = weights.chunk_ranges(graph, chunk_size)
    if not chunks or rate >= 1.0:
        return Result("nothing_to_change", details=summary, duration_ms=ledger.elapsed_ms(started))
    if dry_run:
        edges = weights.decay_preview(graph, now=now, limit=0)["edges"]
        return Result("dry_run", None, 0, edges, 0, ledger.elapsed_ms(started), details=summary)
    return ledger.run_chunks(
        graph,
        "decay",
        actor,
        chunks=chunks,
        chunk_size=chunk_size,
        started=started,
        key=f"decay:{graph.pk}:{period}",
        statement=weights.DECAY_RANGE,
        params={"floor": floor, "cutoff": cutoff, "rate": rate, "toward_neutral": weights.evidence_types(graph)},
        details=details,
        audit_extra={"period": period},
        summary=summary,
    )


def do_normalize(graph: Graph, *, actor, chunk_size: int = DECAY_CHUNK, idempotency_key: str | None = None) -> Result:
    """Rescale the weights of the graph's live edges so the largest is 1.0 (the ``normalize`` ceiling mode).

    The factor ``1 / max(weight)`` is read once; it is then applied chunk by chunk, exactly like
    decay (fixed id ranges, one short transaction and one batch of kind ``normalize`` per range that
    changes, so row locks are never held long), as ``least(1.0, weight * factor)``: an edge
    reinforced between chunks is capped at 1.0. ``idempotency_key`` names the run, so a retried task
    skips the chunks already applied. A no-op (``nothing_to_change``) when the maximum is already
    1.0 or every weight is 0.
    """
    started = time.perf_counter()
    top = weights.max_edge_weight(graph)
    if not top or top >= 1.0:
        return Result("nothing_to_change", details={"max_weight": top})
    factor = 1.0 / top
    run = idempotency_key or uuid.uuid4().hex
    return ledger.run_chunks(
        graph,
        "normalize",
        actor,
        chunks=weights.chunk_ranges(graph, chunk_size),
        chunk_size=chunk_size,
        started=started,
        key=f"normalize:{graph.pk}:{run}",
        statement=weights.NORMALIZE_RANGE,
        params={"factor": factor, "evidence_types": weights.evidence_types(graph)},
        details={"max_weight": top, "factor": factor, "run": run},
        audit_extra={"max_weight": top},
        summary={"max_weight": top, "factor": factor, "run": run, "batches": [], "skipped_chunks": 0},
    )


# --------------------------------------------------------------------------------------------------
# 4. Manual set


def do_set_weights(graph: Graph, values: list[ManualValue], *, actor, reason: str = "") -> Result:
    """Set weights by hand (kind ``manual``): one batch, audited with the reason."""
    started = time.perf_counter()
    _refuse(rules.refused_manual_values(values))
    with transaction.atomic():
        _check_targets(graph, [UseItem(v.kind, v.id, "explicit") for v in values])
        batch = ledger.start_batch(graph, "manual", actor, details={"reason": reason})
        counts = {"node": 0, "edge": 0}
        # Every row first, edges then nodes, each in id order: the lock order of every writer.
        weights.lock_rows(
            graph.pk, [v.id for v in values if v.kind == "edge"], [v.id for v in values if v.kind == "node"]
        )
        for kind, field_name in (("edge", "weight"), ("edge", "feedback_weight"), ("node", "feedback_weight")):
            chosen = [v for v in values if v.kind == kind and v.field == field_name]
            if not chosen:
                continue
            params = {
                **ledger.history_params(batch),
                "field": field_name,
                "ids": [v.id for v in chosen],
                "values": [v.value for v in chosen],
            }
            (written,) = fetch(weights.set_weight(kind, field_name), params)
            counts[kind] += written
        return ledger.finish(
            batch,
            actor,
            started,
            node_updates=counts["node"],
            edge_updates=counts["edge"],
            audit_extra={"reason": reason},
        )


# --------------------------------------------------------------------------------------------------
# 5. Links the graph learns: co_used edges


def do_link_co_used(session: AgentSession, *, actor, policy=None) -> Result:
    """Link what keeps being used together: a ``co_used`` edge for each pair of ``weights.co_used_pairs``.

    Run after an accepted outcome. Co-use is symmetric, so each pair gets an edge both ways (expansion
    walks links both ways; each direction learns its own weight), weight and feedback weight neutral
    (0.5), with its triplet embedding. The edge type ``co_used`` (priority 0) is created on first use
    and tuned like any other. One ``link`` batch (details: the edges and the pairs) and one audit event; rolling the
    batch back archives the edges. A clean no-op when feedback is off, the session is not accepted
    or no pair qualifies.
    """
    started = time.perf_counter()
    graph = session.graph
    context = {"graph": graph.pk, "session": session.external_id}
    if not graph.feedback_enabled:
        return fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    if session.outcome != "accepted":
        return fall_through("not_accepted", "links are learned from accepted sessions only", **context)
    policy = policy or graph.current_policy()
    with transaction.atomic():
        # The session lock orders two links of the same session; ON CONFLICT (INSERT_LINKS), two sessions'.
        fetch(weights.LOCK_SESSION, {"graph": session.graph_id, "session": session.pk})
        pairs = weights.co_used_pairs(session, policy.co_use_min_sessions, CO_USED)
        if not pairs:
            # The usual case after an accepted session: not worth a warning (fall_through logs one).
            return Result(
                "no_new_links", details={"reason": "no unlinked pair was used together often enough", **context}
            )
        edge_type, _ = EdgeType.objects.get_or_create(
            graph=graph, name=CO_USED, defaults={"priority": 0.0, "description": CO_USED_DESCRIPTION}
        )
        titles = dict(
            Node.objects.filter(graph=graph, pk__in={n for a, b, _n in pairs for n in (a, b)}).values_list(
                "id", "title"
            )
        )
        ends = [(a, b) for a, b, _n in pairs] + [(b, a) for a, b, _n in pairs]
        vectors = embed_texts([triplet_text(titles[a], CO_USED, titles[b]) for a, b in ends])
        batch = ledger.start_batch(
            graph,
            "link",
            actor,
            session=session,
            details={"threshold": policy.co_use_min_sessions, "pairs": [list(p) for p in pairs]},
        )
        rows = fetch_all(
            weights.INSERT_LINKS,
            {
                "graph": graph.pk,
                "type": edge_type.pk,
                "sources": [a for a, _b in ends],
                "targets": [b for _a, b in ends],
                "vectors": [rules.vector_text(v) for v in vectors],
                "model": configured_model(),
            },
        )
        created = sorted(r[0] for r in rows)
        batch.details["created_edges"] = created
        return ledger.finish(
            batch,
            actor,
            started,
            edge_updates=len(created),
            audit_extra={"session": session.external_id, "created_edges": created, "edge_type": CO_USED},
        )


# --------------------------------------------------------------------------------------------------
# 6. Rollback


def do_rollback_batch(batch: UpdateBatch, *, actor, force: bool = False) -> Result:
    """Undo a batch with a new batch of kind ``rollback`` that restores what it changed.

    A weight is restored to its ``before`` value only where its current value still equals that
    batch's ``after``; rows changed since are conflicts: counted, listed (first 100 ids per target
    and field) in the details, and left alone, unless ``force`` (then overwritten, recorded with
    event ``rollback_forced`` and audited as forced). The rollback's history has the shape of the
    batch's (blocks for a bulk batch, rows otherwise). A ``link`` batch made edges, not weight
    changes: its rollback archives them (and the rollback of that restores them); an edge already in
    the wanted state is a conflict, and ``force`` does not apply. The batch is marked
    ``rolled_back``, or ``partially_rolled_back`` when weight or row conflicts were left alone; rolling it back again
    raises ``RollbackRefused``. A rollback batch is itself
    rollbackable (it re-applies the values it replaced). A ``memory`` or ``import`` batch wrote nodes
    and edges: its rollback restores their recorded fields (``feedback.records``: created rows are
    archived, changed ones get their text, key, tags back, archived ones are restored), with the same
    conflict rule and ``force``. An import recorded before imports kept their rows raises
    ``RollbackRefused`` (409 in the API, a message in the dashboard).

    Retried whole when PostgreSQL picks it as a deadlock victim (``ledger.retry_transient``): a drain
    batch holds the locks of every report it applied so far, and a report locks its question's
    ``answered`` edges after its nodes (``_teach``), so a rollback taking its edges before its nodes
    can cross it (docs/decisions/0001-deadlock-victims-retried.md). The retry reads the batch again:
    what the drain changed meanwhile is a conflict, never overwritten.
    """
    started = time.perf_counter()
    return ledger.retry_transient(
        lambda: _rollback_once(batch, actor=actor, force=force, started=started), what=f"rollback of batch {batch.pk}"
    )


def _rollback_once(batch: UpdateBatch, *, actor, force: bool, started: float) -> Result:
    """One attempt of ``do_rollback_batch``: its transaction."""
    with transaction.atomic():
        target = _rollback_target(batch)
        plan = _rollback_plan(target, force)
        force, links, kind = plan.force, plan.links, plan.kind
        new = ledger.start_batch(target.graph, "rollback", actor, rollback_of=target, details=plan.details)
        counts, conflicts, audit_extra = _undo(target, new, plan, actor=actor)
        _derive_evidence_similarity(target.graph_id)  # from the evidence that stands now
        # Conflicts left alone (not forced) leave part of the batch standing: stored as partially rolled back.
        # A link batch's conflicts are edges already in the wanted state: nothing of it stands, rolled back.
        target.status = "partially_rolled_back" if conflicts and not force and not links else "rolled_back"
        UpdateBatch.objects.filter(graph_id=target.graph_id, pk=target.pk).update(status=target.status)
        if target.details.get("finishes_rollback"):
            # Undoing a forced finish puts back what it overwrote: the batch it finished is partial again.
            UpdateBatch.objects.filter(graph_id=target.graph_id, pk=target.details["rollback_of"]).update(
                status="partially_rolled_back"
            )
        result = ledger.finish(
            new,
            actor,
            started,
            node_updates=counts["node"],
            edge_updates=counts["edge"],
            conflicts=conflicts,
            audit_extra={"rollback_of": target.pk, "rolled_back_kind": kind, "forced": force, **audit_extra},
        )
        if conflicts and not force and not links:  # rows: conflicts too
            log.warning(
                "rollback left conflicts alone", extra={"batch": target.pk, "rollback": new.pk, "conflicts": conflicts}
            )
        return result


@dataclass
class RollbackPreview:
    """What a rollback of a batch would do now (``preview_rollback``): the values or rows it would restore
    (by node and edge), the conflicts it would leave alone, and how many of those a forced rollback would
    overwrite. ``refused``: why the rollback would be refused (then the counts are 0). ``finishing``: the
    partial rollback whose remaining rows a finish would force (``do_finish_rollback``), else None."""

    batch: int
    kind: str
    node_updates: int = 0
    edge_updates: int = 0
    conflicts: int = 0
    forced_updates: int = 0
    conflict_ids: dict = field(default_factory=dict)
    refused: str = ""
    finishing: int | None = None

    @property
    def restores_nothing(self) -> bool:
        return not (self.node_updates or self.edge_updates)

    def as_dict(self) -> dict:
        return {
            "batch": self.batch,
            "kind": self.kind,
            "node_updates": self.node_updates,
            "edge_updates": self.edge_updates,
            "conflicts": self.conflicts,
            "forced_updates": self.forced_updates,
            "conflict_ids": self.conflict_ids,
            "refused": self.refused,
            "finishing": self.finishing,
        }


def preview_rollback(batch: UpdateBatch, *, finish: bool = False) -> RollbackPreview:
    """What ``do_rollback_batch(batch)`` would restore now and which rows would conflict, writing nothing;
    with ``finish``, what ``do_finish_rollback(batch)`` would force. Counted by the rollback's own rules
    (``weights.rollback_preview`` beside ``rollback_restore``, ``records.plan``), so the rollback that
    follows reports the same counts unless something is written in between. A read, not an action."""
    preview = RollbackPreview(batch.pk, batch.kind)
    try:
        if finish:
            target, rollback = _finish_target(batch, lock=False)
            preview.finishing = rollback.pk
            plan = _rollback_plan(target, True)
        else:
            target = _rollback_target(batch, lock=False)
            plan = _rollback_plan(target, False)
    except RollbackRefused as exc:
        preview.refused = exc.body["reason"]
        return preview
    if plan.rows:
        only = records.remaining(target, rollback) if finish else None
        decided = records.plan(target, force=False, lock=False, only=only)
        forced = records.plan(target, force=True, lock=False, only=only)
        counts = decided.counts()
        if finish:
            counts = forced.counts()
        preview.node_updates, preview.edge_updates = counts["node"], counts["edge"]
        preview.conflicts = decided.conflicts()
        preview.forced_updates = sum(forced.counts().values()) - sum(decided.counts().values())
        preview.conflict_ids = {k: sorted(v)[: records.CONFLICT_SAMPLE] for k, v in decided.clashing.items() if v}
        return preview
    if plan.links:
        changed = Edge.objects.filter(graph_id=target.graph_id, pk__in=plan.edges, archived=not plan.undo).count()
        preview.edge_updates, preview.conflicts = changed, len(plan.edges) - changed
        return preview
    params = {
        "graph": target.graph_id,
        "rolled_back": target.pk,
        "finishing": preview.finishing,
        "conflict_sample": weights.CONFLICT_SAMPLE,
    }
    for kind, field_name in WEIGHT_FIELDS:
        restored, conflicts, forced, ids = fetch(
            weights.rollback_preview(kind, field_name), {**params, "field": field_name}
        )
        written = restored + forced if finish else restored
        if kind == "node":
            preview.node_updates += written
        else:
            preview.edge_updates += written
        preview.conflicts += conflicts
        preview.forced_updates += forced
        if ids:
            preview.conflict_ids[f"{kind}.{field_name}"] = list(ids)
    return preview


def do_finish_rollback(batch: UpdateBatch, *, actor) -> Result:
    """Finish a partial rollback: force the rows its rollback left alone (conflicts: changed since), as a new
    ``rollback`` batch whose details name it a forced finish (``finishes_rollback``, ``forced``), audited as
    ``batch.rollback`` with ``forced_finish``. ``batch`` is the partially rolled-back batch or its rollback.

    The rows the first rollback restored are not touched again; each remaining one is set to the batch's
    ``before`` (``rollback_forced`` in its history). The batch is then ``rolled_back``. Rolling the finish
    back (``do_rollback_batch`` on it) re-applies the values it overwrote and marks the batch partially
    rolled back again. Refused (``RollbackRefused``) for a batch that is not partially rolled back, and for
    link batches (their conflicts are edges already as wanted: nothing remains).
    """
    started = time.perf_counter()
    with transaction.atomic():
        target, rollback = _finish_target(batch, lock=True)
        plan = _rollback_plan(target, True)
        details = {**plan.details, "force": True, "finishes_rollback": rollback.pk}
        new = ledger.start_batch(target.graph, "rollback", actor, details=details)
        if plan.rows:
            only = records.remaining(target, rollback)
            counts, conflicts, sample = records.rollback(target, new, actor=actor, force=True, only=only)
        else:
            counts, conflicts, sample = _restore_weights(
                target, new, force=True, blocks=plan.blocks, finishing=rollback.pk
            )
        new.details["conflict_ids"] = sample
        target.status = "rolled_back"
        UpdateBatch.objects.filter(graph_id=target.graph_id, pk=target.pk).update(status=target.status)
        return ledger.finish(
            new,
            actor,
            started,
            node_updates=counts["node"],
            edge_updates=counts["edge"],
            conflicts=conflicts,
            audit_extra={
                "rollback_of": target.pk,
                "rolled_back_kind": plan.kind,
                "forced": True,
                "forced_finish": True,
                "finishes_rollback": rollback.pk,
                "conflict_ids": sample,
            },
        )


def _finish_target(batch: UpdateBatch, *, lock: bool) -> tuple[UpdateBatch, UpdateBatch]:
    """(the partially rolled-back batch, its rollback) for ``batch`` (either of them), the first locked with
    ``lock``; RollbackRefused when there is nothing to finish."""
    rows = UpdateBatch.objects.select_related("graph")
    if lock:
        rows = rows.select_for_update(of=("self",))
    pk = batch.rollback_of_id if batch.rollback_of_id else batch.pk
    target = rows.get(graph_id=batch.graph_id, pk=pk)
    if target.status != "partially_rolled_back":
        raise RollbackRefused(
            f"batch {target.pk} is {target.get_status_display()}: there is no partial rollback to finish."
        )
    rollback = UpdateBatch.objects.get(graph_id=target.graph_id, rollback_of=target)
    return target, rollback


def _rollback_target(batch: UpdateBatch, *, lock: bool = True) -> UpdateBatch:
    """The batch's row, locked (unless not ``lock``: a preview); RollbackRefused if it was rolled back already or
    is an import without records."""
    rows = UpdateBatch.objects.select_for_update() if lock else UpdateBatch.objects.all()
    target = rows.select_related("graph").get(graph_id=batch.graph_id, pk=batch.pk)
    # do_rollback_batch is the only writer of rollback_of, and it marks the batch rolled_back in the
    # same transaction.
    if target.status in ROLLED_BACK:
        raise RollbackRefused(f"batch {target.pk} has already been rolled back.")
    if target.kind == "import" and not target.details.get("records"):
        # An import from before imports recorded their rows (RecordChange) has counts only: there is
        # nothing a rollback could restore, and marking it rolled back would claim an undo that never ran.
        raise RollbackRefused(
            f"batch {target.pk} is an import, which cannot be rolled back: it records no per-note changes "
            "to undo. Re-import the vault as it was to restore its notes and links."
        )
    return target


@dataclass
class _RollbackPlan:
    """How a batch is undone: its recorded rows, its links, or its weights (``rows``/``links`` both False)."""

    rows: bool
    links: bool
    kind: str  # the rollback's rolled_back_kind
    force: bool
    details: dict
    undo: bool = False  # links: archive them (else restore them)
    edges: list = field(default_factory=list)
    blocks: bool = False  # weights: the batch's history is WeightChangeBlock arrays


def _rollback_plan(target: UpdateBatch, force: bool) -> _RollbackPlan:
    """What undoing ``target`` takes; RollbackRefused when its weight history has expired."""
    rows = target.kind in ("memory", "import") or bool(target.details.get("records"))
    links = target.kind == "link" or target.details.get("rolled_back_kind") in ("link", "link_rollback")
    if rows:
        details = {"rollback_of": target.pk, "rolled_back_kind": target.kind, "force": force, "records": True}
        return _RollbackPlan(True, False, target.kind, force, details)
    if links:
        # Undo the links (archive) for a link batch or the rollback of a restore; else restore them.
        undo = target.kind == "link" or target.details.get("rolled_back_kind") == "link_rollback"
        kind = "link" if undo else "link_rollback"
        edges = target.details.get("created_edges" if target.kind == "link" else "edges", [])
        details = {"rollback_of": target.pk, "rolled_back_kind": kind, "edges": edges, "force": False}
        return _RollbackPlan(False, True, kind, False, details, undo=undo, edges=edges)
    details = {"rollback_of": target.pk, "rolled_back_kind": target.kind, "force": force}
    blocks = WeightChangeBlock.objects.filter(graph_id=target.graph_id, batch=target).exists()
    if (target.node_updates or target.edge_updates) and not blocks:
        if not WeightChange.objects.filter(graph_id=target.graph_id, batch=target).exists():
            raise RollbackRefused(
                f"batch {target.pk}'s weight history has expired (retention); it cannot be rolled back."
            )
    return _RollbackPlan(False, False, target.kind, force, details, blocks=blocks)


def _undo(target: UpdateBatch, new: UpdateBatch, plan: _RollbackPlan, *, actor) -> tuple[dict, int, dict]:
    """Undo ``target`` under the rollback batch ``new``: (counts by node/edge, conflicts, audit extra)."""
    if plan.rows:
        counts, conflicts, sample = records.rollback(target, new, actor=actor, force=plan.force)
        new.details["conflict_ids"] = sample
        return counts, conflicts, {"conflict_ids": sample}
    if plan.links:
        changed = _restore_links(target.graph, plan.edges, archive=plan.undo)
        counts, conflicts = {"node": 0, "edge": len(changed)}, len(plan.edges) - len(changed)
        new.details.update({"archived" if plan.undo else "restored": changed, "conflict_ids": {}})
        return counts, conflicts, {"edges": changed}
    counts, conflicts, sample = _restore_weights(target, new, force=plan.force, blocks=plan.blocks)
    new.details["conflict_ids"] = sample
    return counts, conflicts, {"conflict_ids": sample}


WEIGHT_FIELDS = (("edge", "weight"), ("edge", "feedback_weight"), ("node", "feedback_weight"))


def _restore_weights(
    target: UpdateBatch, new: UpdateBatch, *, force: bool, blocks: bool, finishing: int | None = None
) -> tuple[dict, int, dict]:
    """The weight part of a rollback: one ``weights.rollback_restore`` per (target, field), edges first.
    Returns (changes per target kind, conflicts, conflicting ids by "kind.field"). ``finishing``: the
    partial rollback whose remaining rows these are (``do_finish_rollback``)."""
    counts, conflicts, sample = {"node": 0, "edge": 0}, 0, {}
    # Every row first, edges then nodes, each in id order: the lock order of every writer.
    weights.lock_batch_rows(target.graph_id, target.pk)
    for kind, field_name in WEIGHT_FIELDS:
        params = {
            **ledger.history_params(new),
            "rolled_back": target.pk,
            "target": kind,
            "field": field_name,
            "force": force,
            "blocks": blocks,
            "finishing": finishing,
        }
        written, found, ids = fetch(weights.rollback_restore(kind, field_name), params)
        counts[kind] += written
        conflicts += found
        if ids:
            sample[f"{kind}.{field_name}"] = list(ids)
    return counts, conflicts, sample


def _restore_links(graph: Graph, edges: list[int], *, archive: bool) -> list[int]:
    """The link part of a rollback: archive (or restore) the edges a link batch created, those not
    already in that state. Links hold no weight change to restore: the edges themselves are what the
    batch made. Returns the ids changed, sorted."""
    changed = sorted(Edge.objects.filter(graph=graph, pk__in=edges, archived=not archive).values_list("pk", flat=True))
    Edge.objects.filter(graph=graph, pk__in=changed).update(archived=archive)
    return changed
