"""A report whose transaction PostgreSQL picks as a deadlock victim is run again, a bounded number of times.

The errors are real PostgreSQL errors (``RAISE ... USING ERRCODE``: 40P01 deadlock_detected, 40001
serialization_failure), raised inside the report's transaction after its writes, so the retry also
shows that the victim's writes were rolled back whole and the report applies once.
"""

import pytest
from django.db import OperationalError, connection, transaction

from feedback import actions, ledger
from feedback.actions import UseItem
from feedback.models import UpdateBatch, UseEvent, WeightChange

from .conftest import reload


def raise_sqlstate(code: str) -> None:
    with connection.cursor() as cur:
        cur.execute(f"DO $$ BEGIN RAISE EXCEPTION 'victim' USING ERRCODE = '{code}'; END $$")


@pytest.mark.parametrize("code", ["40P01", "40001"])
def test_a_victim_report_is_retried_and_applies_once(code, surfaced, edges, oscar):
    attempts = []

    def report():
        with transaction.atomic():
            result = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
            attempts.append(result.status)
            if len(attempts) < 3:
                raise_sqlstate(code)
            return result

    result = ledger.retry_transient(report, what="test", backoff=0.001)
    assert attempts == ["applied", "applied", "applied"]
    assert result.status == "applied"
    assert reload(edges["ab"]).weight == pytest.approx(0.55)
    assert UpdateBatch.objects.count() == 1 and UseEvent.objects.count() == 1 and WeightChange.objects.count() == 1


def test_retries_are_bounded(db):
    attempts = []

    def always():
        attempts.append(1)
        with transaction.atomic():
            raise_sqlstate("40P01")

    with pytest.raises(OperationalError):
        ledger.retry_transient(always, what="test", retries=2, backoff=0.001)
    assert len(attempts) == 3


def test_other_errors_are_not_retried(db):
    attempts = []

    def broken():
        attempts.append(1)
        with transaction.atomic():
            raise_sqlstate("57014")  # query_canceled: not a conflict between writers

    with pytest.raises(OperationalError):
        ledger.retry_transient(broken, what="test", backoff=0.001)
    assert attempts == [1]
