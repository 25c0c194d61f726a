"""What the framework around a hot endpoint costs, apart from the endpoint's own work (docs/performance.md,
"Issue 27: the hot endpoints"):

    .venv/bin/python -m bench.dispatch                    # CPU per call, ms: dispatch, validation, publish

- ``dispatch``: a POST through a plain Django view (``json.loads``, ``JsonResponse``) and through a DRF
  ``APIView`` (request wrapping, negotiation, parsers, renderer) with no authentication or permission
  class, both called directly (no middleware, which every view shares); the RequestFactory's own cost
  is measured and subtracted.
- ``validation``: the report's and the context call's request serializers on the load test's bodies,
  and how much of it is DRF copying the declared fields for each serializer.
- ``publish``: a kombu publish of a small message through kombu's Redis transport and through
  ``graphadmin.runtime.redis_broker`` (one client per channel), alternating (needs CELERY_BROKER_URL=redis://...).

Each figure is the best of five rounds of process CPU time (``time.process_time``).
"""

from __future__ import annotations

import json
import os
import time
import uuid

from bench.loadtest import setup_django

ROUNDS = 5


def best_ms(fn, n: int) -> float:
    """The least CPU per call of ``fn`` over ROUNDS rounds of ``n`` calls, in ms."""
    for _ in range(min(n, 200)):
        fn()
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - started) / n * 1000)
    return best


def dispatch() -> dict[str, float]:
    from django.http import JsonResponse
    from django.test import RequestFactory
    from django.views.decorators.csrf import csrf_exempt
    from rest_framework.permissions import AllowAny
    from rest_framework.response import Response
    from rest_framework.views import APIView

    answer = {"status": "queued", "task_id": str(uuid.uuid4()), "idempotency_key": "uses:1:client:k"}
    body = json.dumps({"items": [{"node": 1, "signal": "explicit"}, {"node": 2, "signal": "explicit"}]})

    class Drf(APIView):
        authentication_classes = []
        permission_classes = [AllowAny]

        def post(self, request):
            request.data  # noqa: B018 (parsed, as a view reads it)
            return Response(answer, status=202)

    @csrf_exempt
    def plain(request):
        json.loads(request.body)
        return JsonResponse(answer, status=202)

    factory, drf = RequestFactory(), Drf.as_view()

    def call(view):
        def run():
            response = view(factory.post("/x", body, content_type="application/json"))
            if hasattr(response, "render"):
                response.render()

        return run

    floor = best_ms(lambda: factory.post("/x", body, content_type="application/json"), 3000)
    return {
        "plain Django view": best_ms(call(plain), 3000) - floor,
        "DRF APIView": best_ms(call(drf), 3000) - floor,
    }


def validation() -> dict[str, float]:
    from feedback.serializers import OutcomeSerializer, UsesSerializer
    from ranking.serializers import ContextRequestSerializer

    uses = {"items": [{"node": 1, "signal": "explicit"}, {"node": 2, "signal": "explicit"}]}
    context = {"session": "s1", "query": "how does the parcel tracker store events?", "budget": 5}

    def valid(cls, data):
        return lambda: cls(data=data).is_valid(raise_exception=True)

    return {
        "UsesSerializer": best_ms(valid(UsesSerializer, uses), 2000),
        "OutcomeSerializer": best_ms(valid(OutcomeSerializer, {"outcome": "accepted"}), 2000),
        "ContextRequestSerializer": best_ms(valid(ContextRequestSerializer, context), 2000),
        "  its fields copied": best_ms(lambda: ContextRequestSerializer(data=context).fields, 2000),
    }


def publish() -> dict[str, float]:
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        return {}
    from kombu import Connection, Exchange, Queue

    from graphadmin.runtime.redis_broker import Transport

    name = f"bench-dispatch-{uuid.uuid4().hex[:8]}"
    queue = Queue(name, Exchange(name, type="direct"), routing_key=name)
    message = {"task": "feedback.drain_reports", "kwargs": {"graph_id": 1}}
    out = {}
    with Connection(url) as kombu_conn, Connection(url, transport=Transport) as our_conn:
        queue(kombu_conn.default_channel).declare()
        try:
            for label, conn in (("kombu's Redis transport", kombu_conn), ("redis_broker (this project)", our_conn)):
                producer = conn.Producer()
                out[label] = best_ms(
                    lambda p=producer: p.publish(message, exchange=queue.exchange, routing_key=name), 500
                )
        finally:
            queue(kombu_conn.default_channel).delete()
    return out


def main() -> int:
    setup_django()
    for title, figures in (("dispatch", dispatch()), ("validation", validation()), ("publish", publish())):
        print(f"\n{title} (ms CPU per call)")
        for label, ms in figures.items():
            print(f"  {label:40} {ms:7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
