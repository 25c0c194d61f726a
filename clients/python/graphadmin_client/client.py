"""``GraphClient`` and ``AsyncGraphClient``: the graphadmin REST API for an agent, the same methods in both.

Errors: a 4xx answer raises ``ApiError`` carrying the status and the response body (the field errors of a
400, e.g. ``{"k": ["Ensure this value is less than or equal to 200."]}``) and is never retried. A connection
error, a timeout or a 5xx answer is retried (``retries`` times, sleeping ``backoff * 2**attempt`` seconds, or as
long as a 5xx's ``Retry-After`` asks when that is longer, at most ``MAX_RETRY_AFTER``: a busy server's 503 says
when to come back);
feedback reports carry an ``Idempotency-Key`` header, generated once per call and resent on every retry, so a
retried report applies once. When the retries are spent, the last connection error or a ``ServerError`` is
raised.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

import httpx

from .types import (
    SEARCH_FIELDS,
    ContextResult,
    Explanation,
    MemoryAnswer,
    MemoryLink,
    Outcome,
    Report,
    RetrievalRequest,
    SearchResult,
    UseItem,
)

__all__ = ["GraphClient", "AsyncGraphClient", "ApiError", "ServerError"]


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


def _drop_none(data: dict) -> dict:
    return {k: v for k, v in data.items() if v is not None}


def _results(body: Any) -> list[dict]:
    return body["results"] if isinstance(body, dict) and "results" in body else body


@dataclass
class _Call:
    """One API call as data: both clients send it, one with httpx.Client, the other with httpx.AsyncClient."""

    method: str
    path: str
    json: dict | None = None
    params: dict | None = None
    headers: dict | None = None
    data: dict | None = None
    files: dict | None = None
    then: Callable[[Any], Any] | None = None
    paged: bool = False  # a LimitOffsetPagination list: every page, following ``next``

    def kwargs(self) -> dict:
        return {
            "json": self.json,
            "params": self.params,
            "headers": self.headers,
            "data": self.data,
            "files": self.files,
        }


# The longest wait a Retry-After header can ask of one retry (seconds): a larger value is read as this.
MAX_RETRY_AFTER = 30.0


def _pause(response: httpx.Response | None, backoff: float, attempt: int) -> float:
    """Seconds to sleep before the next attempt: the backoff, or the answer's Retry-After (in seconds) if longer."""
    wait = backoff * 2**attempt
    asked = response.headers.get("Retry-After", "") if response is not None else ""
    if asked.strip().isdigit():
        wait = max(wait, min(float(asked), MAX_RETRY_AFTER))
    return wait


def _answer(response: httpx.Response, method: str, last: bool) -> tuple[bool, Any]:
    """(done, value) for an answer: the JSON of a 2xx/3xx, ApiError for a 4xx, retry (or ServerError) for a 5xx."""
    if response.status_code < 400:
        return True, (response.json() if response.content else None)
    if response.status_code < 500:
        try:
            errors = response.json()
        except ValueError:
            errors = response.text
        raise ApiError(response.status_code, errors, method, str(response.request.url))
    if last:
        raise ServerError(response.status_code, response.text, method, str(response.request.url))
    return False, None


