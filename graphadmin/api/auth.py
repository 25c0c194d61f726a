"""API token authentication: django-rest-knox's hashed, expiring tokens, with bad tokens throttled.

A client address that sent ``API_THROTTLE_BAD_TOKENS`` bad tokens (unknown, expired, of an inactive
user) within the window gets 429 until the window has passed for every token whose prefix (knox's
``token_key``, the part it looks tokens up by) is no live token's, and for every prefix that itself
failed that often from the address: guessing is refused, not only slowed, while the other clients
behind the same address (a NAT, a proxy), whose tokens' prefixes exist, keep working. The REST API
(``TokenAuthentication``) and the MCP HTTP server (graphadmin.agents.mcp_server) count in the same place,
DRF's throttle cache (settings.CACHES).
"""

from __future__ import annotations

import logging

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS
from rest_framework.exceptions import AuthenticationFailed, Throttled
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from graphadmin.runtime import hotcache

log = logging.getLogger(__name__)


def client_address(request) -> str:
    """The client's address: REMOTE_ADDR, or with NUM_PROXIES proxies in front the X-Forwarded-For entry the
    outermost trusted proxy added (DRF's rule). Throttles and django-axes' login lockout count by it."""
    return BaseThrottle().get_ident(request)


class FailedTokenThrottle(SimpleRateThrottle):
    """Bad token attempts per client address, with DRF's sliding window (scope ``token_failure``).

    Unlike DRF's request throttles it counts only failures (``record_failure``); ``refuse`` raises
    Throttled while the address is over the limit.
    """

    scope = "token_failure"

    def key(self, ident: str) -> str:
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def _history(self, ident: str) -> list[float]:
        now = self.timer()
        return [t for t in self.cache.get(self.key(ident), []) if t > now - self.duration]

    def refuse(self, ident: str, token: str = "") -> None:
        """Raise Throttled (429, with the seconds to wait) when ``ident`` is over the limit, unless ``token``'s
        prefix is a live token's and that prefix is not itself over the limit from ``ident``."""
        if self.num_requests is None:
            return
        history = self._history(ident)
        if len(history) < self.num_requests:
            return
        prefix = token_prefix(token)
        if prefix and prefix_exists(prefix):
            history = self._history(f"{ident}|{prefix}")
            if len(history) < self.num_requests:
                return
        self.history, self.now = history, self.timer()
        raise Throttled(wait=self.wait())

    def record_failure(self, ident: str, token: str = "") -> None:
        """Count one bad token from ``ident`` (newest first, as DRF keeps its history), and from its prefix."""
        if self.num_requests is None:
            return
        keys = [ident] + ([f"{ident}|{token_prefix(token)}"] if token_prefix(token) else [])
        for key in keys:
            history = [self.timer(), *self._history(key)]
            self.cache.set(self.key(key), history, self.duration)
        log.warning("bad API token", extra={"client": ident, "failures": len(history)})


def token_prefix(token: str) -> str:
    """The part of a knox token it is looked up by (its ``token_key``); '' for a token too short to have one."""
    token = (token or "").strip()
    return token[: CONSTANTS.TOKEN_KEY_LENGTH] if len(token) >= CONSTANTS.TOKEN_KEY_LENGTH else ""


def prefix_exists(prefix: str) -> bool:
    """Whether a live (unexpired) token has this prefix: one indexed query, asked only of an address over the limit."""
    return (
        AuthToken.objects.filter(token_key=prefix)
        .filter(Q(expiry__isnull=True) | Q(expiry__gt=timezone.now()))
        .exists()
    )


def header_token(authorization: str) -> str:
    """The token of an ``Authorization: Token <key>`` (or ``Bearer <key>``) header; '' otherwise."""
    parts = (authorization or "").split()
    return parts[1] if len(parts) == 2 and parts[0].lower() in ("token", "bearer") else ""


class TokenAuthentication(KnoxTokenAuthentication):
    """knox's ``Authorization: Token <key>``, refused with 429 for a client over the bad-token limit."""

    def authenticate(self, request):
        if not request.META.get("HTTP_AUTHORIZATION"):
            return None  # no credentials: nothing to count, and no cache read on the session path
        throttle = FailedTokenThrottle()
        ident = throttle.get_ident(request)
        token = header_token(request.META["HTTP_AUTHORIZATION"])
        throttle.refuse(ident, token)
        try:
            return super().authenticate(request)
        except AuthenticationFailed:
            throttle.record_failure(ident, token)
            raise

    def authenticate_credentials(self, token):
        """knox's check, its answer kept briefly per process (graphadmin.runtime.hotcache: a revoked token, a
        deactivated user or a password change is seen by the next call; an expired token is refused at its expiry)."""
        try:
            digest = hash_token(token.decode())
        except (TypeError, ValueError, UnicodeDecodeError):
            return super().authenticate_credentials(token)  # knox's own refusal of a malformed token
        return hotcache.token(digest, lambda: super(TokenAuthentication, self).authenticate_credentials(token))


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of ``TokenAuthentication``: knox's, ``Authorization: Token <key>``."""

    target_class = "graphadmin.api.auth.TokenAuthentication"
    name = "tokenAuth"


def user_for_key(key: str):
    """The active user whose unexpired token is ``key``; AuthenticationFailed otherwise (no throttling here)."""
    if not key:
        raise AuthenticationFailed("No token.")
    user, _token = KnoxTokenAuthentication().authenticate_credentials(key.encode())
    return user
