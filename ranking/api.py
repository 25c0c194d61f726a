"""REST views of the ranking engine: thin (parse, check tenancy, build the request once, call the stage, render
the body of ranking.payloads, which the MCP tools render too).

Rank and search (act ``retrieve``) only read: every role but the agent's reads them, and agents
call them too. Explain and what-if read the injection log (``read``; an agent explains only its
own sessions' injections). Context creates or extends a session and logs an injection, a write
(act ``context``: agents and operators; an existing session only by its owner or an operator).
Another organization's graph or injection is a 404. Errors are 400s naming the field; the
request's transaction (ATOMIC_REQUESTS) rolls back, so nothing is written on error.
"""

from __future__ import annotations

import hashlib
import json

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.response import Response

from feedback.models import ContextInjection
from graphadmin import readiness
from graphadmin.api.views import GRAPH_ID, GraphScopedMixin
from graphadmin.errors import Conflict
from graphadmin.tenancy import NEEDS

from . import serializers as s
from .context import assemble_context
from .explain import explain
from .payloads import context_payload, rank_payload, search_payload
from .retrieval import prepare, rank, search
from .whatif import whatif


class _RankingView(GraphScopedMixin, generics.GenericAPIView):
    write_act = "retrieve"  # POSTs that compute an answer and log nothing

    def parse(self):
        serializer = self.get_serializer(data=self.request.data)
        serializer.is_valid(raise_exception=True)
        self.graph()  # 404 for another organization's graph before anything else
        self._serializer = serializer
        return serializer.validated_data


class RankView(_RankingView):
    """Rank the edges around the start nodes by traversal score, with every component."""

    serializer_class = s.RankRequestSerializer

    @extend_schema(parameters=[GRAPH_ID], request=s.RankRequestSerializer, responses=s.RankResponseSerializer)
    def post(self, request, graph_pk=None):
        self.parse()
        return Response(rank_payload(rank(prepare(self.graph(), self._serializer.to_request()))))


class SearchView(_RankingView):
    """The retrieval pipeline's ranked candidates (vector and triplet entry points, expansion).

    No budget, nothing logged.
    """

    serializer_class = s.SearchRequestSerializer

    @extend_schema(parameters=[GRAPH_ID], request=s.SearchRequestSerializer, responses=s.SearchResponseSerializer)
    def post(self, request, graph_pk=None):
        self.parse()
        result = search(prepare(self.graph(), self._serializer.to_request()))
        return Response(search_payload(result, readiness.vectors_pending(self.graph().pk)))


CONTEXT_IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Retrying a context call with the same key and body returns the first call's answer (the same "
    "injection) instead of logging a second one; the same key with another body is a 409.",
)


class _Replay:
    """A context call's ``Idempotency-Key``: the first answer, kept in the cache for CONTEXT_IDEMPOTENCY_SECONDS
    per (graph, caller, key) with a digest of the body, is the answer to a retry.

    Kept once the request commits (an answer whose injection rolled back is never replayed). Two
    retries racing each other may both run (the cache has no lock); each logs its own injection.
    """

    def __init__(self, request, graph_id: int, data: dict):
        self.answer = None
        client_key = request.headers.get("Idempotency-Key", "").strip()[:200]
        if not client_key:
            self.cache_key = None
            return
        digest = hashlib.sha256(client_key.encode()).hexdigest()
        self.cache_key = f"context-idempotency:{graph_id}:{request.user.pk}:{digest}"
        self.body = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
        stored = cache.get(self.cache_key)
        if stored is None:
            return
        if stored["body"] != self.body:
            raise Conflict(
                "This Idempotency-Key was used for a context call with another body.",
                {"detail": "This Idempotency-Key was used for a context call with another body; use a new key."},
            )
        self.answer = stored["answer"]

    def remember(self, payload: dict) -> None:
        if self.cache_key is None:
            return
        stored = {"body": self.body, "answer": payload}
        key, seconds = self.cache_key, settings.CONTEXT_IDEMPOTENCY_SECONDS
        transaction.on_commit(lambda: cache.set(key, stored, seconds))


class ContextView(_RankingView):
    """The retrieval pipeline's candidates within a budget.

    Logged as a ContextInjection with every candidate considered.
    """

    serializer_class = s.ContextRequestSerializer
    write_act = "context"

    @extend_schema(
        parameters=[GRAPH_ID, CONTEXT_IDEMPOTENCY],
        request=s.ContextRequestSerializer,
        responses={201: s.ContextResponseSerializer},
    )
    def post(self, request, graph_pk=None):
        data = self.parse()
        replay = _Replay(request, self.graph().pk, data)
        if replay.answer is not None:
            return Response(replay.answer, status=status.HTTP_201_CREATED, headers={"Idempotent-Replayed": "true"})
        prepared = prepare(self.graph(), self._serializer.to_request())
        result = assemble_context(prepared, owner=request.user, role=self._access.role)
        payload = context_payload(result, data["session"])
        replay.remember(payload)
        return Response(payload, status=status.HTTP_201_CREATED)


class WhatIfView(_RankingView):
    """Replay the logged sessions' retrievals under a draft policy and the current one (rescored or retrieved
    again, the rest named as not modelled: ranking.whatif). Writes nothing."""

    serializer_class = s.WhatIfRequestSerializer
    write_act = "read"  # a POST that replays the injection log and writes nothing

    @extend_schema(parameters=[GRAPH_ID], request=s.WhatIfRequestSerializer, responses=s.WhatIfResponseSerializer)
    def post(self, request, graph_pk=None):
        data = self.parse()
        result = whatif(
            self.graph(),
            changes=dict(data["policy"]),
            priorities=data["edge_type_priorities"],
            n=data["n"],
            k=data["k"],
            agent=data.get("agent") or None,
            since=data.get("since"),
            until=data.get("until"),
        )
        return Response(result)


class ExplainView(generics.GenericAPIView):
    """Every candidate of an injection with its components; with ?i=&j=, which components made rank i beat rank j."""

    serializer_class = s.ExplainResponseSerializer

    @extend_schema(
        parameters=[
            OpenApiParameter("id", int, OpenApiParameter.PATH, description="The injection's id."),
            OpenApiParameter("i", int, description="A rank to compare (1-based)."),
            OpenApiParameter("j", int, description="The rank it is compared with."),
        ],
        responses=s.ExplainResponseSerializer,
    )
    def get(self, request, pk=None):
        injection = get_object_or_404(
            ContextInjection.objects.for_user(request.user, NEEDS["read"], or_own="session__owner").select_related(
                "session", "policy_revision"
            ),
            pk=pk,
        )
        params = s.ExplainQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        return Response(explain(injection, params.validated_data.get("i"), params.validated_data.get("j")))
