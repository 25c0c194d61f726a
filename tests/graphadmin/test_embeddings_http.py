"""OpenAIEmbedder against a real HTTP server started by the test (an OpenAI-compatible /v1/embeddings)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from graphadmin.embeddings import EmbeddingServiceError, OpenAIEmbedder

DIM = 384


class FakeEmbeddingsServer:
    """Serves POST /v1/embeddings: a vector per input (its length in dimension 0), in shuffled order.

    ``script`` is a list of status codes to answer before answering normally (e.g. [503] for one failure).
    """

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[int] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if outer.script:
                    status = outer.script.pop(0)
                    self._send(status, {"error": {"message": f"scripted {status}"}})
                    return
                data = [
                    {"object": "embedding", "index": i, "embedding": [float(len(t))] + [1.0] * (DIM - 1)}
                    for i, t in enumerate(body["input"])
                ]
                self._send(200, {"object": "list", "model": body["model"], "data": data[::-1]})

            def _send(self, status, payload):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with FakeEmbeddingsServer() as s:
        yield s


def embedder(server, **kwargs):
    kwargs.setdefault("batch", 3)
    return OpenAIEmbedder(server.url, "test-model", "sk-test", timeout=5, retries=2, backoff=0.01, dim=DIM, **kwargs)


def test_texts_are_sent_in_batches_and_come_back_in_order(server):
    texts = ["a", "bb", "", "cccc", "ddddd", "e", "ffffff"]
    vectors = embedder(server).embed(texts)
    assert [r["body"]["input"] for r in server.requests] == [["a", "bb", "cccc"], ["ddddd", "e", "ffffff"]]
    assert all(
        r["path"] == "/v1/embeddings" and r["auth"] == "Bearer sk-test" and r["body"]["model"] == "test-model"
        for r in server.requests
    )
    assert vectors[2] is None  # a blank text is not sent and has no vector
    lengths = [len(t) for t in texts if t]
    first = [v[0] for v in vectors if v is not None]
    norms = [(n + DIM - 1) ** 0.5 for n in (length * length for length in lengths)]
    assert [round(f * n, 6) for f, n in zip(first, norms, strict=True)] == [
        float(n) for n in lengths
    ]  # unit vectors, in order


def test_a_5xx_is_retried(server):
    server.script = [503, 502]
    vectors = embedder(server).embed(["one", "two"])
    assert len(server.requests) == 3 and all(v is not None for v in vectors)


def test_a_5xx_that_persists_is_raised_after_the_retries(server):
    server.script = [500, 500, 500]
    with pytest.raises(EmbeddingServiceError, match="answered 500 after 3 attempts") as exc:
        embedder(server).embed(["one"])
    assert exc.value.status_code == 500 and len(server.requests) == 3


def test_a_4xx_is_raised_at_once(server):
    server.script = [401]
    with pytest.raises(EmbeddingServiceError, match="answered 401") as exc:
        embedder(server).embed(["one"])
    assert exc.value.status_code == 401 and len(server.requests) == 1


def test_a_server_that_is_down_is_a_clear_error():
    with FakeEmbeddingsServer() as gone:
        url = gone.url
    with pytest.raises(EmbeddingServiceError, match="ConnectError"):
        OpenAIEmbedder(url, "m", "", timeout=1, retries=1, backoff=0.01, dim=DIM).embed(["one"])


def test_a_vector_of_the_wrong_dimension_is_refused(server):
    with pytest.raises(EmbeddingServiceError, match="expected 1 vectors of 8 numbers"):
        OpenAIEmbedder(server.url, "m", "", timeout=5, retries=0, dim=8).embed(["one"])


def test_configured_from_settings(server, settings):
    settings.EMBEDDINGS_URL, settings.EMBEDDINGS_MODEL, settings.EMBEDDINGS_API_KEY = (
        server.url + "/embeddings",
        "bge",
        "",
    )
    e = OpenAIEmbedder()
    assert e.url == server.url + "/embeddings" and e.model_name == "bge" and e.dim == settings.EMBEDDING_DIM
    e.embed(["x"])
    assert server.requests[0]["auth"] is None
