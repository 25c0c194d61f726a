"""The MCP server: the agents' tools over the knowledge graph (``manage.py mcp_server``).

Eight tools, each a thin adapter over the same code paths as the REST API:

- ``graph_search``     -> ranking.mcp.search      (POST /api/graphs/{id}/search/)
- ``graph_context``    -> ranking.mcp.context     (POST /api/graphs/{id}/context/)
- ``graph_record_use`` -> feedback.mcp.record_use (POST .../sessions/{sid}/uses/, /response/)
- ``graph_improve``    -> feedback.mcp.improve    (POST .../sessions/{sid}/outcome/)
- ``graph_explain``    -> ranking.mcp.explain     (GET /api/injections/{id}/explain/)
- ``graph_remember``   -> feedback.mcp.remember   (POST /api/graphs/{id}/memory/remember/)
- ``graph_link``       -> feedback.mcp.link       (POST /api/graphs/{id}/memory/link/)
- ``graph_forget``     -> feedback.mcp.forget     (POST /api/graphs/{id}/memory/forget/)

This module is a composition module (it may import every app): it keeps the authentication, the one
transaction per call and the registration of the tools (names, descriptions, JSON schemas); the
tool bodies live in the app whose data they are about.

Input is validated by the API's own DRF serializers, so bounds and messages are the API's; the
JSON schema of each tool documents the same bounds. Tenancy and roles are the API's: a graph or
injection of another organization is "not found"; context and reports need the ``agent`` role
(on the caller's own sessions) or operator and up (``graphadmin.tenancy``). Each call
runs in one transaction (like ATOMIC_REQUESTS), so feedback tasks are enqueued on commit and an
error writes nothing. Feedback reports (uses, response, outcome) are applied by the Celery worker,
exactly as through the API: the tools answer ``queued`` with the task id, and ``graph_explain``
lists the session's update batches once the worker has applied them.

Authentication is an API token, the REST API's (django-rest-knox: hashed, expiring; ``manage.py
create_token USERNAME`` or ``agent_token``):

- stdio: the server's token (``--token`` or ``GRAPHADMIN_TOKEN``) is checked at start (a bad token
  stops the server with an error) and again on every call (a revoked or expired token, or a
  deactivated user, is refused from then on).
- streamable HTTP: every HTTP request carries ``Authorization: Bearer <token>``; the SDK's bearer
  middleware refuses a missing or unknown token with 401, and each tool call acts as that token's user.
  Bad tokens count against the client address as on the REST API (graphadmin.api.auth): over the
  limit, every request from it is 429 (``BadTokenGate``) until the window has passed.

Transport security (HTTP, ``transport_security``): DNS-rebinding protection is on whatever address the
server is bound to: the ``Host`` header must be a loopback name, the bound address itself or one of
the operator's ``allowed_hosts`` (421 otherwise), and a browser's ``Origin``, when there is one, a
loopback origin or one of ``allowed_origins`` (403 otherwise). The SDK validates the rest of the
streamable HTTP transport (sessions, ``Mcp-Method``/``Mcp-Name`` headers, protocol versions);
tests/graphadmin/agents/test_mcp_conformance.py runs the protocol's conformance suite against it.

Django's ORM is synchronous: the tools are async functions that run their work in Django's one
thread-sensitive executor (asgiref's ``sync_to_async(thread_sensitive=True)``), closing stale
connections around each call like a request does.
"""

from __future__ import annotations

import json
import math
from contextvars import ContextVar
from importlib.metadata import version
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field
from rest_framework import serializers as drf
from rest_framework.exceptions import AuthenticationFailed, Throttled, ValidationError
from rest_framework.utils.encoders import JSONEncoder
from starlette.responses import JSONResponse

from feedback import mcp as feedback_tools
from feedback import serializers as fs
from graphadmin.agents.mcp_tools import invalid
from graphadmin.api.auth import FailedTokenThrottle, header_token, user_for_key
from graphadmin.errors import Conflict, Forbidden, InputError, NotFound, TooManyRequests
from graphadmin.runtime.timeouts import set_statement_timeout
from ranking import mcp as ranking_tools
from ranking import retrieval  # the documented bounds (docs/ranking.md); needs Django set up, as every caller has
from ranking import serializers as rs

