"""Normalize (ceiling mode): rescale live edge weights so the maximum is 1.0, as a batch."""

import pytest

from feedback import actions
from feedback.models import UpdateBatch
from graphadmin.models import Edge

from .conftest import reload

pytestmark = pytest.mark.django_db


def test_rescales_so_the_maximum_is_one(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.4)
    Edge.objects.filter(pk=edges["bc"].pk).update(weight=0.2)
    result = actions.normalize(oscar, acme_graph)
    assert result.status == "applied" and result.edge_updates == 2
    assert reload(edges["ab"]).weight == pytest.approx(1.0)
    assert reload(edges["bc"]).weight == pytest.approx(0.5)
    assert UpdateBatch.objects.get(pk=result.batch_id).kind == "normalize"


def test_nothing_to_do_when_the_maximum_is_already_one(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=1.0)
    assert actions.normalize(oscar, acme_graph).status == "nothing_to_change"
    assert not UpdateBatch.objects.exists()


def test_archived_edges_are_left_alone(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.25)
    Edge.objects.filter(pk=edges["bc"].pk).update(weight=0.9, archived=True)
    actions.normalize(oscar, acme_graph)
    assert reload(edges["ab"]).weight == pytest.approx(1.0)
    assert reload(edges["bc"]).weight == 0.9
