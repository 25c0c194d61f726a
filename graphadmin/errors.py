"""The errors that actions, services and access checks raise, each mapped once per medium.

- REST: ``graphadmin.api.errors.exception_handler`` (400 ``{field: [messages]}``, 404, 403, 409).
- Dashboard: ``graphadmin.runtime.middleware.DomainErrorMiddleware`` (a message and back to the page, 404, 403).
- MCP: ``graphadmin.agents.mcp_server`` (a ToolError).
- Admin: ``graphadmin.admin.tenancy.attempt`` (a message on the changelist).

Plain Python (no Django), so the pure rules can raise them too.
"""

from __future__ import annotations


class DomainError(Exception):
    """Base of the four: ``str(exc)`` is the message a person reads."""


class InputError(DomainError, ValueError):
    """Bad input found by an action or a service: ``errors`` maps each field to its messages.

    A field's value may be a nested mapping (``{"items": {2: {"node": ["..."]}}}``), as DRF renders it.
    """

    def __init__(self, errors: dict):
        self.errors = {field: [m] if isinstance(m, str) else m for field, m in errors.items()}
        super().__init__(self.errors)

    @classmethod
    def field(cls, field: str, message: str) -> InputError:
        return cls({field: [message]})

    def __str__(self) -> str:
        return "; ".join(f"{field}: {_text(messages)}" for field, messages in self.errors.items())


class NotFound(DomainError):
    """The object does not exist, or is another organization's (which is never revealed)."""


class Forbidden(DomainError):
    """The caller's role may not do this."""


class Conflict(DomainError):
    """The request clashes with the current state (already rolled back, another embedding model, ...).

    ``body`` is the REST API's answer (a 409); it defaults to ``{"detail": message}``.
    """

    def __init__(self, message: str, body: dict | None = None):
        super().__init__(message)
        self.body = body if body is not None else {"detail": message}


class TooManyRequests(DomainError):
    """A caller over a documented rate limit: the REST API's 429 (with Retry-After), an MCP tool error.

    ``wait``: seconds until the limit lets the caller through again.
    """

    def __init__(self, message: str, wait: float):
        super().__init__(message)
        self.wait = wait


def _text(messages) -> str:
    if isinstance(messages, dict):
        return "; ".join(f"{key}: {_text(value)}" for key, value in messages.items())
    if isinstance(messages, list | tuple):
        return " ".join(_text(m) for m in messages)
    return str(messages)