SERVER_NAME = "graphadmin"
INSTRUCTIONS = """\
Long-term memory as a ranked knowledge graph (notes, decisions, observations linked by typed edges).
A session: 1) graph_context with your session id and the task as query -> items to read, and an
injection id; 2) after answering, graph_record_use with the items you actually used (explicit), the
ones that were wrong (negative), and/or your response text (implicit use is detected from it);
3) graph_improve with how the session ended (accepted, rework, rejected). graph_explain shows why
items ranked where they did and the weight updates your feedback caused. graph_search is a plain
ranked lookup that logs nothing. graph_remember writes down what you learned (an observation, a
decision) for later agents; graph_link links notes; graph_forget archives what you wrote.
Ids are the integers these tools return."""

# ---------------------------------------------------------------------------------------------
# Authentication


class NotAuthenticated(Exception):
    """The token is unknown or expired, or its user is inactive."""


def user_for_token(key: str):
    """The active user owning the unexpired API token ``key``; NotAuthenticated otherwise."""
    try:
        return user_for_key(key)
    except AuthenticationFailed as exc:
        raise NotAuthenticated("Invalid token (unknown or expired key, or inactive user).") from exc


# The client address of the HTTP request being served (set by BadTokenGate), for counting bad tokens.
_client: ContextVar[str | None] = ContextVar("mcp_client", default=None)


class DRFTokenVerifier:
    """The SDK's TokenVerifier over the API's tokens, for the streamable HTTP transport (Bearer header)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        client = _client.get()

        def check():
            close_old_connections()
            try:
                user = user_for_token(token)
            except NotAuthenticated:
                if client:
                    FailedTokenThrottle().record_failure(client, token)
                return None
            finally:
                close_old_connections()
            return AccessToken(token=token, client_id=f"user:{user.pk}", scopes=[], subject=user.get_username())

        return await sync_to_async(check, thread_sensitive=True)()


class BadTokenGate:
    """ASGI middleware before the SDK's: a client address over the bad-token limit is answered 429.

    The address is uvicorn's (the proxy's X-Forwarded-For from FORWARDED_ALLOW_IPS addresses).
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        client = (scope.get("client") or ("",))[0]
        authorization = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")

        def refused() -> float | None:
            try:
                close_old_connections()
                FailedTokenThrottle().refuse(client, header_token(authorization))
            except Throttled as exc:
                return exc.wait or 1.0
            return None

        wait = await sync_to_async(refused, thread_sensitive=False)()
        if wait is not None:
            response = JSONResponse(
                {"error": "too_many_requests", "error_description": "Too many bad tokens from this address."},
                status_code=429,
                headers={"Retry-After": str(math.ceil(wait))},
            )
            return await response(scope, receive, send)
        reset = _client.set(client)
        try:
            await self.app(scope, receive, send)
        finally:
            _client.reset(reset)


def http_app(server: MCPServer, *, host: str, transport_security: TransportSecuritySettings):
    """The streamable HTTP ASGI app of ``server`` (at /mcp), behind the bad-token gate."""
    return BadTokenGate(server.streamable_http_app(transport_security=transport_security, host=host))


def _json(payload: Any) -> Any:
    """The payload as the REST API would render it (datetimes in ISO 8601, decimals as floats...)."""
    return json.loads(json.dumps(payload, cls=JSONEncoder))


# ---------------------------------------------------------------------------------------------
# Transport security (streamable HTTP)

# Names a local client reaches the server by, on any port (the SDK's own list for a loopback bind).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
# Bind addresses that stand for every interface: they name no host a client would send.
WILDCARD_BINDS = ("0.0.0.0", "::", "[::]", "")


