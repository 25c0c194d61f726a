"""A live site for a whole test module: one server and one set of rows, built once, flushed afterwards.

pytest-django's ``live_server`` makes every test that uses it transactional (its autouse
``_live_server_helper`` requests ``transactional_db``), so its rows are flushed after each test and
each test builds its own again. Browser tests that only read (and a few that write, ordered last)
share one build per module instead. The module overrides that helper and opens the database itself, with the
three fixtures ``module_site`` makes (the helper, ``site`` and a ``browser`` for the module):

    _live_server_helper, site, browser = module_site(build, EMBEDDER=HASHING)

``build()`` runs with the database open and in autocommit (the server's threads see its rows); the
rows are the module's, read and written as they are (no rollback between its tests), and flushed at
the end of the module, as a transactional test's would be, so the next module starts empty.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from tests.browser import chromium


@dataclass
class Site:
    url: str
    data: Any


@contextmanager
def live_site(live_server, django_db_blocker, build: Callable[[], Any], **settings) -> Iterator[Site]:
    """Build the rows (with ``settings`` overridden for the whole module), serve them, flush them afterwards."""
    with django_db_blocker.unblock(), override_settings(**settings):
        live_server._live_server_modified_settings.enable()  # ALLOWED_HOSTS gets the server's host
        try:
            yield Site(live_server.url, build())
        finally:
            live_server._live_server_modified_settings.disable()
            # What TransactionTestCase does after each test (tests/conftest.py lets the flush past the
            # ledgers' TRUNCATE refusals). A request the browser left in flight may still hold a lock
            # the TRUNCATE waits for (a deadlock PostgreSQL breaks): try again once it has answered.
            for attempt in range(3):
                try:
                    call_command("flush", verbosity=0, interactive=False, database="default", reset_sequences=False)
                    break
                except CommandError:
                    if attempt == 2:
                        raise
                    time.sleep(1)
            connection.close()


def module_site(build: Callable[[], Any], **settings):
    """The fixtures of a module whose tests share one live site: pytest-django's ``_live_server_helper``
    overridden (autouse: the database open, closed after each test), ``site`` (``live_site`` of ``build``
    with ``settings``, once per module) and ``browser`` (one headless Chromium per module). Assign all three
    to those names at the module's top level."""

    @pytest.fixture(autouse=True)
    def _live_server_helper(django_db_blocker):
        with django_db_blocker.unblock():
            yield
            connection.close()  # opened by the test's own reads and writes; none outlives the test database

    @pytest.fixture(scope="module")
    def site(django_db_setup, live_server, django_db_blocker):
        with live_site(live_server, django_db_blocker, build, **settings) as s:
            yield s

    @pytest.fixture(scope="module")
    def browser():
        with chromium() as b:
            yield b

    return _live_server_helper, site, browser
