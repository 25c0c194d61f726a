"""gunicorn's configuration for the web service: ``gunicorn -c python:graphadmin.gunicorn_conf graphadmin.wsgi``.

``make run`` (``manage.py rundemo``) and a deployment (docs/deploy.md) use the same file; each value
comes from an environment variable (docs/configuration.md). gthread workers: one process per core
(at least two) with four threads each, so a request waiting on PostgreSQL does not hold its process,
and an idle keep-alive connection of an agent holds no thread. One process per core, not two: the
work is Python (the GIL makes a process's threads share one core), so more processes than cores
only add switching, and each process has its own caches (query embeddings, tokens, graph roles and
policies: graphadmin/runtime/hotcache.py) that more processes fill more times. Measured with the load test
at N = 1 and 16 on 2 cores (docs/history/performance-agent-session.md, "Serving": 2, 3 and 4
processes, 4 and 8 threads).
SIGTERM (and ``make run``'s Ctrl-C) stops gracefully: workers finish the requests they
have, within ``graceful_timeout`` seconds.
"""

import os

_cores = os.cpu_count() or 1

bind = [os.environ.get("RUN_ADDR", "127.0.0.1:8000")]
workers = int(os.environ.get("WEB_CONCURRENCY", 0)) or max(2, _cores)
# gthread, letting go of the port at once when the master dies (graphadmin/runtime/webworker.py).
worker_class = "graphadmin.runtime.webworker.Worker"
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
# LOG_FORMAT as settings.LOGGING reads it (json unless DEBUG is on): gunicorn's own lines (start, workers,
# signals, a killed request) are then JSON objects too, like the application's.
_debug = os.environ.get("DEBUG", "").lower() in ("1", "true", "yes", "on")
if os.environ.get("LOG_FORMAT", "text" if _debug else "json") == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {
                "()": "pythonjsonlogger.json.JsonFormatter",
                "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
                "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
            }
        },
        "handlers": {
            "json_stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
        },
        # gunicorn.access keeps its own handler (WEB_ACCESS_LOG); a worker's Django replaces the root's.
        "root": {"level": loglevel.upper(), "handlers": ["json_stderr"]},
        "loggers": {"gunicorn.error": {"level": loglevel.upper(), "handlers": ["json_stderr"], "propagate": False}},
    }
# gunicorn 24+ opens a control socket in the user's home by default: one per machine, so two servers
# of one user would share it. Not used here.
control_socket_disable = True