def _host_port(host: str, port: int) -> str:
    """``host:port`` as it appears in a Host header (an IPv6 address in brackets)."""
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def transport_security(
    host: str = "127.0.0.1", port: int = 8765, allowed_hosts=(), allowed_origins=()
) -> TransportSecuritySettings:
    """DNS-rebinding protection for the HTTP endpoint bound to ``host:port``, always on.

    The SDK turns it on by itself only for a server bound to a loopback address, so a server bound to
    0.0.0.0 (a container) or to a LAN address would answer any ``Host``, which is what a DNS-rebinding
    page relies on. Allowed ``Host`` values: the loopback names on any port, the bound address itself
    (unless it is a wildcard), and ``allowed_hosts`` (the names a reverse proxy passes on, e.g.
    ``graph.example.com``: without a port it matches any port). Allowed ``Origin`` values: the loopback
    origins on any port and ``allowed_origins`` (full origins, ``https://graph.example.com``); a request
    without ``Origin`` (every non-browser agent) passes. A malformed entry is a ValueError naming it.
    """
    hosts = [f"{name}:*" for name in LOOPBACK_HOSTS]
    origins = [f"http://{name}:*" for name in LOOPBACK_HOSTS]
    bound = _host_port(host, port)
    if host not in WILDCARD_BINDS and bound.rpartition(":")[0] not in LOOPBACK_HOSTS:
        hosts.append(bound)
        origins.append(f"http://{bound}")
    for name in allowed_hosts:
        name = name.strip()
        if not name or "/" in name or "*" in name.removesuffix(":*"):
            raise ValueError(f"allowed host {name!r}: give a host name or host:port, e.g. graph.example.com")
        has_port = name.endswith(":*") or name.rpartition(":")[2].isdigit()
        hosts.extend([name] if has_port else [name, f"{name}:*"])
    for origin in allowed_origins:
        origin = origin.strip().rstrip("/")
        scheme, sep, rest = origin.partition("://")
        if scheme not in ("http", "https") or not sep or not rest or "/" in rest:
            raise ValueError(f"allowed origin {origin!r}: give scheme://host[:port], e.g. https://graph.example.com")
        origins.append(origin)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


# ---------------------------------------------------------------------------------------------
# The tools' parameters: each bound read from the API serializer that enforces it


def field_bounds(field) -> dict:
    """The JSON-schema bounds of one DRF field: a list's ``minItems``/``maxItems``, a choice's ``enum``,
    a string's ``minLength``/``maxLength``, a number's ``minimum``/``maximum`` (those it sets)."""
    if isinstance(field, drf.ChoiceField):
        return {"enum": list(field.choices)}
    if isinstance(field, drf.ListField | drf.ListSerializer):
        pairs = (("min_length", "minItems"), ("max_length", "maxItems"))
    elif isinstance(field, drf.CharField):
        pairs = (("min_length", "minLength"), ("max_length", "maxLength"))
    elif isinstance(field, drf.IntegerField | drf.FloatField):
        pairs = (("min_value", "minimum"), ("max_value", "maximum"))
    else:
        pairs = ()
    return {key: getattr(field, attr) for attr, key in pairs if getattr(field, attr, None) is not None}


def bounds(serializer_class, name: str) -> dict:
    """The bounds of ``serializer_class``'s field ``name``, for a tool parameter's JSON schema.

    The tools validate their input with these serializers (the API's bounds and messages); the schema
    states the same bounds so an agent knows them before calling. tests/graphadmin/test_mcp_bounds.py
    checks every bounded parameter of every tool against its serializer field.
    """
    return field_bounds(serializer_class().fields[name])


def choices(serializer_class, name: str):
    """A ``Literal`` of the choices of ``serializer_class``'s ChoiceField ``name`` (the schema's enum)."""
    return Literal[tuple(bounds(serializer_class, name)["enum"])]


SEARCH, CONTEXT, EXPLAIN = rs.SearchRequestSerializer, rs.ContextRequestSerializer, rs.ExplainQuerySerializer
_K, _CONTEXT_K = bounds(SEARCH, "k"), bounds(CONTEXT, "k")
_HOPS, _QUERY = bounds(CONTEXT, "hops"), bounds(CONTEXT, "query")
_START_NODES, _EXCLUDE = bounds(CONTEXT, "start_nodes"), bounds(CONTEXT, "exclude")
_LR, _ALPHA = bounds(fs.UsesSerializer, "learning_rate"), bounds(fs.OutcomeSerializer, "alpha")
_TEXT, _LINKS = bounds(fs.RememberSerializer, "text"), bounds(fs.RememberSerializer, "links")
_RESPONSE = bounds(fs.ResponseTextSerializer, "response")
# The report's idempotency key is cut to 100 characters by feedback.reports (no serializer field).
IDEMPOTENCY_KEY_CHARS = 100


