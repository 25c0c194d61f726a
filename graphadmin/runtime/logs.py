"""What every log line says about where it came from: the user of a web request, the id of a Celery task.

settings.LOGGING puts ``ContextFilter`` on the console handler, beside django-guid's request id filter,
so each record gets ``user`` (the request's authenticated user, once authentication has run: a session
user at once, a token user from DRF's authentication on) and ``task_id`` (the Celery task being run),
each None when there is none. ``RequestContextMiddleware`` keeps the request for the filter;
``TextFormatter`` is the human format (LOG_FORMAT=text).
"""

from __future__ import annotations

import logging
from contextvars import ContextVar

from celery import current_task
from django.utils.functional import SimpleLazyObject, empty

_request: ContextVar = ContextVar("graphadmin_request", default=None)


class RequestContextMiddleware:
    """Keeps the current request where log filters can read it (after AuthenticationMiddleware)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


def current_user(request=None) -> str | None:
    """The username of ``request``'s (default: the current request's) user, if known without a query; else None."""
    request = request if request is not None else _request.get()
    if request is None:
        return None
    user = getattr(request, "__dict__", {}).get("user")
    # A session user not yet looked up stays unlooked-up: a log line must not cost a query (or fail in
    # a broken transaction). DRF sets the plain user object on the request once it has authenticated.
    if user is None or (isinstance(user, SimpleLazyObject) and user._wrapped is empty):
        return None
    return user.get_username() if user.is_authenticated else None


class TextFormatter(logging.Formatter):
    """LOG_FORMAT=text: ``time level logger message [request_id=... user=... task_id=...]``, naming only those set."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        context = " ".join(
            f"{name}={value}" for name in ("request_id", "user", "task_id") if (value := getattr(record, name, None))
        )
        return f"{line} [{context}]" if context else line


class ContextFilter(logging.Filter):
    """Adds ``user`` and ``task_id`` to every record (None when not in a request or a task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "user"):
            # django.request's lines (a 4xx or 5xx answered) come after the middleware, with the request.
            record.user = current_user(getattr(record, "request", None))
        if not hasattr(record, "task_id"):
            task = current_task
            record.task_id = task.request.id if task and task.request and task.request.id else None
        return True
