"""The database system check (graphadmin.E001): PostgreSQL 18 or later, with pgvector available."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from graphadmin.runtime import checks


@pytest.mark.django_db
def test_the_servers_the_service_runs_on_pass():
    assert checks.check_database(databases=["default"]) == []
    call_command("check", "--database", "default")  # registered: runs, and finds nothing


def test_an_older_server_is_refused_naming_what_to_install():
    (error,) = checks.problems("default", "postgresql", 170005, True)
    assert error.id == "graphadmin.E001"
    assert "PostgreSQL 17.5" in error.msg and "18 or later" in error.msg
    assert "postgresql-18" in error.hint and "DATABASE_URL" in error.hint


def test_a_server_without_pgvector_is_refused():
    (error,) = checks.problems("default", "postgresql", 180004, False)
    assert error.id == "graphadmin.E001" and "'vector' extension" in error.msg and "pgvector" in error.hint
    assert len(checks.problems("default", "postgresql", 160000, False)) == 2


def test_another_database_engine_is_refused():
    (error,) = checks.problems("other", "sqlite", None, False)
    assert error.id == "graphadmin.E001" and "sqlite" in error.msg


@pytest.mark.django_db
def test_check_command_fails_on_an_old_server(monkeypatch):
    from django.db import connection

    monkeypatch.setattr(connection, "pg_version", 170000, raising=False)
    with pytest.raises(SystemCheckError, match="graphadmin.E001"):
        call_command("check", "--database", "default")