class EdgeKey(BaseModel):
    """An edge named by its ends and type instead of its id."""

    source: int = Field(description="Source node id.")
    target: int = Field(description="Target node id.")
    type: str = Field(description="Edge type name, e.g. related, derived_from, depends_on.")


class UseItemInput(BaseModel):
    """One item of the session's context: a node (by id) or an edge (by id or by its ends and type)."""

    node: int | None = Field(
        default=None, description="Node id (the `node` of a graph_context item). Give node or edge, not both."
    )
    edge: int | EdgeKey | None = Field(
        default=None, description="Edge id (the `edge` of a traversal-mode item), or {source, target, type}."
    )
    signal: choices(fs.UseItemSerializer, "signal") = Field(
        default="explicit",
        description="explicit: you used it (reinforced: w += lr*(1-w)); "
        "negative: it was wrong or misleading (w -= lr*w).",
    )


class MemoryLinkInput(BaseModel):
    """A link from the remembered note to an existing one."""

    node: int | str = Field(description="The note linked to: its id, or its key.")
    type: str = Field(default="related", description="An existing edge type: related, derived_from, depends_on...")


GraphId = Annotated[int, Field(description="The graph's id (GET /api/graphs/ lists yours).")]
Session = Annotated[
    str,
    Field(
        description=f"Your agent session's id (any string up to {bounds(CONTEXT, 'session')['maxLength']} "
        "characters, chosen by you; the same one for the whole session).",
        json_schema_extra=bounds(CONTEXT, "session"),
    ),
]
Query = Annotated[
    str,
    Field(
        description=f"What you are looking for, in words (at most {_QUERY['maxLength']} characters).",
        json_schema_extra=_QUERY,
    ),
]
Vector = Annotated[
    list[float] | None,
    Field(
        description="A query embedding of the graph's dimension; replaces the query text "
        "for similarity. Usually omitted."
    ),
]
NodeIds = Annotated[
    list[int],
    Field(
        description=f"Node ids (at most {_START_NODES['maxItems']}).",
        json_schema_extra=bounds(CONTEXT, "anchors"),
    ),
]
Exclude = Annotated[
    list[int],
    Field(description="Node ids you already hold: never returned.", json_schema_extra=_EXCLUDE),
]
Persona = Annotated[
    dict[str, float],
    Field(description='Affinity in [-1, 1] by node kind or tag, e.g. {"decision": 0.5}; at most 50 entries.'),
]
IdempotencyKey = Annotated[
    str,
    Field(
        description="Optional: retrying a report with the same key applies it once.",
        json_schema_extra={"maxLength": IDEMPOTENCY_KEY_CHARS},
    ),
]


def _session_of(serializer_class, description: str = "Your session id."):
    """The optional session id of a memory write, with its serializer's bound."""
    return Annotated[str | None, Field(description=description, json_schema_extra=bounds(serializer_class, "session"))]


# Hints for the agent's host (MCP tool annotations; every tool says all four). None of the tools
# reaches outside this service (open_world_hint=False). search and explain only read. context
# writes only new rows (the session on first use, a context injection per call), so each call
# adds one: not idempotent, not destructive. The two reports move existing weights, but nothing is
# deleted and each move is an update batch an operator can roll back (docs/feedback.md), so they
# are not destructive either; repeating one moves nothing more: a node or edge moves at most once
# per session for uses, and the session's current outcome again is `duplicate`.
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
LOGS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
REPORTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
# Memory writes: remember adds (or versions, by key) a note, so it is not idempotent (with a key a
# repeat is `unchanged`, which the annotation cannot say per call); link again answers `exists`;
# forget archives what it names (reversible by a rollback, but gone from retrieval: destructive).
REMEMBERS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
LINKS = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
FORGETS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


