from django.apps import AppConfig
from django.core.checks import Tags, register

from . import checks


class GraphadminConfig(AppConfig):
    name = "graphadmin"
    verbose_name = "Graph memory"

    def ready(self):
        # The database the service needs (PostgreSQL 18+, pgvector): run by migrate and check --database.
        register(checks.check_database, Tags.database)
        register(checks.check_security, Tags.security, deploy=True)
        # Signal receivers (logins audited, tokens revoked on a password change) need the models loaded.
        import graphadmin.accounts  # noqa: F401
