"""POST /api/graphs/{id}/context/ with an Idempotency-Key (issue 26, item 6): a retry with the same key and
body returns the first answer (the same injection) and logs no second injection; the same key with
another body is a 409; another caller's or graph's key is its own."""

import pytest

from feedback.models import ContextInjection

pytestmark = pytest.mark.django_db(transaction=True)  # the answer is kept once the request commits


def _post(client, rg, key=None, **body):
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    data = {"session": "idem-1", "query": "ranking weights", **body}
    return client.post(f"/api/graphs/{rg['graph'].pk}/context/", data, format="json", **extra)


def test_a_retry_with_the_same_key_returns_the_first_injection(rg, api, ada):
    first = _post(api(ada), rg, key="retry-1")
    assert first.status_code == 201, first.content
    again = _post(api(ada), rg, key="retry-1")
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert ContextInjection.objects.count() == 1


def test_without_a_key_each_call_logs_its_injection(rg, api, ada):
    assert _post(api(ada), rg).status_code == 201
    assert _post(api(ada), rg).status_code == 201
    assert ContextInjection.objects.count() == 2


def test_the_same_key_with_another_body_is_a_409(rg, api, ada):
    assert _post(api(ada), rg, key="k").status_code == 201
    response = _post(api(ada), rg, key="k", query="something else")
    assert response.status_code == 409
    assert "another body" in response.json()["detail"]
    assert ContextInjection.objects.count() == 1


def test_a_key_is_the_callers_own(rg, api, ada, abe):
    assert _post(api(ada), rg, key="shared").status_code == 201
    other = _post(api(abe), rg, key="shared", session="idem-2")
    assert other.status_code == 201 and "Idempotent-Replayed" not in other
    assert ContextInjection.objects.count() == 2