# ---------------------------------------------------------------------------------------------
# The server


def build_server(
    *, token: str | None = None, http: bool = False, host: str = "127.0.0.1", port: int = 8765
) -> MCPServer:
    """The MCP server. stdio: acting as ``token``'s user; HTTP: as the user of each request's Bearer token."""
    kwargs: dict[str, Any] = {}
    if http:
        base = f"http://{_host_port(host, port)}"
        kwargs = {
            "token_verifier": DRFTokenVerifier(),
            "auth": AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False),
        }  # the API tokens are this service's own
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=version("graphadmin"), **kwargs)
    run = runner(token, http)
    register_retrieval(server, run)
    register_reports(server, run)
    register_explain(server, run)
    register_memory(server, run)
    return server


def runner(token: str | None, http: bool):
    """``run(work, *args)``: authenticate, then ``work(user, *args)`` in one transaction on Django's sync thread."""

    async def run(work, *args):
        key = token
        if http:
            access = get_access_token()
            key = access.token if access else None

        def call():
            close_old_connections()
            try:
                # The web requests' statement_timeout (graphadmin.runtime.middleware) holds for tool calls too.
                set_statement_timeout(settings.STATEMENT_TIMEOUT_MS)
                try:
                    user = user_for_token(key)
                except NotAuthenticated as exc:
                    raise ToolError(str(exc)) from exc
                with transaction.atomic():
                    return _json(work(user, *args))
            # The one mapping of the domain errors for MCP (the REST API's 400, 404, 403 and 409).
            except ValidationError as exc:  # a DRF serializer's refusal
                raise invalid(exc.detail) from exc
            except InputError as exc:
                raise invalid(exc.errors) from exc
            except Forbidden as exc:
                raise ToolError(f"Permission denied: {exc}") from exc
            except (NotFound, Conflict, TooManyRequests) as exc:
                raise ToolError(str(exc)) from exc
            finally:
                close_old_connections()

        return await sync_to_async(call, thread_sensitive=True)()

    return run


