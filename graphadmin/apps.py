from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import Tags, register
from django.db.models.signals import post_migrate

from .runtime import checks, db_roles, hotcache


class GraphadminConfig(AppConfig):
    name = "graphadmin"
    verbose_name = "Graph memory"

    def ready(self):
        # The database the service needs (PostgreSQL 18+, pgvector): run by migrate and check --database.
        register(checks.check_database, Tags.database)
        # After every migrate, the application's database role gets its privileges afresh (graphadmin.runtime.db_roles).
        post_migrate.connect(db_roles.grant_after_migrate, sender=self, dispatch_uid="graphadmin.grant_app_role")
        # The filesystem broker in production (DEBUG off): a warning on every command that runs checks.
        register(checks.check_broker)
        register(checks.check_security, Tags.security, deploy=True)
        # Signal receivers (logins audited, tokens revoked on a password change; a durable task's run ending its
        # task-outbox row, on Celery's task_postrun) need the models loaded.
        import graphadmin.accounts  # noqa: F401

        # Per-process caches of tokens, graph roles and policies, invalidated on every change of what they hold.
        hotcache.connect()
        import graphadmin.outbox  # noqa: F401

        # The folder collectstatic writes and WhiteNoise reads as each web process starts (a missing one is a
        # warning on every start): made here, where every process begins, rather than by the settings.
        Path(settings.STATIC_ROOT).mkdir(parents=True, exist_ok=True)