class _Api(ABC):
    """The methods, as calls: ``_do`` sends one (GraphClient: now; AsyncGraphClient: as a coroutine)."""

    retries: int
    backoff: float

    @abstractmethod
    def _do(self, call: _Call) -> Any:
        """Send ``call``: each client has its own (sync or async)."""

    # --- retrieval -------------------------------------------------------------------------------

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
        hops: int | None = None,
    ) -> SearchResult:
        """Search (POST /api/graphs/{id}/search/): the retrieval pipeline's ranked hits with every factor.

        Logs nothing. ``hops=0``: entry points only (no expansion)."""
        request = RetrievalRequest(
            query=query,
            vector=vector,
            k=k,
            anchors=anchors or (),
            exclude=exclude or (),
            persona=persona,
            hops=hops,
        )
        return self._do(_Call("POST", f"/api/graphs/{graph_id}/search/", json=request.body(*SEARCH_FIELDS)))

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

        Ask with the question only; ``start_nodes``, ``anchors`` and ``exclude`` (ids you already hold) are
        optional. The session is created on its first call."""
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
        return self._do(_Call("POST", f"/api/graphs/{graph_id}/context/", json=request.body()))

    def explain(self, injection_id: int, *, i: int | None = None, j: int | None = None) -> Explanation:
        """Every candidate of an injection with its components; with i and j, why rank i beat rank j."""
        return self._do(_Call("GET", f"/api/injections/{injection_id}/explain/", params=_drop_none({"i": i, "j": j})))

    # --- feedback: what makes the graph learn -------------------------------------------------------

    def _report(self, graph_id: int, session: str, what: str, body: dict, idempotency_key: str | None) -> Report:
        key = idempotency_key or uuid.uuid4().hex  # once per call, resent on every retry
        return self._do(
            _Call(
                "POST",
                f"/api/graphs/{graph_id}/sessions/{quote(session, safe='')}/{what}/",
                json=body,
                headers={"Idempotency-Key": key},
            )
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
        body = _drop_none({"items": items, "learning_rate": learning_rate})
        return self._report(graph_id, session, "uses", body, idempotency_key)

    def record_response(
        self, graph_id: int, session: str, response: str, *, idempotency_key: str | None = None
    ) -> Report:
        """Send the answer text for implicit use detection (POST .../sessions/{session}/response/)."""
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
        body = _drop_none({"outcome": outcome, "alpha": alpha})
        return self._report(graph_id, session, "outcome", body, idempotency_key)

    def batches(self, graph_id: int, session: str, kind: str | None = None) -> list[dict]:
        """The update batches a session's feedback produced (GET /api/batches/?graph=&session=), newest first."""
        params = _drop_none({"graph": graph_id, "session": session, "kind": kind})
        return self._do(_Call("GET", "/api/batches/", params=params, then=_results))

    # --- memory writes: the agent's own notes --------------------------------------------------------

    def remember(
        self,
        graph_id: int,
        text: str,
        *,
        kind: str | None = None,
        key: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        links: list[MemoryLink] | None = None,
        session: str | None = None,
    ) -> MemoryAnswer:
        """Write a note (POST /api/graphs/{id}/memory/remember/): created, updated (same key), unchanged or
        duplicate (with ``duplicate_of``); ``[[wikilinks]]`` in the text become links."""
        body = _drop_none(
            {"text": text, "kind": kind, "key": key, "title": title, "tags": tags, "links": links, "session": session}
        )
        return self._do(_Call("POST", f"/api/graphs/{graph_id}/memory/remember/", json=body))

    def link(
        self, graph_id: int, source: int | str, target: int | str, *, type: str = "related", session: str | None = None
    ) -> MemoryAnswer:
        """Link two notes by id or key (POST /api/graphs/{id}/memory/link/); again answers ``exists``."""
        body = _drop_none({"source": source, "target": target, "type": type, "session": session})
        return self._do(_Call("POST", f"/api/graphs/{graph_id}/memory/link/", json=body))

    def forget(
        self,
        graph_id: int,
        *,
        nodes: list[int] | None = None,
        edges: list[int] | None = None,
        session: str | None = None,
    ) -> MemoryAnswer:
        """Archive notes or links the caller wrote (POST /api/graphs/{id}/memory/forget/)."""
        body = _drop_none({"nodes": nodes, "edges": edges, "session": session})
        return self._do(_Call("POST", f"/api/graphs/{graph_id}/memory/forget/", json=body))

    # --- set-up for tools that build graphs (evaluations, imports): graphs, vault import, nodes, policy ---
    # Graph creation needs the organization's admin role; import and policy changes need operator.

    def graphs(self) -> list[dict]:
        """The graphs of the caller's organizations (GET /api/graphs/, every page)."""
        return self._do(_Call("GET", "/api/graphs/", paged=True))

    def graph(self, graph_id: int) -> dict:
        """One graph (GET /api/graphs/{id}/), with ``vectors_pending``: 0 when every vector is written."""
        return self._do(_Call("GET", f"/api/graphs/{graph_id}/"))

    def create_graph(self, organization: str, slug: str, name: str, description: str = "") -> dict:
        """Create a graph in an organization (POST /api/graphs/; admins).

        It starts with policy revision 1 and the default edge types."""
        body = {"organization": organization, "slug": slug, "name": name, "description": description}
        return self._do(_Call("POST", "/api/graphs/", json=body))

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
        files = {"file": (filename, archive, "application/zip")}
        return self._do(_Call("POST", f"/api/graphs/{graph_id}/import/", data=form, files=files))

    def nodes(self, graph_id: int) -> list[dict]:
        """Every node of a graph, archived ones included (GET /api/graphs/{id}/nodes/, every page)."""
        return self._do(_Call("GET", f"/api/graphs/{graph_id}/nodes/", paged=True))

    def edges(self, graph_id: int) -> list[dict]:
        """Every edge of a graph, archived ones included (GET /api/graphs/{id}/edges/, every page)."""
        return self._do(_Call("GET", f"/api/graphs/{graph_id}/edges/", paged=True))

    def policy(self, graph_id: int) -> dict:
        """The graph's current policy revision (GET /api/graphs/{id}/policy/)."""
        return self._do(_Call("GET", f"/api/graphs/{graph_id}/policy/"))

    def update_policy(self, graph_id: int, changes: dict, *, note: str = "") -> dict:
        """Change policy values (PATCH /api/graphs/{id}/policy/; operators): a new revision.

        A bad value is an ApiError 400."""
        body = {**changes, **({"note": note} if note else {})}
        return self._do(_Call("PATCH", f"/api/graphs/{graph_id}/policy/", json=body))


def _headers(token: str) -> dict:
    return {"Authorization": f"Token {token}", "Accept": "application/json"}


