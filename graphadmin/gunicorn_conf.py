"""gunicorn's configuration for the web service: ``gunicorn -c python:graphadmin.gunicorn_conf graphadmin.wsgi``.

``make run`` (``manage.py rundemo``) and a deployment (docs/deploy.md) use the same file; each value
comes from an environment variable (README, "Configuration"). gthread workers: one process per core
and a half (the work is Python plus database round trips) with a few threads each, so a request
waiting on PostgreSQL does not hold its process, and an idle keep-alive connection of an agent holds
no thread. SIGTERM (and ``make run``'s Ctrl-C) stops gracefully: workers finish the requests they
have, within ``graceful_timeout`` seconds.
"""

import os

_cores = os.cpu_count() or 1

bind = [os.environ.get("RUN_ADDR", "127.0.0.1:8000")]
workers = int(os.environ.get("WEB_CONCURRENCY", 0)) or max(2, _cores * 2)
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", 4))
# A request still running after this many seconds is killed with its worker (and logged).
timeout = int(os.environ.get("WEB_TIMEOUT", 60))
graceful_timeout = int(os.environ.get("WEB_GRACEFUL_TIMEOUT", 30))
keepalive = 5
# X-Forwarded-* headers are believed from these addresses only (the reverse proxy's).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
accesslog = os.environ.get("WEB_ACCESS_LOG") or None
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "INFO").lower()
wsgi_app = "graphadmin.wsgi:application"
# gunicorn 24+ opens a control socket in the user's home by default: one per machine, so two servers
# of one user would share it. Not used here.
control_socket_disable = True
