"""API error handling, the one place the API maps errors: DRF's own, the domain errors of
``graphadmin.errors`` (400 ``{field: [messages]}``, 404, 403, 409) and database-level refusals.

Whatever the error, the request's transaction is rolled back (ATOMIC_REQUESTS), so nothing is written.
"""

from django.conf import settings
from django.db import DataError, IntegrityError, OperationalError
from django.db.models import ProtectedError
from psycopg.errors import LockNotAvailable, QueryCanceled
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from graphadmin.errors import Conflict, Forbidden, InputError, NotFound, TooManyRequests
from graphadmin.runtime.errorpages import PRESSURE_DETAIL, UNAVAILABLE_DETAIL, database_unavailable, short_of_resources


def exception_handler(exc, context):
    if isinstance(exc, InputError):
        exc = exceptions.ValidationError(exc.errors)
    elif isinstance(exc, NotFound):
        exc = exceptions.NotFound(str(exc))
    elif isinstance(exc, Forbidden):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, TooManyRequests):
        exc = exceptions.Throttled(wait=exc.wait, detail=str(exc))
    elif isinstance(exc, Conflict):
        set_rollback()
        return Response(exc.body, status=status.HTTP_409_CONFLICT)
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, ProtectedError):
        set_rollback()
        return Response(
            {"detail": "This object has history that must be kept; archive it instead of deleting it."},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, IntegrityError):
        set_rollback()
        return Response(
            {"detail": f"Refused by a database constraint: {exc.__cause__ or exc}"}, status=status.HTTP_400_BAD_REQUEST
        )
    if isinstance(exc, DataError) and "NUL" in str(exc):
        # A NUL character in text a field passed on without checking it (a lookup by name, a JSON key).
        set_rollback()
        return Response({"detail": "Text may not contain NUL (0x00) characters."}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, OperationalError) and isinstance(exc.__cause__, LockNotAvailable):
        # lock_timeout (LOCK_TIMEOUT_MS): a row or table this request needs is held by another transaction.
        set_rollback()
        response = Response(
            {"detail": f"A lock this request needs was held for more than {settings.LOCK_TIMEOUT_MS} ms; retry."},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
        response["Retry-After"] = str(settings.DATABASE_RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, OperationalError) and isinstance(exc.__cause__, QueryCanceled):
        # statement_timeout (graphadmin.runtime.middleware.StatementTimeoutMiddleware): the request asked for more
        # work than one request may do; nothing was written.
        set_rollback()
        return Response(
            {"detail": f"The request took longer than the {settings.STATEMENT_TIMEOUT_MS} ms a statement may run."},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
        )
    if resource := short_of_resources(exc):
        # The database refuses writes (disk full, out of memory): a 503 the client retries; the request's
        # transaction rolled back, and the reports accepted before are rows it did not touch.
        set_rollback()
        response = Response(
            {"detail": PRESSURE_DETAIL.format(resource=resource)}, status=status.HTTP_503_SERVICE_UNAVAILABLE
        )
        response["Retry-After"] = str(settings.DATABASE_RETRY_AFTER_SECONDS)
        return response
    if database_unavailable(exc):
        # The connection was refused or lost (graphadmin.runtime.errorpages): a 503 the client retries, never a 500.
        set_rollback()
        response = Response({"detail": UNAVAILABLE_DETAIL}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        response["Retry-After"] = str(settings.DATABASE_RETRY_AFTER_SECONDS)
        return response
    return None
