"""API error handling: DRF's handler, plus clear answers for database-level refusals.

Whatever the error, the request's transaction is rolled back (ATOMIC_REQUESTS), so nothing is written.
"""

from django.db import IntegrityError
from django.db.models import ProtectedError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from graphadmin.embeddings import EmbeddingModelMismatch


def exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, EmbeddingModelMismatch):
        set_rollback()
        return Response(exc.as_dict(), status=status.HTTP_409_CONFLICT)
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
    return None
