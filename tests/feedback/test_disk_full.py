"""The database refusing writes (disk full, out of memory): the API answers 503 with Retry-After, and
the reports it accepted before stay queued, to apply once when the pressure ends (issue 41, item 5).

How the pressure is made: a trigger the test installs on the table a write goes to raises PostgreSQL's
own error for it (SQLSTATE 53100 ``disk_full``, 53200 ``out_of_memory``), so the product meets the
real error of a real PostgreSQL statement, where a full disk would refuse it. A full disk itself
(a tablespace on a tiny tmpfs) needs root to mount, which the suite does not have in CI, and refuses a
write only when the table must grow: a row that fits in a page already allocated is written
anyway, so which statement fails would depend on the rows before it. docs/resilience.md says
what a real full tablespace did.
"""

import time

import pytest
from django.db import connection

from feedback import outbox
from feedback.models import PendingReport, UpdateBatch, WeightChange
from feedback.report import Report
from feedback.rules import UseItem
from feedback.tasks import sweep_reports_task
from graphadmin.models import Node

from .conftest import make_session, url

REFUSE = """
CREATE FUNCTION test_pressure_refuses_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'write refused by the test (SQLSTATE %)', TG_ARGV[0] USING ERRCODE = TG_ARGV[0];
END $$
"""
# One statement per table and state: the trigger's argument is the SQLSTATE it raises.
ON_BATCHES = {
    "53100": "CREATE TRIGGER test_pressure BEFORE INSERT ON feedback_updatebatch FOR EACH ROW "
    "EXECUTE FUNCTION test_pressure_refuses_write('53100')",
    "53200": "CREATE TRIGGER test_pressure BEFORE INSERT ON feedback_updatebatch FOR EACH ROW "
    "EXECUTE FUNCTION test_pressure_refuses_write('53200')",
    # Not pressure: object_not_in_prerequisite_state, an OperationalError of another class.
    "55000": "CREATE TRIGGER test_pressure BEFORE INSERT ON feedback_updatebatch FOR EACH ROW "
    "EXECUTE FUNCTION test_pressure_refuses_write('55000')",
}
ON_OUTBOX = (
    "CREATE TRIGGER test_pressure BEFORE INSERT ON feedback_pendingreport FOR EACH ROW "
    "EXECUTE FUNCTION test_pressure_refuses_write('53100')"
)
LIFT = (
    "DROP TRIGGER IF EXISTS test_pressure ON feedback_updatebatch",
    "DROP TRIGGER IF EXISTS test_pressure ON feedback_pendingreport",
    "DROP FUNCTION IF EXISTS test_pressure_refuses_write()",
)


