"""What every API call looks up, kept per process for a few seconds: the caller's token, the graph with the
caller's role in it, and the graph's current policy revision.

Without it a context call spent three to four queries before its own work: knox's token lookup and its
sweep of the user's other tokens, ``graph_access``'s graph-and-role query and ``current_policy``.

Correctness rests on two things, both tested (tests/graphadmin/runtime/test_hotcache.py):

* **A version, bumped on every change.** Saving or deleting what an entry was built from (an API token, a
  user, a membership, an organization, a graph, a policy revision, an edge type) writes a new random
  version into Django's cache (settings.CACHES: a file cache shared by the processes of one machine, or
  CACHE_URL=redis://... across machines), at once and again when the transaction commits. Each entry
  remembers the version it was built under and is used only while that is still the version. So a
  revoked token, a removed membership, an archived graph or a new policy revision is seen by the next
  call in every process that shares the cache. The version is read once per request.
* **A short lifetime** (``HOT_CACHE_SECONDS``, default 5; 0 turns the cache off): the bound for what the
  version cannot see, a change made by raw SQL or by a process with another cache. A token that expires
  is refused at its expiry (the entry keeps the expiry and checks it on every use).

An entry is never built from a transaction that has changed one of those models and not yet committed
(it could roll back): from such a change until the request ends or the transaction commits, this
thread reads the database as before. Callers get copies of the cached model instances.
"""

# Why a per-process cache, and what it was measured to save: docs/decisions/0006-per-process-hot-cache.md

from __future__ import annotations

import copy
import threading
import time
import uuid

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.signals import request_finished, request_started
from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

VERSION_KEY = "graphadmin:hotcache:version"
MAX_ENTRIES = 10_000

_entries: dict[tuple, tuple[str, float, object]] = {}
_local = threading.local()


def seconds() -> float:
    return float(getattr(settings, "HOT_CACHE_SECONDS", 5))


def version() -> str:
    """The current version: memoised for the request (reset by each request's start and end)."""
    memo = getattr(_local, "version", None)
    if memo is not None:
        return memo
    value = cache.get(VERSION_KEY)
    if value is None:
        # Never set, or evicted by the cache: a new one, so nothing built before counts.
        cache.add(VERSION_KEY, uuid.uuid4().hex, timeout=None)
        value = cache.get(VERSION_KEY) or ""
    if getattr(_local, "in_request", False):
        _local.version = value
    return value


def _pending() -> bool:
    """Whether this thread's open transaction has changed a cached model (its entries must not be built now)."""
    if not getattr(_local, "pending", False):
        return False
    if not connection.in_atomic_block:
        _local.pending = False  # the transaction has ended (committed or rolled back)
        return False
    return True


def lookup(kind: str, key, load):
    """The entry ``(kind, key)``, built by ``load()`` when missing, stale or of an old version.

    ``load`` returns the value to keep, or None for "nothing to keep" (returned as is, never cached).
    """
    ttl = seconds()
    if ttl <= 0 or _pending():
        return load()
    current = version()
    entry = _entries.get((kind, key))
    if entry is not None and entry[0] == current and time.monotonic() - entry[1] < ttl:
        return entry[2]
    value = load()
    if value is not None and not _pending():
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[(kind, key)] = (current, time.monotonic(), value)
    return value


def bump(**_kwargs) -> None:
    """A new version: every process's entries built before are no longer used. Again once the transaction commits,
    for entries another thread built meanwhile from what was still committed."""
    _publish()
    if connection.in_atomic_block:
        _local.pending = True
        transaction.on_commit(_committed)


def _publish() -> None:
    value = uuid.uuid4().hex
    cache.set(VERSION_KEY, value, timeout=None)
    _entries.clear()
    if getattr(_local, "in_request", False):
        _local.version = value


def _committed() -> None:
    _local.pending = False
    _publish()


def clear() -> None:
    """Forget every entry of this process (tests)."""
    _entries.clear()
    _local.__dict__.clear()


def _request_started(**_kwargs) -> None:
    _local.__dict__.clear()
    _local.in_request = True


def _request_finished(**_kwargs) -> None:
    _local.__dict__.clear()


# --- The three lookups --------------------------------------------------------------------------------------


def token(digest: str, load):
    """knox's ``(user, auth_token)`` for a token's digest, or what ``load()`` says (it raises for a bad token).

    A cached token past its expiry, or of a user no longer active, is looked up again (knox then refuses it).
    """
    if seconds() <= 0:
        return load()
    user, auth_token = lookup("token", digest, load)
    if (auth_token.expiry is not None and auth_token.expiry <= timezone.now()) or not user.is_active:
        _entries.pop(("token", digest), None)
        return load()
    return copy.copy(user), copy.copy(auth_token)


def graph_role(user_id: int, graph_id: int, load):
    """The graph (with its organization, and the user's role as ``user_role``) for ``(user, graph)``; None when
    ``load()`` finds none (not cached: the next call asks again)."""
    graph = lookup("graph", (user_id, graph_id), load)
    return copy.copy(graph) if graph is not None else None


def current_policy(graph_id: int, load):
    """The graph's newest policy revision."""
    revision = lookup("policy", graph_id, load)
    return copy.copy(revision) if revision is not None else None


def connect() -> None:
    """Bump the version on every change of what entries are built from (called once, from AppConfig.ready, with
    the models loaded; by label: graphadmin.models imports this module)."""
    labels = ("knox.AuthToken", "graphadmin.Membership", "graphadmin.Organization", "graphadmin.Graph")
    models = [apps.get_model(label) for label in (*labels, "graphadmin.PolicyRevision", "graphadmin.EdgeType")]
    for model in (*models, get_user_model()):
        name = f"{model._meta.label_lower}"
        post_save.connect(bump, sender=model, dispatch_uid=f"graphadmin.hotcache.save.{name}")
        post_delete.connect(bump, sender=model, dispatch_uid=f"graphadmin.hotcache.delete.{name}")
    request_started.connect(_request_started, dispatch_uid="graphadmin.hotcache.request_started")
    request_finished.connect(_request_finished, dispatch_uid="graphadmin.hotcache.request_finished")
