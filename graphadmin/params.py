"""Query parameters parsed in one place: a bad value is an ``InputError`` naming the parameter.

The REST API answers it with a 400 (``graphadmin.api.errors``); a dashboard page shows the message
and leaves the filter out. Never a 500: ``str.isdigit()`` accepts '²', which ``int()`` refuses, and a
date lookup on 'notadate' fails inside the database, so every view parses through these.
"""

from __future__ import annotations

import re
from datetime import date

from graphadmin.errors import InputError

BIGINT_MAX = 2**63 - 1  # PostgreSQL's bigint: ids and offsets beyond it cannot be stored or compared
_WHOLE = re.compile(r"[0-9]{1,19}")  # ASCII digits only, and few enough that int() never refuses the length


def parse_int(raw: str, name: str, *, low: int = 0, high: int = BIGINT_MAX) -> int:
    """``raw`` as a whole number in [low, high]; InputError naming ``name`` otherwise."""
    if not isinstance(raw, str) or not _WHOLE.fullmatch(raw.strip()) or not low <= int(raw) <= high:
        raise InputError({name: [f"Expected a whole number from {low} to {high}."]})
    return int(raw)


def parse_id(raw: str, name: str) -> int:
    """A row id (1 .. bigint's maximum)."""
    return parse_int(raw, name, low=1)


def parse_date(raw: str, name: str) -> date:
    """``raw`` as a calendar date, YYYY-MM-DD; InputError naming ``name`` otherwise."""
    try:
        return date.fromisoformat(raw.strip())
    except (TypeError, ValueError):
        raise InputError({name: ["Expected a date, YYYY-MM-DD."]}) from None


def parse_bool(raw: str, name: str) -> bool:
    """``raw`` as a yes/no flag: 1, true, yes, on or 0, false, no, off; InputError naming ``name`` otherwise."""
    value = raw.strip().lower() if isinstance(raw, str) else ""
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise InputError({name: ["Expected 1 or 0 (true or false)."]})


def optional(params, name: str, parse, **kwargs):
    """``parse(params[name], name, **kwargs)`` when the parameter is given and not blank, else None."""
    raw = params.get(name, "")
    return parse(raw, name, **kwargs) if raw.strip() else None


def date_filters(filters: dict, names=("since", "until")) -> tuple[dict, str]:
    """A dashboard list's date filters: ({name: date or None}, the message for the ones not applied).

    A bad date is left out of the filtering and named in the message the page shows (never a 500).
    """
    days, errors = {}, []
    for name in names:
        try:
            days[name] = optional(filters, name, parse_date)
        except InputError as exc:
            days[name] = None
            errors.append(f"{exc} (not applied)")
    return days, "; ".join(errors)
