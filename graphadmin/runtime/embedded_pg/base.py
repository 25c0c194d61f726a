"""Django's PostgreSQL backend, with the embedded server started before a process's first connection."""

from django.db.backends.postgresql import base, client

from graphadmin.runtime.embedded_db import ensure_database


class DatabaseClient(client.DatabaseClient):
    """``manage.py dbshell``: psql gets the server's socket folder, so the server runs first."""

    def runshell(self, parameters):
        ensure_database(self.connection.settings_dict)
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = DatabaseClient

    def get_connection_params(self):
        ensure_database(self.settings_dict)
        return super().get_connection_params()
