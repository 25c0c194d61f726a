"""A request's wait for a web thread, and the 503 a request gets when that wait ran past its budget (issue 37).

gunicorn's gthread worker accepts every connection at once and queues each request for its thread pool.
Under overload the queue grows unseen: a context call that waited two seconds for a thread is then answered
as if nothing happened, seconds late, and the agent cannot tell a slow service from a busy one. The web
worker (``graphadmin/runtime/webworker.py``) stamps each request when it is queued and records, in the
thread that takes it, how long it waited (``record_wait``). ``AdmissionMiddleware``, before any of the
request's work (no session, no authentication, no query), answers a request that waited longer than
``WEB_QUEUE_BUDGET_MS`` with 503 and ``Retry-After`` (``WEB_BUSY_RETRY_AFTER_SECONDS``): the agent hears at
once that the service is busy and when to come back, and the queue sheds what it cannot serve in time
instead of serving every request late. A use report refused so was not accepted (nothing is written): the
agent sends it again, as after any 503.

A session's reports (uses, answer text, outcome: ``REPORT_PATH``) wait up to ``WEB_REPORT_QUEUE_BUDGET_MS``
(2,000 ms) instead: they are what the graph learns from, an agent that meets a busy service drops them
more readily than it drops a question, and each costs a quarter of a context call's CPU and answers 202
at once. Measured under 64 agents with one budget for all: 11 of about 800 reports were refused on every
one of five attempts (docs/performance.md, "Overload").

Health and readiness probes and static files are never refused (a probe must see the process alive; a
static file costs nothing). Outside gunicorn (the test server, ``runserver``) no wait is recorded and
nothing is refused.
"""

from __future__ import annotations

import logging
import math
import re
import threading

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.template import loader

log = logging.getLogger(__name__)

_thread = threading.local()
# Never refused: liveness and readiness probes, static files (WhiteNoise serves them from memory).
EXEMPT_PREFIXES = ("/healthz", "/readyz", "/static/")
# A session's reports (feedback/urls.py: session-uses, session-response, session-outcome), given the longer budget.
REPORT_PATH = re.compile(r"^/api/graphs/\d+/sessions/.+/(uses|response|outcome)/$")


def record_wait(seconds: float | None) -> None:
    """How long the request this thread takes next waited for it (None: not measured)."""
    _thread.waited = seconds


def take_wait() -> float | None:
    """The wait recorded for this thread's request, once (a thread serves many requests)."""
    waited = getattr(_thread, "waited", None)
    _thread.waited = None
    return waited


def over_budget(waited: float | None, budget_ms: int) -> bool:
    """Whether a request that waited ``waited`` seconds for its thread is past a budget (0: no budget)."""
    return waited is not None and budget_ms > 0 and waited * 1000 > budget_ms


def budget_ms(request) -> int:
    """The request's budget for its wait (0: none): a session's report has the longer one (0 stays 0)."""
    budget = settings.WEB_QUEUE_BUDGET_MS
    if budget and request.method == "POST" and REPORT_PATH.match(request.path):
        return max(budget, settings.WEB_REPORT_QUEUE_BUDGET_MS)
    return budget


def busy_response(request, waited: float, budget: int) -> HttpResponse:
    """503 with Retry-After: JSON for the API and MCP callers, the page otherwise."""
    retry_after = settings.WEB_BUSY_RETRY_AFTER_SECONDS
    detail = (
        f"The service is busy: this request waited {waited * 1000:.0f} ms for a worker (the budget is "
        f"{budget} ms) and was not started; nothing was written. Retry after {retry_after} s."
    )
    if request.path.startswith(("/api/", "/mcp")) or "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse({"detail": detail, "retry_after": retry_after}, status=503)
    else:
        page = loader.get_template("busy.html").render({"retry_after": retry_after})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(math.ceil(retry_after))
    return response


class AdmissionMiddleware:
    """Refuses, before any work, a request that waited past its budget (``budget_ms``) for its thread."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        waited = take_wait()
        if waited is None or request.path.startswith(EXEMPT_PREFIXES):
            return self.get_response(request)
        budget = budget_ms(request)
        if over_budget(waited, budget):
            log.warning(
                "busy: %s %s waited %.0f ms for a thread (budget %d ms), answered 503",
                request.method,
                request.path,
                waited * 1000,
                budget,
            )
            return busy_response(request, waited, budget)
        return self.get_response(request)
