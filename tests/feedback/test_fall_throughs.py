"""Outcome and use reports the engine cannot apply: a clear status and a structured warning, never an exception."""

import logging

import pytest

from feedback import actions
from feedback.actions import UseItem
from feedback.models import AgentSession, UpdateBatch, WeightHistory
from graphadmin.models import AuditEvent

from .conftest import make_session

pytestmark = pytest.mark.django_db


def _warned(caplog, status):
    return [r for r in caplog.records if r.levelno == logging.WARNING and getattr(r, "feedback_status", None) == status]


def _nothing_written():
    return (
        not UpdateBatch.objects.exists()
        and not WeightHistory.objects.exists()
        and not AuditEvent.objects.filter(action="graph.feedback").exists()
    )


def test_unknown_session(caplog, oscar, acme_graph):
    result = actions.do_apply_outcome(acme_graph, "nope", "accepted", actor=oscar)
    assert result.status == "unknown_session" and result.batch_id is None
    assert _warned(caplog, "unknown_session")[0].session == "nope"
    assert _nothing_written()


def test_session_without_injection(caplog, oscar, acme_graph):
    AgentSession.objects.create(graph=acme_graph, external_id="bare")
    assert actions.do_apply_outcome(acme_graph, "bare", "accepted", actor=oscar).status == "no_injection"
    assert _warned(caplog, "no_injection")
    assert _nothing_written()
    assert AgentSession.objects.get(external_id="bare").outcome is None


def test_injection_that_surfaced_nothing(caplog, oscar, acme_graph, small_graph):
    make_session(acme_graph, "cut", [(small_graph["a"], None, False)])
    assert actions.do_apply_outcome(acme_graph, "cut", "rejected", actor=oscar).status == "nothing_surfaced"
    assert _warned(caplog, "nothing_surfaced")
    assert _nothing_written()


def test_feedback_disabled(caplog, oscar, acme_graph, surfaced, edges):
    acme_graph.feedback_enabled = False
    acme_graph.save()
    surfaced.graph.refresh_from_db()
    assert actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar).status == "feedback_disabled"
    assert (
        actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar).status
        == "feedback_disabled"
    )
    assert len(_warned(caplog, "feedback_disabled")) == 2
    assert _nothing_written()
