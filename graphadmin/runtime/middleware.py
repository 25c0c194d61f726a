"""The dashboard's one mapping of the domain errors (``graphadmin.errors``).

NotFound is the 404 page and Forbidden the 403 page (Django's own handlers); InputError and
Conflict become an error message on the page the person came from (its Referer when it is this
site, else the page one level up: the batch page for ``.../batches/5/rollback/``).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme

from graphadmin.errors import Conflict, Forbidden, InputError, NotFound
from graphadmin.runtime.timeouts import remember_timeouts, set_statement_timeout, timeouts_in_effect


class DomainErrorMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if request.path.startswith("/api/"):
            return None  # the REST API maps them itself (graphadmin.api.errors)
        if isinstance(exception, NotFound):
            raise Http404(str(exception)) from exception
        if isinstance(exception, Forbidden):
            raise PermissionDenied(str(exception)) from exception
        if isinstance(exception, InputError | Conflict):
            messages.error(request, str(exception))
            return redirect(_back(request))
        return None


def _back(request) -> str:
    referer = request.headers.get("Referer", "")
    if referer and url_has_allowed_host_and_scheme(referer, {request.get_host()}, request.is_secure()):
        return referer
    return request.path.rstrip("/").rsplit("/", 1)[0] + "/"


class StatementTimeoutMiddleware:
    """Every web request's statements run under PostgreSQL's ``statement_timeout`` (settings.STATEMENT_TIMEOUT_MS),
    ``lock_timeout`` (LOCK_TIMEOUT_MS) and ``idle_in_transaction_session_timeout`` (IDLE_IN_TRANSACTION_TIMEOUT_MS).

    Set as a session setting just before the request's first statement (an execute wrapper), so a
    request that never queries (``/healthz``, static files) never touches the database, and the
    setting holds inside the view's transaction (ATOMIC_REQUESTS opens it later, in the view). On a
    persistent connection (CONN_MAX_AGE) it is set once: a connection whose setting was committed with
    these values is not sent it again (one round trip less per request); one whose transaction rolled
    back (the setting with it) is sent it again. A cancelled statement is answered 503 by the API
    (graphadmin.api.errors). Celery workers set their own, longer one (graphadmin.celery).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        values = (settings.STATEMENT_TIMEOUT_MS, settings.LOCK_TIMEOUT_MS, settings.IDLE_IN_TRANSACTION_TIMEOUT_MS)
        pending = [values]

        def first_statement_sets_timeout(execute, sql, params, many, context):
            if pending:
                statement_ms, lock_ms, idle_ms = pending.pop()
                wrapper = context["connection"]
                if not timeouts_in_effect(wrapper, values):
                    set_statement_timeout(statement_ms, wrapper, lock_ms=lock_ms, idle_ms=idle_ms)
                    remember_timeouts(wrapper, values)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(first_statement_sets_timeout):
            return self.get_response(request)


class RefuseNulInQueryMiddleware:
    """A query parameter holding a NUL character (``%00``) is a 400 naming it, on every page and API path.

    PostgreSQL text cannot hold NUL, so such a value reaching a filter was a 500 (a DataError) wherever
    a view filters by a text parameter (``?session=``, ``?action=``, ``?kind=``, ...).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                message = "Text may not contain NUL (0x00) characters."
                if request.path.startswith("/api/"):
                    return JsonResponse({name.replace("\x00", ""): [message]}, status=400)
                return HttpResponseBadRequest(f"{name.replace(chr(0), '')}: {message}", content_type="text/plain")
        return self.get_response(request)
