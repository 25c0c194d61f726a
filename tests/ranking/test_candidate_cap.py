"""A context call stores at most MAX_CANDIDATES_PER_INJECTION candidates (every selected one always), and
a what-if draft names at most MAX_WHATIF_PRIORITIES edge types (issue 15 item 9: unbounded logs and drafts)."""

import pytest

from feedback.models import ContextInjection, InjectionCandidate
from ranking.whatif import MAX_WHATIF_PRIORITIES

pytestmark = pytest.mark.django_db


def test_candidate_log_is_capped_but_keeps_the_selected(rg, api, ada, settings):
    settings.MAX_CANDIDATES_PER_INJECTION = 2
    n = rg["nodes"]
    r = api(ada).post(
        f"/api/graphs/{rg['graph'].pk}/context/",
        {"session": "s", "query": "ranking weights", "start_nodes": [n["a"].pk], "budget": 3},
        format="json",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    injection = ContextInjection.objects.get(pk=body["injection"])
    logged = list(InjectionCandidate.objects.filter(injection=injection).order_by("rank"))
    assert body["considered"] > 3  # more were considered than were kept
    assert [c.rank for c in logged] == [1, 2, 3] and all(c.selected for c in logged)
    assert injection.params["candidates"] == body["considered"] and injection.params["candidates_logged"] == 3


def test_whatif_priorities_are_capped(rg, api, oscar):
    priorities = {f"t{i}": 0.1 for i in range(MAX_WHATIF_PRIORITIES + 1)}
    r = api(oscar).post(f"/api/graphs/{rg['graph'].pk}/whatif/", {"edge_type_priorities": priorities}, format="json")
    assert r.status_code == 400 and "edge_type_priorities" in r.json(), r.content
