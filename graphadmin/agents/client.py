"""A small Python client of the graphadmin REST API for agents: the same five operations as the MCP tools.

    from graphadmin.agents.client import GraphClient

    with GraphClient("http://127.0.0.1:8000", token="...") as gc:
        ctx = gc.context(graph_id=1, session="run-42", query="how do we rank edges?", budget=5)
        for item in ctx["items"]:
            print(item["rank"], item["title"])
        gc.record_use(1, "run-42", [{"node": ctx["items"][0]["node"]}])
        gc.record_response(1, "run-42", "Edges are ranked by weight and semantic proximity ...")
        gc.improve(1, "run-42", "accepted")
        why = gc.explain(ctx["injection"], i=1, j=2)

Depends on nothing of Django: copy this file into an agent's project and install httpx.

Errors: a 4xx answer raises ``ApiError`` carrying the status and the response body (the field
errors of a 400, e.g. ``{"k": ["Ensure this value is less than or equal to 200."]}``) and is never
retried. A connection error, a timeout or a 5xx answer is retried (``retries`` times, exponential
backoff); feedback reports carry an ``Idempotency-Key`` header, generated once per call and resent
on every retry, so a retried report applies once. When the retries are spent, the last connection
error or a ``ServerError`` is raised.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NotRequired, TypedDict
from urllib.parse import quote

import httpx

__all__ = [
    "GraphClient",
    "RetrievalRequest",
    "ApiError",
    "ServerError",
    "Component",
    "SearchHit",
    "SearchResult",
    "ContextItem",
    "ContextResult",
    "UseItem",
    "Report",
    "Candidate",
    "Comparison",
    "Explanation",
]

Outcome = Literal["accepted", "rework", "rejected"]


# --- response shapes (the API's OpenAPI schema, /api/schema/, is the reference) -----------------


class Component(TypedDict):
    raw: float
    coefficient: float
    contribution: float


class SearchHit(TypedDict):
    rank: int
    node: int
    stable_id: str
    key: str
    title: str
    kind: str
    vector_score: float
    hops: int | None
    total: float
    components: dict[str, Component]


class SearchResult(TypedDict):
    policy_revision: int
    results: list[SearchHit]


class ContextItem(TypedDict):
    rank: int
    node: int
    key: str
    title: str
    kind: str
    text: str
    tokens: int
    total: float
    hops: int | None
    edge: int | None
    edge_type: str | None


class ContextResult(TypedDict):
    injection: int
    session: str
    session_created: bool
    mode: str
    policy_revision: int
    budget_unit: str
    budget: int
    spent: int
    considered: int
    items: list[ContextItem]


class EdgeKey(TypedDict):
    source: int
    target: int
    type: str


class UseItem(TypedDict, total=False):
    """One used item: ``node`` (id) or ``edge`` (id or EdgeKey); signal ``explicit`` (default) or ``negative``."""

    node: int
    edge: int | EdgeKey
    signal: Literal["explicit", "negative", "implicit"]


class Report(TypedDict):
    """The answer to a feedback report: ``queued`` (with task id and key), ``duplicate`` (with batch), or a no-op
    status."""

    status: str
    task_id: NotRequired[str]
    idempotency_key: NotRequired[str]
    batch: NotRequired[int | None]
    reason: NotRequired[str]


class Candidate(TypedDict):
    rank: int
    selected: bool
    node: int
    edge: int | None
    hops: int | None
    tokens: int
    total: float
    features: dict[str, Any]
    components: dict[str, Component]


class Comparison(TypedDict):
    i: int
    j: int
    total_i: float
    total_j: float
    difference: float
    components: list[dict[str, Any]]


class Explanation(TypedDict):
    injection: int
    session: str
    query: str
    mode: str
    policy_revision: int
    budget_unit: str
    budget: int
    spent: int
    created_at: str
    candidates: list[Candidate]
    comparison: Comparison | None


# --- errors ---------------------------------------------------------------------------------------


class ApiError(Exception):
    """A 4xx answer: the request was refused. ``errors`` is the response body (field -> messages for a 400)."""

    def __init__(self, status_code: int, errors: Any, method: str = "", url: str = ""):
        self.status_code, self.errors, self.method, self.url = status_code, errors, method, url
        super().__init__(f"{method} {url} -> {status_code}: {errors}")


class ServerError(Exception):
    """A 5xx answer that outlived the retries."""

    def __init__(self, status_code: int, body: str, method: str = "", url: str = ""):
        self.status_code, self.body, self.method, self.url = status_code, body, method, url
        super().__init__(f"{method} {url} -> {status_code} after retries: {body[:500]}")


# --- the client -------------------------------------------------------------------------------------


def _drop_none(data: dict) -> dict:
    return {k: v for k, v in data.items() if v is not None}


# --- the request ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalRequest:
    """One retrieval request (search or context), the same object on both sides of the wire.

    The client builds it from its keyword arguments and sends ``body()``; the server's serializers
    (ranking.serializers) validate the JSON and build it again; REST, MCP and ranking.service read
    it. ``session``, ``budget_unit`` and ``budget`` are context's (search sends none of them).
    """

    query: str = ""
    vector: list[float] | None = None
    start_nodes: tuple[int, ...] = ()
    anchors: tuple[int, ...] = ()
    exclude: tuple[int, ...] = ()
    persona: dict[str, float] = field(default_factory=dict)
    k: int = 50
    hops: int | None = None
    session: str | None = None
    budget_unit: Literal["items", "tokens"] = "items"
    budget: int | None = None

    def __post_init__(self):
        # Lists and None from callers become tuples and {}: one shape for the rest of the pipeline.
        for name in ("start_nodes", "anchors", "exclude"):
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        object.__setattr__(self, "persona", dict(self.persona or {}))

    def body(self, *names: str) -> dict:
        """The JSON body: the fields ``names`` (all when none), empty and None values left out."""
        data = asdict(self)
        picked = {n: data[n] for n in (names or data)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in picked.items() if v not in (None, (), {})}


SEARCH_FIELDS = ("query", "vector", "start_nodes", "anchors", "exclude", "persona", "k")


class GraphClient:
    """The graphadmin REST API for an agent: search, context, record_use / record_response, improve, explain.

    ``token`` is an API token (``manage.py create_token USERNAME`` or ``agent_token``), sent as
    ``Authorization: Token``.
    ``timeout`` (seconds) applies to each attempt; ``retries`` is how many times a connection error,
    a timeout or a 5xx is retried, sleeping ``backoff * 2**attempt`` seconds in between.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.25,
        transport: httpx.BaseTransport | None = None,
    ):
        self.retries, self.backoff = retries, backoff
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout,
            transport=transport,
            headers={"Authorization": f"Token {token}", "Accept": "application/json"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: dict | None = None,
        params: dict | None = None,
        headers: dict | None = None,
        data: dict | None = None,
        files: dict | None = None,
    ) -> Any:
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method, path, json=json, params=params, headers=headers, data=data, files=files
                )
            except httpx.TransportError:  # connection refused or reset, timeouts, protocol errors
                if attempt >= self.retries:
                    raise
            else:
                if response.status_code < 400:
                    return response.json()
                if response.status_code < 500:
                    try:
                        errors = response.json()
                    except ValueError:
                        errors = response.text
                    raise ApiError(response.status_code, errors, method, str(response.request.url))
                if attempt >= self.retries:
                    raise ServerError(response.status_code, response.text, method, str(response.request.url))
            time.sleep(self.backoff * 2**attempt)
            attempt += 1

    # The five operations.

    def search(
        self,
        graph_id: int,
        query: str = "",
        *,
        vector: list[float] | None = None,
        k: int = 20,
        anchors: list[int] | None = None,
        exclude: list[int] | None = None,
        persona: dict[str, float] | None = None,
    ) -> SearchResult:
        """Search (POST /api/graphs/{id}/search/): the retrieval pipeline's ranked hits with every factor.

        Logs nothing."""
        request = RetrievalRequest(
            query=query, vector=vector, k=k, anchors=anchors or (), exclude=exclude or (), persona=persona
        )
        return self._request("POST", f"/api/graphs/{graph_id}/search/", json=request.body(*SEARCH_FIELDS))

    def context(
        self,
        graph_id: int,
        session: str,
        query: str = "",
        *,
        vector: list[float] | None = None,
        start_nodes: list[int] | None = None,
        anchors: list[int] | None = None,
        exclude: list[int] | None = None,
        persona: dict[str, float] | None = None,
        budget_unit: Literal["items", "tokens"] = "items",
        budget: int | None = None,
        k: int = 50,
        hops: int | None = None,
    ) -> ContextResult:
        """Budgeted context for a session (POST /api/graphs/{id}/context/): the items and the injection id.

        Ask with the question only; ``start_nodes``, ``anchors`` and ``exclude`` (ids you already hold) are optional."""
        request = RetrievalRequest(
            session=session,
            query=query,
            vector=vector,
            start_nodes=start_nodes or (),
            anchors=anchors or (),
            exclude=exclude or (),
            persona=persona,
            budget_unit=budget_unit,
            budget=budget,
            k=k,
            hops=hops,
        )
        return self._request("POST", f"/api/graphs/{graph_id}/context/", json=request.body())

    def _report(self, graph_id: int, session: str, what: str, body: dict, idempotency_key: str | None) -> Report:
        key = idempotency_key or uuid.uuid4().hex
        return self._request(
            "POST",
            f"/api/graphs/{graph_id}/sessions/{quote(session, safe='')}/{what}/",
            json=body,
            headers={"Idempotency-Key": key},
        )

    def record_use(
        self,
        graph_id: int,
        session: str,
        items: list[UseItem],
        *,
        learning_rate: float | None = None,
        idempotency_key: str | None = None,
    ) -> Report:
        """Report used (explicit) or wrong (negative) items (POST .../sessions/{session}/uses/).

        Applied by the worker."""
        return self._report(
            graph_id, session, "uses", _drop_none({"items": items, "learning_rate": learning_rate}), idempotency_key
        )

    def record_response(
        self, graph_id: int, session: str, response: str, *, idempotency_key: str | None = None
    ) -> Report:
        """Send the response text for implicit use detection (POST .../sessions/{session}/response/)."""
        return self._report(graph_id, session, "response", {"response": response}, idempotency_key)

    def improve(
        self,
        graph_id: int,
        session: str,
        outcome: Outcome,
        *,
        alpha: float | None = None,
        idempotency_key: str | None = None,
    ) -> Report:
        """Report the session's outcome (POST .../sessions/{session}/outcome/): EMA on the worker."""
        return self._report(
            graph_id, session, "outcome", _drop_none({"outcome": outcome, "alpha": alpha}), idempotency_key
        )

    def explain(self, injection_id: int, *, i: int | None = None, j: int | None = None) -> Explanation:
        """Every candidate of an injection with its components; with i and j, why rank i beat rank j."""
        return self._request("GET", f"/api/injections/{injection_id}/explain/", params=_drop_none({"i": i, "j": j}))

    def batches(self, graph_id: int, session: str, kind: str | None = None) -> list[dict]:
        """The update batches a session's feedback produced (GET /api/batches/?graph=&session=), newest first."""
        body = self._request(
            "GET", "/api/batches/", params=_drop_none({"graph": graph_id, "session": session, "kind": kind})
        )
        return body["results"] if isinstance(body, dict) and "results" in body else body

    # Set-up for tools that build graphs (evaluations, imports): graphs, vault import, nodes, policy.
    # Graph creation needs the organization's admin role; import and policy changes need operator.

    def _all_pages(self, path: str, params: dict | None = None) -> list[dict]:
        """Every row of a paginated list (LimitOffsetPagination: follows ``next``)."""
        rows: list[dict] = []
        body = self._request("GET", path, params=params)
        while True:
            if not isinstance(body, dict) or "results" not in body:
                return rows + list(body)
            rows.extend(body["results"])
            if not body.get("next"):
                return rows
            body = self._request("GET", body["next"])

    def graphs(self) -> list[dict]:
        """The graphs of the caller's organizations (GET /api/graphs/, every page)."""
        return self._all_pages("/api/graphs/")

    def create_graph(self, organization: str, slug: str, name: str, description: str = "") -> dict:
        """Create a graph in an organization (POST /api/graphs/; admins).

        It starts with policy revision 1 and the default edge types."""
        body = {"organization": organization, "slug": slug, "name": name, "description": description}
        return self._request("POST", "/api/graphs/", json=body)

    def import_vault(
        self,
        graph_id: int,
        archive: bytes,
        *,
        filename: str = "vault.zip",
        dry_run: bool = False,
        create_missing: bool = False,
    ) -> dict:
        """Upload a zipped Obsidian vault (POST /api/graphs/{id}/import/; operators): counts, warnings, ``embedding``.

        ``embedding`` is ``sync`` (vectors written with the import) or ``task`` (the Celery task fills them:
        see ``nodes()``' ``embedded`` flag). Re-importing an unchanged vault changes nothing.
        """
        form = {"dry_run": "true" if dry_run else "false", "create_missing": "true" if create_missing else "false"}
        return self._request(
            "POST", f"/api/graphs/{graph_id}/import/", data=form, files={"file": (filename, archive, "application/zip")}
        )

    def nodes(self, graph_id: int) -> list[dict]:
        """Every node of a graph, archived ones included (GET /api/graphs/{id}/nodes/, every page)."""
        return self._all_pages(f"/api/graphs/{graph_id}/nodes/")

    def edges(self, graph_id: int) -> list[dict]:
        """Every edge of a graph, archived ones included (GET /api/graphs/{id}/edges/, every page)."""
        return self._all_pages(f"/api/graphs/{graph_id}/edges/")

    def policy(self, graph_id: int) -> dict:
        """The graph's current policy revision (GET /api/graphs/{id}/policy/)."""
        return self._request("GET", f"/api/graphs/{graph_id}/policy/")

    def update_policy(self, graph_id: int, changes: dict, *, note: str = "") -> dict:
        """Change policy values (PATCH /api/graphs/{id}/policy/; operators): a new revision.

        A bad value is an ApiError 400."""
        return self._request(
            "PATCH", f"/api/graphs/{graph_id}/policy/", json={**changes, **({"note": note} if note else {})}
        )
