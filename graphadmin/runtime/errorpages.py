"""The product's own 500 and 503 answers (``handler500`` in ``graphadmin.urls``).

Django calls ``server_error`` for any exception no view or API handler answered. A database that
cannot be reached (its connection refused or lost: an ``OperationalError`` or ``InterfaceError``
raised while opening the request's transaction, in a middleware or in a view) is not the client's
fault and not a bug: it is a 503 with ``Retry-After``, so agents and load balancers retry instead
of believing a failure. Anything else is a 500. The API (``/api/``, ``/mcp``) answers JSON, pages
answer HTML from ``templates/500.html`` and ``templates/503.html``; neither shows a trace (the log
has it). Rendering touches no database (no request context: no user, no session).
"""

from __future__ import annotations

import sys

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpResponse, JsonResponse
from django.template import loader
from django.views.decorators.csrf import requires_csrf_token

UNAVAILABLE_DETAIL = "The database is unavailable for a moment; nothing was written. Retry after the delay given."
PRESSURE_DETAIL = (
    "The database is short of {resource} and refuses writes for now; nothing was written, and what was accepted "
    "before is kept. Retry after the delay given."
)
# PostgreSQL's class 53, insufficient resources: the machine's state, not the request's fault.
RESOURCES = {"53100": "disk space", "53200": "memory", "53300": "connections", "53400": "a configured resource"}


def short_of_resources(exc: BaseException | None) -> str:
    """The resource PostgreSQL said it is short of when it refused ``exc``'s statement (its SQLSTATE class
    53: disk full, out of memory, ...), else ''. A write refused so is worth retrying once the pressure ends."""
    if not isinstance(exc, OperationalError):
        return ""
    state = getattr(exc.__cause__, "sqlstate", None) or ""
    return RESOURCES.get(state, "a resource") if state.startswith("53") else ""


def database_unavailable(exc: BaseException | None) -> bool:
    """Whether ``exc`` says the database could not be reached or its connection was lost.

    A refusal of the request's own making (a constraint, bad data, a timeout the API maps to its
    own 503) is not this: those are OperationalError subclasses only for connection failures here.
    """
    return isinstance(exc, OperationalError | InterfaceError)


def _wants_json(request) -> bool:
    return request.path.startswith(("/api/", "/mcp")) or "application/json" in request.headers.get("Accept", "")


@requires_csrf_token
def server_error(request, template_name="500.html"):
    exc = sys.exc_info()[1]
    if database_unavailable(exc):
        status, detail, template_name = 503, UNAVAILABLE_DETAIL, "503.html"
    else:
        status, detail = 500, "Server error: it is logged; nothing was written."
    if _wants_json(request):
        response = JsonResponse({"detail": detail}, status=status)
    else:
        response = HttpResponse(loader.get_template(template_name).render(), status=status)
    if status == 503:
        response["Retry-After"] = str(settings.DATABASE_RETRY_AFTER_SECONDS)
    return response
