"""Process plumbing of the service: what runs it, not what it knows.

The embedded database (``embedded_db``) and the application's database role (``db_roles``), the
filesystem broker (``broker``), system checks (``checks``), health checks (``health``), statement
timeouts (``timeouts``), request middleware and error pages (``middleware``, ``errorpages``), log
context (``logs``), backup/restore (``backup``), every advisory lock class (``locks``) and the per-process cache of
what every API call looks up (``hotcache``: it names models by label, never imports them). The entry
files a deployment names stay at the package root: ``graphadmin.settings``, ``graphadmin.wsgi``,
``graphadmin.celery``, ``graphadmin.gunicorn_conf``.
"""
