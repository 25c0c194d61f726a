"""manage.py migrate: Django's, on the owner's connection when a separate one is configured.

With ``DATABASE_MIGRATE_URL`` set, the tables' owner has its own alias (``owner``): ``migrate`` then
uses it unless ``--database`` says otherwise, so the application role (``DATABASE_URL``), which may not
run DDL, is never the one migrating. After it, the application role gets its privileges
(``graphadmin.runtime.db_roles``).
"""

from django.conf import settings
from django.core.management.commands import migrate


class Command(migrate.Command):
    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.set_defaults(database=settings.MIGRATE_DATABASE)
