"""The database engine of the embedded server: Django's PostgreSQL backend, which starts the server first.

Named by ``graphadmin.runtime.embedded_db.settings_for`` (``ENGINE``); the server and the database are
those of ``ensure_database``.
"""
