"""A live site for a whole test module: one server and one set of rows, built once, flushed afterwards.

pytest-django's ``live_server`` makes every test that uses it transactional (its autouse
``_live_server_helper`` requests ``transactional_db``), so its rows are flushed after each test and
each test builds its own again. Browser tests that only read (and a few that write, ordered last)
share one build per module instead. The module overrides that helper and opens the database itself:

    @pytest.fixture(autouse=True)
    def _live_server_helper(django_db_blocker):  # this module's tests share the rows of ``site``
        with django_db_blocker.unblock():
            yield

    @pytest.fixture(scope="module")
    def site(django_db_setup, live_server, django_db_blocker):
        with live_site(live_server, django_db_blocker, build) as s:
            yield s

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

from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings


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