def register_retrieval(server: MCPServer, run) -> None:
    """The retrieval tools: graph_search (reads) and graph_context (logs an injection).

    Long because each tool's signature and docstring are its published schema and description (a
    parameter, its description and its serializer's bounds per line): declarations, no logic.
    """

    @server.tool(name="graph_search", title="Search the graph", annotations=READ_ONLY)
    async def graph_search(
        graph_id: GraphId,
        query: Query = "",
        vector: Vector = None,
        k: Annotated[
            int,
            Field(
                description=f"How many hits, 1..{_K['maximum']}.",
                json_schema_extra=_K,
            ),
        ] = 20,
        anchors: Annotated[
            list[int],
            Field(
                description="Node ids you are already at: hits near them (undirected hops) "
                f"rank higher. At most {bounds(SEARCH, 'anchors')['maxItems']}.",
                json_schema_extra=bounds(SEARCH, "anchors"),
            ),
        ] = [],
        exclude: Exclude = [],
        persona: Persona = {},
    ) -> dict:
        """Use it to look something up in the graph outside an agent session (browsing, checking what
        the graph holds, finding node ids for anchors): nothing is logged and no feedback can refer to
        it. To get context for a task you will report on, use graph_context instead. Same pipeline as
        graph_context: the notes and the links ("source -> type -> target") nearest to your question,
        then the notes they lead to, ranked by similarity, proximity, what earlier sessions found
        useful (learned weights), persona and recency. Returns the hits in rank order, each with its
        node id, key, title, kind, the raw vector score, how it entered (vector, lexical, triplet, start,
        expansion) and its path of edge ids, the total score and every component (raw value,
        coefficient, contribution)."""
        return await run(
            ranking_tools.search,
            graph_id,
            {"query": query, "vector": vector, "k": k, "anchors": anchors, "exclude": exclude, "persona": persona},
        )

    @server.tool(name="graph_context", title="Retrieve context for a session", annotations=LOGS)
    async def graph_context(
        graph_id: GraphId,
        session: Session,
        query: Query = "",
        vector: Vector = None,
        start_nodes: Annotated[
            list[int],
            Field(
                description="Optional: node ids to start from besides the question's hits "
                f"(they are candidates too). At most {_START_NODES['maxItems']}. "
                "Usually omitted: ask with the question only.",
                json_schema_extra=_START_NODES,
            ),
        ] = [],
        anchors: NodeIds = [],
        exclude: Exclude = [],
        persona: Persona = {},
        budget_unit: Annotated[choices(CONTEXT, "budget_unit"), Field(description="What the budget counts.")] = "items",
        budget: Annotated[
            int | None,
            Field(
                description=f"At most {retrieval.MAX_BUDGET_ITEMS} items or {retrieval.MAX_BUDGET_TOKENS} "
                "estimated tokens; default: the graph policy's.",
                # The serializer's own bound is the minimum; its validate() caps it by unit (tokens: the larger).
                json_schema_extra={**bounds(CONTEXT, "budget"), "maximum": retrieval.MAX_BUDGET_TOKENS},
            ),
        ] = None,
        k: Annotated[
            int,
            Field(
                description=f"Note vector hits taken as entry points, 1..{_CONTEXT_K['maximum']}.",
                json_schema_extra=_CONTEXT_K,
            ),
        ] = 50,
        hops: Annotated[
            int | None,
            Field(
                description=f"Traversal depth, {_HOPS['minimum']}..{_HOPS['maximum']} (0: entry points only); "
                "default and bound: the policy's max_hops.",
                json_schema_extra=_HOPS,
            ),
        ] = None,
    ) -> dict:
        """Use it first in every agent session, with the task or question as `query`: it retrieves the
        context to read before answering. Retrieves the notes and links nearest to the question, the
        notes they lead to (best-first along the graph's edges), ranked by similarity, proximity and
        what earlier sessions found useful, selected until the budget is spent, the rest cut. The
        whole candidate set is logged as a context injection (its id is `injection`), which your
        later feedback (graph_record_use, graph_improve) and graph_explain refer to. Returns `items`
        (rank, node id, key, title, kind, text, tokens, score, hops, how it entered and its path of
        edge ids, and its cosine `vector_score`), plus budget, spent, how many candidates were considered,
        the answer's `confidence` and `abstained`: when nothing in the graph is relevant to the question
        (confidence below the graph's floor), `abstained` is true, `items` is empty and `note` says so;
        answer without the graph then, and still report the outcome. The session is
        created on first use. Then report the items you used with graph_record_use: that credits
        them and the edges that led to them, so the next agent asking the same gets better context."""
        return await run(
            ranking_tools.context,
            graph_id,
            {
                "session": session,
                "query": query,
                "vector": vector,
                "start_nodes": start_nodes,
                "anchors": anchors,
                "exclude": exclude,
                "persona": persona,
                "budget_unit": budget_unit,
                "budget": budget,
                "k": k,
                "hops": hops,
            },
        )