class GraphClient(_Api):
    """The graphadmin REST API for an agent: search, context, record_use / record_response, improve, explain,
    batches, remember / link / forget, and the set-up calls.

    ``token`` is an API token (``manage.py create_token USERNAME`` or ``agent_token``), sent as
    ``Authorization: Token``. ``timeout`` (seconds) applies to each attempt; ``retries`` is how many times a
    connection error, a timeout or a 5xx is retried, sleeping ``backoff * 2**attempt`` seconds in between (longer
    when a 5xx's ``Retry-After`` asks it).
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
        self.base_url, self.token = base_url.rstrip("/"), token
        self.retries, self.backoff = retries, backoff
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport, headers=_headers(token))

    def close(self) -> None:
        self._http.close()

    def wait_ready(self, graph_id: int, *, timeout: float = 600.0, poll: float = 1.0) -> dict:
        """Poll the graph until its ``vectors_pending`` is 0 (a large import's embeddings task has written its
        vectors); the graph. ``TimeoutError`` after ``timeout`` seconds, naming the count still pending."""
        deadline = time.monotonic() + timeout
        while True:
            graph = self.graph(graph_id)
            if not graph.get("vectors_pending"):
                return graph
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"graph {graph_id}: {graph['vectors_pending']} vectors still pending after {timeout:.0f} s"
                )
            time.sleep(poll)

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            response = None
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError:  # connection refused or reset, timeouts, protocol errors
                if attempt >= self.retries:
                    raise
            else:
                done, value = _answer(response, method, attempt >= self.retries)
                if done:
                    return value
            time.sleep(_pause(response, self.backoff, attempt))
            attempt += 1

    def _do(self, call: _Call) -> Any:
        body = self._request(call.method, call.path, **call.kwargs())
        if call.paged:
            rows: list[dict] = []
            while isinstance(body, dict) and "results" in body:
                rows.extend(body["results"])
                if not body.get("next"):
                    return rows
                body = self._request("GET", body["next"])
            return rows + list(body)
        return call.then(body) if call.then else body

    def report(
        self,
        graph_id: int,
        session: str,
        *,
        uses: list[UseItem] | None = None,
        response: str | None = None,
        outcome: Outcome | None = None,
    ) -> dict[str, Report]:
        """A session's reports in one call: the used items, the answer text, the outcome (each when given, in
        that order). Returns each report's answer by name."""
        sent: dict[str, Report] = {}
        if uses:
            sent["uses"] = self.record_use(graph_id, session, uses)
        if response:
            sent["response"] = self.record_response(graph_id, session, response)
        if outcome:
            sent["outcome"] = self.improve(graph_id, session, outcome)
        return sent


class AsyncGraphClient(_Api):
    """``GraphClient``'s methods as coroutines (``await client.context(...)``), on ``httpx.AsyncClient``.

    Same arguments, same retries, backoff and idempotency keys, same answers."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 0.25,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.base_url, self.token = base_url.rstrip("/"), token
        self.retries, self.backoff = retries, backoff
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, transport=transport, headers=_headers(token)
        )

    async def wait_ready(self, graph_id: int, *, timeout: float = 600.0, poll: float = 1.0) -> dict:
        """``GraphClient.wait_ready``, awaiting: the graph once its ``vectors_pending`` is 0."""
        deadline = time.monotonic() + timeout
        while True:
            graph = await self.graph(graph_id)
            if not graph.get("vectors_pending"):
                return graph
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"graph {graph_id}: {graph['vectors_pending']} vectors still pending after {timeout:.0f} s"
                )
            await asyncio.sleep(poll)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncGraphClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        attempt = 0
        while True:
            response = None
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError:
                if attempt >= self.retries:
                    raise
            else:
                done, value = _answer(response, method, attempt >= self.retries)
                if done:
                    return value
            await asyncio.sleep(_pause(response, self.backoff, attempt))
            attempt += 1

    def _do(self, call: _Call) -> Any:
        return self._ado(call)

    async def _ado(self, call: _Call) -> Any:
        body = await self._request(call.method, call.path, **call.kwargs())
        if call.paged:
            rows: list[dict] = []
            while isinstance(body, dict) and "results" in body:
                rows.extend(body["results"])
                if not body.get("next"):
                    return rows
                body = await self._request("GET", body["next"])
            return rows + list(body)
        return call.then(body) if call.then else body

    async def report(
        self,
        graph_id: int,
        session: str,
        *,
        uses: list[UseItem] | None = None,
        response: str | None = None,
        outcome: Outcome | None = None,
    ) -> dict[str, Report]:
        """``GraphClient.report``: the used items, the answer text, the outcome (each when given)."""
        sent: dict[str, Report] = {}
        if uses:
            sent["uses"] = await self.record_use(graph_id, session, uses)
        if response:
            sent["response"] = await self.record_response(graph_id, session, response)
        if outcome:
            sent["outcome"] = await self.improve(graph_id, session, outcome)
        return sent
