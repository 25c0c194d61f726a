"""The dashboard's one mapping of the domain errors (``graphadmin.errors``).

NotFound is the 404 page and Forbidden the 403 page (Django's own handlers); InputError and
Conflict become an error message on the page the person came from (its Referer when it is this
site, else the page one level up: the batch page for ``.../batches/5/rollback/``).
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme

from graphadmin.errors import Conflict, Forbidden, InputError, NotFound


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