def register_reports(server: MCPServer, run) -> None:
    """The session's feedback reports: graph_record_use and graph_improve (applied by the worker)."""

    @server.tool(name="graph_record_use", title="Report the items used", annotations=REPORTS)
    async def graph_record_use(
        graph_id: GraphId,
        session: Session,
        items: Annotated[
            list[UseItemInput] | None,
            Field(
                description="The context items you used (signal explicit) or found wrong (signal negative).",
                json_schema_extra=bounds(fs.UsesSerializer, "items"),
            ),
        ] = None,
        response: Annotated[
            str | None,
            Field(
                description="Your response text: items whose distinctive wording appears in it "
                f"are recorded as implicitly used. At most {_RESPONSE['maxLength']} characters.",
                json_schema_extra=_RESPONSE,
            ),
        ] = None,
        learning_rate: Annotated[
            float | None,
            Field(
                description="Override of the policy's learning rate (and negative rate), "
                f"{_LR['minimum']}..{_LR['maximum']}. Usually omitted.",
                json_schema_extra=_LR,
            ),
        ] = None,
        idempotency_key: IdempotencyKey = "",
    ) -> dict:
        """Use it after answering, once you know which graph_context items you relied on (and which were
        wrong), so their weights learn; pass your response text too to have implicit use detected.
        Explicit use raises a note's feedback weight by lr*(1-w), and the weight of every edge on the
        path that surfaced it; negative lowers the note and the last edge of its path by lr*w; items
        not reported do not change, and each moves at most once per session. Later agents asking a
        similar question get what you used ranked higher. Give `items`, `response` (implicit use
        detection), or both. Only for the sessions you created (agent role; operators: any session),
        before their outcome, naming only items graph_context gave you. The update runs on the server's worker: the
        answer is `queued` with a task id (or a no-op status such as unknown_session, or graph_not_ready
        when the session's context was answered before the graph's vectors were written, with its reason);
        graph_explain lists the resulting batches."""
        plain = [i.model_dump(exclude_none=True, mode="json") for i in items] if items else None
        return await run(feedback_tools.record_use, graph_id, session, plain, response, learning_rate, idempotency_key)

    @server.tool(name="graph_improve", title="Report how the session ended", annotations=REPORTS)
    async def graph_improve(
        graph_id: GraphId,
        session: Session,
        outcome: Annotated[choices(fs.OutcomeSerializer, "outcome"), Field(description="How the session ended.")],
        alpha: Annotated[
            float | None,
            Field(
                description=f"Override of the policy's EMA alpha, {_ALPHA['minimum']}..{_ALPHA['maximum']}. "
                "Usually omitted.",
                json_schema_extra=_ALPHA,
            ),
        ] = None,
        idempotency_key: IdempotencyKey = "",
    ) -> dict:
        """Use it when the session is over and you know how it ended (the user accepted the answer, asked
        for rework, or rejected it). Every node and edge selected in the session's context
        injections moves its feedback weight toward the outcome's score (accepted 1.0, rework 0.5,
        rejected 0.0 by default): w = alpha*score + (1-alpha)*w. Only for the sessions you created
        (agent role; operators: any session); after it the session takes no other report. Runs on the
        server's worker: the answer is `queued` with a task id, `duplicate` with the batch when this
        outcome was already applied, or a no-op status (unknown_session, no_injection,
        nothing_surfaced, graph_not_ready) with its reason. graph_explain lists the resulting batch."""
        return await run(feedback_tools.improve, graph_id, session, outcome, alpha, idempotency_key)


def register_explain(server: MCPServer, run) -> None:
    """graph_explain: why a context injection ranked as it did, and the batches its feedback made."""

    @server.tool(name="graph_explain", title="Explain a ranking", annotations=READ_ONLY)
    async def graph_explain(
        injection_id: Annotated[int, Field(description="The `injection` id returned by graph_context.")],
        node: Annotated[
            int | None,
            Field(
                description="A node id: compare its candidate with the one ranked just above it "
                "(the top candidate: with the runner-up)."
            ),
        ] = None,
        i: Annotated[
            int | None,
            Field(description="A rank to compare (1-based); give with j.", json_schema_extra=bounds(EXPLAIN, "i")),
        ] = None,
        j: Annotated[
            int | None, Field(description="The rank it is compared with.", json_schema_extra=bounds(EXPLAIN, "j"))
        ] = None,
    ) -> dict:
        """Use it to understand or debug a graph_context result (why an item ranked above another, what
        the budget cut) or to check that your feedback was applied. Why items ranked where they did in
        one context injection: every candidate considered, in rank order, selected or cut by the
        budget, with its total score and each component (raw value, coefficient, contribution) and the
        raw features; with `node` or ranks i and j, a comparison
        naming the components that made one beat the other. Also lists the weight-update batches your
        session's feedback produced so far (`feedback_batches`: kind reinforce or outcome, status,
        counts)."""
        return await run(ranking_tools.explain, injection_id, i, j, node)


