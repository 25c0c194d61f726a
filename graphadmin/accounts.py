"""Accounts: API tokens, and the audit of logins, failed logins and token revocation.

Tokens are django-rest-knox's (settings.REST_KNOX): the key is returned once by ``create_token`` and
only its SHA-512 digest is stored; each expires (``API_TOKEN_TTL_DAYS``). A password change deletes all
of the user's tokens (``revoke_tokens_on_password_change``), so a leaked key dies with the password.

Logins and failed logins (the login page and the admin's, both through django.contrib.auth's signals)
are appended to the audit chain of every organization the user belongs to (``do_record_login``); one
of a user with no organization, or of an unknown username, is a log line instead.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver
from knox.models import AuthToken

from graphadmin import audit
from graphadmin.models import Membership

log = logging.getLogger(__name__)


def create_token(user, *, ttl: timedelta | None = None) -> str:
    """A new API token for ``user``; returns its key, which is not stored (only its digest) and cannot be shown again.

    ``ttl``: how long it is valid, default ``API_TOKEN_TTL_DAYS`` (settings.REST_KNOX).
    """
    _instance, key = AuthToken.objects.create(user=user, **({"expiry": ttl} if ttl is not None else {}))
    return key


def _client(request) -> str | None:
    if request is None:
        return None
    # django-axes has resolved the client address (behind NUM_PROXIES proxies) by the time the signals run.
    return getattr(request, "axes_ip_address", None) or request.META.get("REMOTE_ADDR")


def _organizations(user) -> list[int]:
    memberships = Membership.objects.filter(user=user).order_by("organization_id")
    return list(memberships.values_list("organization_id", flat=True))


def _extra(payload: dict) -> dict:
    # A log record's ``user`` is the request's user (graphadmin/runtime/logs.py); the account acted on is ``username``.
    return {("username" if k == "user" else k): v for k, v in payload.items()}


@transaction.atomic
def do_record_login(user, *, actor, success: bool, client: str | None, locked_out: bool = False) -> int:
    """Append ``auth.login`` (or ``auth.login_failed``) to the chain of each of ``user``'s organizations.

    Returns how many chains were written; with none (no membership) the attempt is logged instead.
    """
    action = "auth.login" if success else "auth.login_failed"
    payload = {"user": user.get_username(), "client": client}
    if not success:
        payload["locked_out"] = locked_out
    organizations = _organizations(user)
    for org_id in organizations:
        audit.append(org_id, actor, action, payload)
    if not organizations:
        log.log(logging.INFO if success else logging.WARNING, action, extra=_extra(payload))
    return len(organizations)


@transaction.atomic
def do_revoke_tokens(user, *, actor, reason: str) -> int:
    """Delete all of ``user``'s API tokens, audited as ``auth.tokens_revoked`` in each of its organizations."""
    deleted, _ = AuthToken.objects.filter(user=user).delete()
    if deleted:
        payload = {"user": user.get_username(), "tokens": deleted, "reason": reason}
        organizations = _organizations(user)
        for org_id in organizations:
            audit.append(org_id, actor, "auth.tokens_revoked", payload)
        if not organizations:
            log.info("auth.tokens_revoked", extra=_extra(payload))
    return deleted


@receiver(user_logged_in, dispatch_uid="graphadmin.accounts.logged_in")
def record_login(sender, request, user, **kwargs):
    do_record_login(user, actor=user, success=True, client=_client(request))


@receiver(user_login_failed, dispatch_uid="graphadmin.accounts.login_failed")
def record_failed_login(sender, credentials, request=None, **kwargs):
    username = (credentials or {}).get(get_user_model().USERNAME_FIELD) or ""
    user = get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()
    client, locked_out = _client(request), bool(getattr(request, "axes_locked_out", False))
    if user is None:
        # Never the password: credentials arrive here with it cleansed, and only the username is kept.
        log.warning("auth.login_failed", extra={"username": username[:150], "client": client, "locked_out": locked_out})
        return
    do_record_login(user, actor="anonymous", success=False, client=client, locked_out=locked_out)


@receiver(post_save, sender=get_user_model(), dispatch_uid="graphadmin.accounts.password_changed")
def revoke_tokens_on_password_change(sender, instance, created, **kwargs):
    # AbstractBaseUser.set_password keeps the new raw password in _password until save() has finished,
    # so this is exactly "saved after set_password" (the admin, changepassword, the password-change page).
    if not created and getattr(instance, "_password", None) is not None:
        do_revoke_tokens(instance, actor="auth:password_change", reason="password changed")