def _sql(*statements):
    with connection.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def _wait(predicate, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _uses(node):
    return {"items": [{"node": node.pk, "signal": "explicit"}]}


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_full_disk_answers_503_and_the_reports_accepted_before_apply_once_after(
    api, ada, acme_graph, small_graph, edges, celery_worker_process, settings
):
    n = small_graph
    shown = [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True)]
    make_session(acme_graph, "before", shown, ada)
    make_session(acme_graph, "during", shown, ada)
    try:
        # The ledger's tables are full: the report is accepted (its outbox row fits), its drain is refused.
        _sql(REFUSE, ON_BATCHES["53100"])
        accepted = api(ada).post(url(acme_graph, "before", "uses"), _uses(n["c"]), format="json")
        assert accepted.status_code == 202, accepted.data
        first = accepted.data["idempotency_key"]

        def refused_once():
            sweep_reports_task()  # as the beat's sweeper does, should the worker have missed the commit's poke
            return PendingReport.objects.get(idempotency_key=first).attempts >= 1

        _wait(refused_once, "the worker's refused drain")
        row = PendingReport.objects.get(idempotency_key=first)
        assert row.state == "pending" and "53100" in row.last_error
        assert not UpdateBatch.objects.filter(idempotency_key=first).exists()

        # Now the outbox too: a new report is refused with a 503 the agent retries; nothing is written.
        _sql(ON_OUTBOX)
        refused = api(ada).post(
            url(acme_graph, "during", "uses"), _uses(n["b"]), format="json", HTTP_IDEMPOTENCY_KEY="during-1"
        )
        assert refused.status_code == 503, refused.content
        assert refused["Retry-After"] == str(settings.DATABASE_RETRY_AFTER_SECONDS)
        assert "short of disk space" in refused.json()["detail"]
        assert not PendingReport.objects.filter(idempotency_key__endswith=":during-1").exists()
        assert PendingReport.objects.get(idempotency_key=first).state == "pending"  # still kept
    finally:
        _sql(*LIFT)

    # The pressure ends: the sweeper finds the report past its backoff, the worker applies it; the agent's retry
    # of the refused one is accepted and applied.
    retried = api(ada).post(
        url(acme_graph, "during", "uses"), _uses(n["b"]), format="json", HTTP_IDEMPOTENCY_KEY="during-1"
    )
    assert retried.status_code == 202, retried.data
    second = retried.data["idempotency_key"]  # the agent's key, in the graph's namespace

    def applied():
        sweep_reports_task()
        return set(PendingReport.objects.values_list("state", flat=True)) == {"applied"}

    _wait(applied, "both reports applied")
    # Exactly once each: one batch per idempotency key, and the used node moved by that batch alone.
    for key, node in ((first, n["c"]), (second, n["b"])):
        batch = UpdateBatch.objects.get(idempotency_key=key)
        assert PendingReport.objects.get(idempotency_key=key).result["batch_id"] == batch.pk
        changes = WeightChange.objects.filter(node=node, field="feedback_weight")
        assert list(changes.values_list("batch_id", flat=True)) == [batch.pk]
        assert Node.objects.get(pk=node.pk).feedback_weight == changes.get().after
    # Sent again after the pressure (a client's retry): the first batch answers, nothing applied twice.
    again = api(ada).post(
        url(acme_graph, "during", "uses"), _uses(n["b"]), format="json", HTTP_IDEMPOTENCY_KEY="during-1"
    )
    assert again.status_code in (200, 202), again.data
    assert UpdateBatch.objects.filter(idempotency_key=second).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("sqlstate", ["53100", "53200"], ids=["disk_full", "out_of_memory"])
def test_pressure_never_spends_a_reports_last_attempt(sqlstate, acme_graph, small_graph, edges, ada, monkeypatch):
    """However long the pressure lasts (here past the last attempt), the report waits for it to end:
    a full disk must not turn reports accepted before it into failed ones."""
    n = small_graph
    session = make_session(acme_graph, "s1", [(n["c"], edges["bc"], True)], ada)
    outbox.record(ada, session, Report("uses", "k-pressure", (UseItem("node", n["c"].pk, "explicit"),)))
    monkeypatch.setattr(outbox, "MAX_ATTEMPTS", 1)  # the pressure outlasts every attempt the backoff allows
    _sql(REFUSE, ON_BATCHES[sqlstate])
    outbox.drain(acme_graph.pk)
    row = PendingReport.objects.get()
    assert row.state == "pending" and row.attempts == 1, row.last_error
    assert not UpdateBatch.objects.exists()

    _sql(*LIFT)
    PendingReport.objects.update(not_before=row.created_at)  # its backoff over
    assert outbox.drain(acme_graph.pk)["applied"] == 1
    assert UpdateBatch.objects.get().idempotency_key == "k-pressure"


@pytest.mark.django_db
def test_a_report_failing_for_another_reason_still_stops_at_its_last_attempt(acme_graph, small_graph, edges, ada):
    """The other side of the rule: an error that is not pressure (a check constraint refusing the batch)
    fails the row after MAX_ATTEMPTS, so a report that can never apply is not retried forever."""
    n = small_graph
    session = make_session(acme_graph, "s1", [(n["c"], edges["bc"], True)], ada)
    outbox.record(ada, session, Report("uses", "k-bad", (UseItem("node", n["c"].pk, "explicit"),)))
    _sql(REFUSE, ON_BATCHES["55000"])
    for _ in range(outbox.MAX_ATTEMPTS):
        outbox.drain(acme_graph.pk)
        PendingReport.objects.update(not_before=PendingReport.objects.get().created_at)
    row = PendingReport.objects.get()
    assert row.state == "failed" and row.attempts == outbox.MAX_ATTEMPTS