def register_memory(server: MCPServer, run) -> None:
    """The agent's own notes: graph_remember, graph_link and graph_forget.

    Long for the reason register_retrieval gives: each tool's signature is its published schema.
    """

    @server.tool(name="graph_remember", title="Remember a note", annotations=REMEMBERS)
    async def graph_remember(
        graph_id: GraphId,
        text: Annotated[
            str,
            Field(
                description=f"What you learned, in markdown (at most {_TEXT['maxLength']} characters); "
                "[[Note name]] links to an existing note.",
                json_schema_extra=_TEXT,
            ),
        ],
        kind: Annotated[
            str | None,
            Field(
                description="observation (the default for a new note), decision, or another kind the graph uses; "
                "omitted on an update by key: the note keeps its kind.",
                json_schema_extra=bounds(fs.RememberSerializer, "kind"),
            ),
        ] = None,
        key: Annotated[
            str | None,
            Field(
                description="Optional stable key (a vault path without .md, e.g. decisions/cache-ttl): the same "
                "key updates that note (a new version; repeating the same text changes nothing).",
                json_schema_extra=bounds(fs.RememberSerializer, "key"),
            ),
        ] = None,
        title: Annotated[
            str | None,
            Field(
                description="Optional title (default: the first line).",
                json_schema_extra=bounds(fs.RememberSerializer, "title"),
            ),
        ] = None,
        tags: Annotated[
            list[str], Field(description="Tags.", json_schema_extra=bounds(fs.RememberSerializer, "tags"))
        ] = [],
        links: Annotated[
            list[MemoryLinkInput],
            Field(
                description=f"Links to existing notes, at most {_LINKS['maxItems']}.",
                json_schema_extra=_LINKS,
            ),
        ] = [],
        session: _session_of(fs.RememberSerializer, "Your session id (the one of graph_context).") = None,
    ) -> dict:
        """Use it to write down what you learned for later agents: an observation, a decision, a fact
        about the code or the user. Embedded at once and found by graph_context like any note. With
        `key`, the note with that key gets the new text (its old text is kept as a version). A text of
        the same kind almost identical to an existing note is not copied: the answer's status is
        `duplicate` with `duplicate_of` (your links go on that note). Returns status (created, updated,
        unchanged, duplicate), the node id and key, the edges made, unresolved [[links]], and the
        `batch`: an operator can undo the call by rolling it back."""
        data = {"text": text, "kind": kind, "key": key, "title": title, "tags": tags or None, "session": session}
        data["links"] = [link.model_dump(mode="json") for link in links] if links else None
        return await run(feedback_tools.remember, graph_id, data)

    @server.tool(name="graph_link", title="Link two notes", annotations=LINKS)
    async def graph_link(
        graph_id: GraphId,
        source: Annotated[int | str, Field(description="The note the link leaves: id or key (one you wrote).")],
        target: Annotated[int | str, Field(description="The note it reaches: id or key.")],
        type: Annotated[
            str,
            Field(
                description="An existing edge type: related, derived_from, depends_on...",
                json_schema_extra=bounds(fs.LinkSerializer, "type"),
            ),
        ] = "related",
        session: _session_of(fs.LinkSerializer) = None,
    ) -> dict:
        """Use it to record that one note relates to another (source -> type -> target). Both notes must
        exist in the graph; a new edge type needs an operator. Returns status (created, restored,
        exists) and the batch."""
        data = {"source": source, "target": target, "type": type, "session": session}
        return await run(feedback_tools.link, graph_id, data)

    @server.tool(name="graph_forget", title="Forget notes or links", annotations=FORGETS)
    async def graph_forget(
        graph_id: GraphId,
        nodes: Annotated[
            list[int],
            Field(
                description="Ids of notes you wrote to archive.", json_schema_extra=bounds(fs.ForgetSerializer, "nodes")
            ),
        ] = [],
        edges: Annotated[
            list[int],
            Field(
                description="Ids of links you made to archive.", json_schema_extra=bounds(fs.ForgetSerializer, "edges")
            ),
        ] = [],
        session: _session_of(fs.ForgetSerializer) = None,
    ) -> dict:
        """Use it when something you wrote is wrong or obsolete: the notes and links are archived (never
        deleted; retrieval no longer returns them; an operator can restore them by rolling the batch
        back). Returns the archived ids and the batch."""
        data = {"nodes": nodes or None, "edges": edges or None, "session": session}
        return await run(feedback_tools.forget, graph_id, data)
