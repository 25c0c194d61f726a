"""Anchors of the audit chains outside the database: each organization's head (seq, hash, time).

A role that owns the tables can disable the triggers, rewrite every event and recompute every hash
and the checkpoint: the chain then verifies on its own. An anchor is a copy of a head kept where the
database cannot reach: one JSON line per anchor appended to a file (``AUDIT_ANCHOR_FILE``, opened
``O_APPEND`` and fsync'd; make it append-only with ``chattr +a``, or ship it off the machine) and/or
written to a logger (``AUDIT_ANCHOR_LOGGER``, for a log sink such as journald or syslog). ``audit.verify``
checks the chain against the last anchor of its organization from the file, so a rewrite-and-rehash is
detected. Anchors are written by ``anchor_heads`` after a full walk proved the chain (the hourly
``verify_audit_chains`` task and ``manage.py anchor_audit``).

Each line names the database (its name) as well as the organization's id, so one file can serve a
test database and a development one without mixing their chains.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

log = logging.getLogger(__name__)

# How much of the file is read at a time when looking for an organization's last anchor, from the end.
_BLOCK = 64 * 1024


@dataclass(frozen=True)
class Anchor:
    """One organization's chain head as it was recorded outside the database."""

    organization: int
    seq: int
    hash: str
    time: str
    anchored_at: str


def anchor_file() -> Path | None:
    """The configured anchor file, or None when anchoring to a file is off (``AUDIT_ANCHOR_FILE=''``)."""
    path = getattr(settings, "AUDIT_ANCHOR_FILE", "")
    return Path(path) if path else None


def database_name() -> str:
    """The database whose chains the anchors describe (lines of other databases are ignored)."""
    return connection.settings_dict["NAME"]


def _lines_from_end(path: Path):
    """The file's lines, last first, read in blocks from the end (the last anchor is near the end)."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        position, rest = handle.tell(), b""
        while position > 0:
            size = min(_BLOCK, position)
            position -= size
            handle.seek(position)
            lines = (handle.read(size) + rest).split(b"\n")
            rest = lines.pop(0)
            yield from reversed(lines)
        yield rest


def last_anchor(organization_id: int) -> Anchor | None:
    """The newest anchor of the organization in the anchor file (None: none yet, or no file). Reads only."""
    path = anchor_file()
    if path is None or not path.exists():
        return None
    database = database_name()
    for raw in _lines_from_end(path):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
            if line["database"] == database and line["organization"] == organization_id:
                return Anchor(line["organization"], line["seq"], line["hash"], line["time"], line["anchored_at"])
        except (ValueError, KeyError, TypeError):
            # A torn or foreign line: skipped, but said, since it may be someone's attempt to hide an anchor.
            log.warning(
                "unreadable audit anchor line", extra={"file": str(path), "line": raw[:200].decode(errors="replace")}
            )
    return None


def _lines(heads: list[dict]) -> list[str]:
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    database = database_name()
    return [
        json.dumps(
            {
                "database": database,
                "organization": head["organization"],
                "slug": head["slug"],
                "seq": head["seq"],
                "hash": head["hash"],
                "time": head["time"].astimezone(UTC).isoformat(timespec="microseconds"),
                "anchored_at": now,
            },
            sort_keys=True,
        )
        for head in heads
    ]


def write_anchors(heads: list[dict]) -> list[str]:
    """Append one JSON line per head to the anchor file (one write, then fsync) and/or log each line.

    ``heads``: dicts with organization (id), slug, seq, hash and time (the head event's created_at).
    The file is opened ``O_APPEND``: every write lands at its end, whoever else appends, and a file
    marked ``chattr +a`` accepts nothing else. Returns the lines written.
    """
    lines = _lines(heads)
    if not lines:
        return lines
    path = anchor_file()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            data = "".join(line + "\n" for line in lines).encode()
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"short write to the audit anchor file {path}: {written} of {len(data)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)
    logger_name = getattr(settings, "AUDIT_ANCHOR_LOGGER", "")
    if logger_name:
        sink = logging.getLogger(logger_name)
        for line, head in zip(lines, heads, strict=True):
            sink.info(line, extra={"audit_anchor": True, "organization": head["slug"], "seq": head["seq"]})
    return lines
