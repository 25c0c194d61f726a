"""A stub of the graphadmin REST API on 127.0.0.1 for the adapters' offline tests.

Every request it receives and every answer it gives are checked against the product's OpenAPI schema
(``openapi.json`` beside this file, written by ``manage.py spectacular``; the product's test
tests/clients/test_openapi_copy.py fails when it differs from what the server generates), so the stub cannot
drift from the server. It records each request (method, path, headers, JSON) for the tests to read.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema

SCHEMA = json.loads((Path(__file__).with_name("openapi.json")).read_text())

NOTES = [
    {"node": 11, "key": "ranking/weights", "title": "Ranking weights", "text": "Edges are ranked by weight."},
    {"node": 12, "key": "ranking/hnsw", "title": "HNSW index", "text": "Vector search uses an HNSW index."},
    {"node": 13, "key": "ops/backup", "title": "Backups", "text": "pg_dump and the audit anchors."},
]


def _nullable(schema):
    """OpenAPI 3.0's ``nullable: true`` as JSON Schema (a type list with "null"), recursively."""
    if isinstance(schema, list):
        return [_nullable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _nullable(v) for k, v in schema.items() if k != "nullable"}
    if schema.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


COMPONENTS = _nullable(SCHEMA["components"])


def _operation(method: str, path: str) -> tuple[str, dict]:
    for template, ops in SCHEMA["paths"].items():
        pattern = "^" + re.sub(r"\{[^}]+\}", r"[^/]+", template) + "$"
        if re.match(pattern, path) and method.lower() in ops:
            return template, ops[method.lower()]
    raise AssertionError(f"{method} {path} is not in the product's OpenAPI schema")


def _check(schema: dict, value, what: str) -> None:
    schema = _nullable(schema)
    wrapped = {**schema, "components": COMPONENTS}
    try:
        jsonschema.validate(value, wrapped)
    except jsonschema.ValidationError as exc:
        raise AssertionError(f"{what} does not match the OpenAPI schema: {exc.message}") from exc


def check_request(method: str, path: str, body) -> None:
    _, op = _operation(method, path)
    content = op.get("requestBody", {}).get("content", {})
    if body is not None and "application/json" in content:
        _check(content["application/json"]["schema"], body, f"the request {method} {path}")


def check_answer(method: str, path: str, status: int, body) -> None:
    _, op = _operation(method, path)
    response = op["responses"].get(str(status))
    assert response is not None, f"{method} {path} does not answer {status} in the OpenAPI schema"
    schema = response.get("content", {}).get("application/json", {}).get("schema")
    if schema is not None:
        _check(schema, body, f"the answer of {method} {path} ({status})")


class Stub:
    """The server's state: the requests it saw, the notes it answers with, and switches for the tests."""

    def __init__(self):
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.abstain = False  # answer context with abstained: true and no items
        self.fail_next = 0  # answer the next N requests with a 503 (retries)
        self.retry_after = ""  # the Retry-After header of those 503s (none when empty)
        self.injections = 0
        self.batches = 0
        self.remembered: list[dict] = []
        self.errors: list[str] = []  # schema mismatches, requests or answers

    def seen(self, method: str | None = None, suffix: str = "") -> list[dict]:
        with self.lock:
            return [
                r for r in self.requests if (method is None or r["method"] == method) and r["path"].endswith(suffix)
            ]

    def answer(self, method: str, path: str, body) -> tuple[int, object]:
        parts = path.strip("/").split("/")
        if method == "POST" and path.endswith("/context/"):
            with self.lock:
                self.injections += 1
                injection = self.injections
            items = [] if self.abstain else self._items(body.get("query", ""), body.get("budget") or 5)
            answer = {
                "injection": injection,
                "session": body["session"],
                "session_created": True,
                "mode": "retrieve",
                "policy_revision": 1,
                "budget_unit": "items",
                "budget": body.get("budget") or 5,
                "spent": len(items),
                "considered": len(NOTES),
                "items": items,
                "vectors_pending": 0,
                "confidence": 0.05 if self.abstain else 0.8,
                "abstained": self.abstain,
            }
            return 201, answer
        if method == "POST" and path.endswith("/search/"):
            hits = [
                {
                    "rank": i + 1,
                    "node": n["node"],
                    "stable_id": f"00000000-0000-0000-0000-0000000000{n['node']}",
                    "key": n["key"],
                    "title": n["title"],
                    "kind": "note",
                    "vector_score": 0.5,
                    "bm25": 0.0,
                    "hops": None,
                    "entry": "vector",
                    "path": [],
                    "total": 0.5,
                    "components": {},
                }
                for i, n in enumerate(NOTES)
            ]
            return 200, {"policy_revision": 1, "vectors_pending": 0, "results": hits[: body.get("k", 20)]}
        if method == "POST" and parts[-3] == "sessions":
            with self.lock:
                self.batches += 1
            return 202, {"status": "queued", "task_id": f"task-{self.batches}", "idempotency_key": f"{parts[-1]}:k"}
        if method == "POST" and path.endswith("/memory/remember/"):
            with self.lock:
                self.remembered.append(body)
                node = 100 + len(self.remembered)
            return 201, {"status": "created", "batch": 7, "node": node, "edges": [], "unresolved": []}
        if method == "POST" and (path.endswith("/memory/link/") or path.endswith("/memory/forget/")):
            return 201 if path.endswith("/link/") else 200, {
                "status": "created",
                "batch": 8,
                "edges": [],
                "unresolved": [],
            }
        if method == "GET" and path == "/api/batches/":
            return 200, {"count": 0, "next": None, "previous": None, "results": []}
        return 404, {"detail": "Not found."}

    def _items(self, query: str, budget: int) -> list[dict]:
        words = set(query.lower().split())
        ranked = sorted(
            NOTES, key=lambda n: -len(words & set(re.findall(r"\w+", (n["title"] + " " + n["text"]).lower())))
        )
        return [
            {
                "rank": i + 1,
                **{k: n[k] for k in ("node", "key", "title", "text")},
                "kind": "note",
                "tokens": len(n["text"].split()),
                "total": round(1.0 - i * 0.1, 3),
                "vector_score": round(0.8 - i * 0.1, 3),
                "hops": 0,
                "entry": "vector",
                "path": [],
                "edge": None,
                "edge_type": None,
            }
            for i, n in enumerate(ranked[:budget])
        ]


def serve() -> tuple[ThreadingHTTPServer, Stub]:
    stub = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _handle(self, method: str):
            path, _, query = self.path.partition("?")
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = (
                json.loads(raw) if raw and self.headers.get("Content-Type", "").startswith("application/json") else None
            )
            with stub.lock:
                stub.requests.append(
                    {"method": method, "path": path, "query": query, "headers": dict(self.headers), "json": body}
                )
                failing = stub.fail_next > 0
                stub.fail_next -= failing
            if failing:
                status, answer = 503, {"detail": "try again"}
            else:
                try:
                    check_request(method, path, body)
                    status, answer = stub.answer(method, path, body or {})
                    if status < 400:  # refusals are the server's own (not in the schema's responses)
                        check_answer(method, path, status, copy.deepcopy(answer))
                except AssertionError as exc:  # the fixture fails the test with it (tests/conftest.py)
                    stub.errors.append(str(exc))
                    status, answer = 400, {"detail": str(exc)}
            data = json.dumps(answer).encode()
            self.send_response(status)
            if failing and stub.retry_after:
                self.send_header("Retry-After", stub.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._handle("GET")

        def do_POST(self):
            self._handle("POST")

        def do_PATCH(self):
            self._handle("PATCH")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, stub
