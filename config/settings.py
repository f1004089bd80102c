"""Kody settings: one module, driven by environment variables.

With nothing set, Kody runs on embedded defaults under ``var/`` (Postgres with pgvector via
``pgserver``, a local Redis, filesystem storages, billing off). Each variable below switches
one part to a real service; the README lists them.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from config.buckets import bucket_storages
from config.env import envbool, envchoice, envfloat, envint, envlist, envstr
from kody import embedded

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = embedded.var_dir()

DEBUG = envbool("KODY_DEBUG", True)
# The development key only exists so a clean checkout boots; production must set one
# (``check --deploy`` flags its short length and ``KODY_DEBUG=0`` refuses to start without it).
SECRET_KEY = envstr("KODY_SECRET_KEY") or ("dev-insecure-key" if DEBUG else "")
if not SECRET_KEY:
    raise RuntimeError("KODY_SECRET_KEY must be set when KODY_DEBUG=0")

ALLOWED_HOSTS = envlist("KODY_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("KODY_CSRF_TRUSTED_ORIGINS", [])
# Where mail links point. ``manage.py up`` sets it to the host and port it serves on; a
# command run beside it with KODY_PORT/KODY_HOST set follows them too.
SITE_URL = envstr("KODY_SITE_URL") or (
    f"http://{envstr('KODY_HOST', '127.0.0.1')}:{envint('KODY_PORT', 8000)}"
)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "servestatic",  # its system checks for the ServeStatic settings
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "rest_framework",
    "drf_spectacular",
    "django_celery_beat",
    "drf_spectacular_sidecar",
    "oauth2_provider",
    "kody",
    "apps.accounts",
    "apps.entitlements",
    "apps.mailbox",
    "apps.system_email",
    "apps.packages",
    "apps.community",
    "apps.jobs",
]

MIDDLEWARE = [
    # Outermost: as many requests inside as the pool has connections (kody.admission).
    "kody.admission.AdmissionMiddleware",
    # Turns an outage raised anywhere below (a middleware included) into a 503.
    "kody.middleware.ServiceUnavailableMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "kody.input_guard.RefuseUnstorableTextMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "apps.accounts.two_factor_gate.TwoFactorGateMiddleware",
    "apps.accounts.middleware.AccountGateMiddleware",
    "apps.accounts.time_zones.TimeZoneMiddleware",
    "apps.accounts.middleware.ReferralCookieMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

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

# --- Databases ---------------------------------------------------------------------------
# ``default`` holds the public schema and every per-user actor schema; ``audit`` holds the
# security audit trail (the original's AUDIT_DB). Embedded mode puts both on one server.


# Lets several checkouts (or agents) share one server without sharing test databases.
_TEST_SUFFIX = envstr("KODY_TEST_DB_SUFFIX")


def _database(url_var: str, embedded_name: str) -> dict:
    url = envstr(url_var)
    if url:
        config = dj_database_url.parse(url, conn_max_age=envint("KODY_DB_CONN_MAX_AGE", 60))
    else:
        config = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": embedded_name,
            "USER": "postgres",
            "PASSWORD": "",
            "HOST": str(embedded.postgres_socket_dir()),
            "PORT": "",
            "CONN_MAX_AGE": 0,
        }
    config.setdefault("TEST", {})["NAME"] = f"test_{config['NAME']}{_TEST_SUFFIX}"
    return config


DATABASES = {"default": _database("DATABASE_URL", "kody")}
if envstr("AUDIT_DATABASE_URL") or not envstr("DATABASE_URL"):
    DATABASES["audit"] = _database("AUDIT_DATABASE_URL", "kody_audit")
else:
    # One real server, two databases: the audit trail lives beside the app database.
    _audit_name = f"{DATABASES['default']['NAME']}_audit"
    DATABASES["audit"] = {
        **DATABASES["default"],
        "NAME": _audit_name,
        "TEST": {"NAME": f"test_{_audit_name}{_TEST_SUFFIX}"},
    }
DATABASE_ROUTERS = ["config.routers.AuditRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "accounts.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login"
LOGIN_REDIRECT_URL = "/account"

# --- Cache and broker --------------------------------------------------------------------
REDIS_URL = envstr("REDIS_URL") or embedded.redis_url()

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "kody",
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }
}


def _broker_url(redis_url: str) -> str:
    # kombu spells unix sockets ``redis+socket://``.
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


CELERY_BROKER_URL = envstr("CELERY_BROKER_URL") or _broker_url(REDIS_URL)
CELERY_RESULT_BACKEND = envstr("CELERY_RESULT_BACKEND") or _broker_url(REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"

# Per-user actor calls hash the stable user id onto one of this many shard queues, each
# drained by one consumer. Set it to the shard consumers a deployment runs (one per
# shard-worker process): more shards than that only split the batches. Every web
# process and worker must agree on it; after lowering it, `manage.py move_stranded_shards`.
KODY_ACTOR_SHARDS = envint("KODY_ACTOR_SHARDS", 2)
KODY_ACTORS_INLINE = envbool("KODY_ACTORS_INLINE", False)
KODY_ACTOR_CALL_TIMEOUT = envint("KODY_ACTOR_CALL_TIMEOUT", 30)
# A shard worker drains up to this many calls at once and commits each user's share together.
KODY_ACTOR_BATCH_SIZE = envint("KODY_ACTOR_BATCH_SIZE", 256)
# ... fewer when its last batch's calls were slow, so a batch (whose effects all commit, and
# whose calls are all answered, together) lasts about this long; 0: always up to the size.
KODY_ACTOR_BATCH_SECONDS = envfloat("KODY_ACTOR_BATCH_SECONDS", 0.25)
# A killed (or paused) shard worker's queues are taken over by another worker after this
# long; a heartbeat renews the lease every third of it while the worker runs.
KODY_ACTOR_LEASE_SECONDS = envfloat("KODY_ACTOR_LEASE_SECONDS", 15)
# The shard transport's Redis; ``redis+cluster://host:port`` selects Redis Cluster. Unset:
# the Celery broker's Redis.
KODY_ACTOR_REDIS_URL = envstr("KODY_ACTOR_REDIS_URL")
# How many shard-worker processes `manage.py up` spreads the shards over (never more than
# KODY_ACTOR_SHARDS). 0, the default, means one per CPU (kody.actors.topology.worker_processes;
# one GIL per process, measured in benchmarks/README.md). The shard count is not derived
# from the CPU count: it decides which queue a user's calls go to, so it must be one number
# fleet-wide.
KODY_ACTOR_WORKER_PROCESSES = envint("KODY_ACTOR_WORKER_PROCESSES", 0)
KODY_LANE_RETRY_BASE_SECONDS = envint("KODY_LANE_RETRY_BASE_SECONDS", 2)
# Text embeddings (kody.embeddings): an import path to the embedder class. The vector column's
# dimension must match it (``manage.py check`` says so); a model change means ``manage.py reindex``.
KODY_EMBEDDER = envstr("KODY_EMBEDDER", "kody.embeddings.wordllama.WordLlamaEmbedder")
# Where a write's vector is embedded: "inline" (in the write's transaction), "deferred" (the
# write records search-index debt and a task embeds after COMMIT) or "auto": inline while the
# embedder's measured latency per small call stays under KODY_EMBED_INLINE_BUDGET_MS.
KODY_EMBED_MODE = envchoice("KODY_EMBED_MODE", "auto", ("auto", "inline", "deferred"))
KODY_EMBED_INLINE_BUDGET_MS = envfloat("KODY_EMBED_INLINE_BUDGET_MS", 25.0)
# HNSW candidates per vector query (pgvector's hnsw.ef_search); see benchmarks/vectors.py.
KODY_VECTOR_EF_SEARCH = envint("KODY_VECTOR_EF_SEARCH", 200)
# Secret entries are sealed with AES-GCM: "id:base64(32-byte key)" pairs, comma-separated, and
# the id new writes use. Unset: one key derived from SECRET_KEY (apps/packages/services/crypto).
KODY_SECRET_KEYS = envlist("KODY_SECRET_KEYS", [])
KODY_SECRET_KEY_ID = envstr("KODY_SECRET_KEY_ID")
# Every actor transaction sets these (SET LOCAL): a call that waits longer for a lock, or runs
# one statement longer, fails alone with ActorUnavailable (retry with its key) instead of
# holding its shard's batch.
KODY_ACTOR_LOCK_TIMEOUT_MS = envint("KODY_ACTOR_LOCK_TIMEOUT_MS", 5000)
KODY_ACTOR_STATEMENT_TIMEOUT_MS = envint("KODY_ACTOR_STATEMENT_TIMEOUT_MS", 30000)
# Bounded backend memory (kody.actors.recycle): a shard consumer reconnects once its
# backend holds more than this many MB (0: off). Under 256 MB with room for the schemas
# served between two measurements; a fleet whose working set fits is never recycled.
KODY_ACTOR_RECYCLE_MEMORY_MB = envint("KODY_ACTOR_RECYCLE_MEMORY_MB", 224)
# Users idle this many days are hibernated (kody.userschema.hibernation; the daily lane).
KODY_HIBERNATE_IDLE_DAYS = envint("KODY_HIBERNATE_IDLE_DAYS", 30)
# Pre-built empty schemas a restore renames instead of running the DDL (kody.userschema.spares);
# topped up by the hibernation lane and command. 0: restores always build from the DDL.
KODY_SPARE_SCHEMAS = envint("KODY_SPARE_SCHEMAS", 20)
# Tables only where used (kody.userschema.tablesets); off creates every table with the schema.
KODY_LAZY_ACTOR_TABLES = envbool("KODY_LAZY_ACTOR_TABLES", True)
# The kernel asks this callable whether stable ids are live accounts or being deleted
# (kody.userschema.accounts.AccountDirectory); the kernel never imports apps.*.
KODY_ACCOUNT_DIRECTORY = "apps.accounts.kernel.account_states"
CELERY_TASK_ROUTES = {"kody.lanes.*": {"queue": "default"}}
# Beat reads its schedule from the database (django-celery-beat), so an operator can see and
# pause it in /admin/. The one entry, the five-minute lane dispatcher, is created by the
# migration kody/0008; lanes themselves are paused per lane (kody.lanes.models.LaneControl).
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# At most this many due jobs claimed per JobManager alarm; a backlog re-arms about 1 s later.
KODY_MAX_DUE_JOBS_PER_ALARM = envint("KODY_MAX_DUE_JOBS_PER_ALARM", 25)
# A claimed job run's lease: a run whose worker died is retried once it runs out. Longer than
# any capability call (actor calls time out after 30 s); the outage tests shorten it.
KODY_JOB_LEASE_SECONDS = envint("KODY_JOB_LEASE_SECONDS", 120)

# --- Storages (one per R2 bucket of the original) ------------------------------------------
S3_ENDPOINT_URL = envstr("KODY_S3_ENDPOINT_URL")
S3_BUCKET_PREFIX = envstr("KODY_S3_BUCKET_PREFIX", "kody-")
# ``s3`` uses AWS credentials from the usual boto3 sources (AWS_ACCESS_KEY_ID, roles, ...).
KODY_STORAGE = envchoice(
    "KODY_STORAGE", "s3" if S3_ENDPOINT_URL else "filesystem", ("filesystem", "s3")
)
USE_S3 = KODY_STORAGE == "s3"

STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # ServeStatic serves static files from the ASGI process; DEBUG serves them from the source
    # folders, production from ``collectstatic`` output (compressed, hashed names).
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "servestatic.storage.CompressedManifestStaticFilesStorage"
    },
    **bucket_storages(
        use_s3=USE_S3, endpoint_url=S3_ENDPOINT_URL, bucket_prefix=S3_BUCKET_PREFIX, var_dir=VAR_DIR
    ),
}
MEDIA_ROOT = VAR_DIR / "media"
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
# ServeStatic (WhiteNoise's ASGI-native fork) streams files with an async iterator under
# uvicorn, where WhiteNoise's sync file iterator made Django warn on every static request.
SERVESTATIC_USE_FINDERS = DEBUG
SERVESTATIC_AUTOREFRESH = DEBUG

# --- Stripe ------------------------------------------------------------------------------
STRIPE_SECRET_KEY = envstr("STRIPE_SECRET_KEY")
STRIPE_WEBHOOK_SECRET = envstr("STRIPE_WEBHOOK_SECRET")
STRIPE_API_BASE = envstr("STRIPE_API_BASE")  # tests point stripe-python at a local fake
BILLING_ENABLED = bool(STRIPE_SECRET_KEY)

# --- What the kernel needs from the accounts app (kody/callers.py) ----------------------------
KODY_BEARER_BACKEND = "apps.accounts.services.tokens.BearerBackend"
KODY_ACCOUNT_POLICY = "apps.accounts.policy.AccountPolicy"
KODY_AUDIT_SINK = "apps.accounts.services.audit.record"
# How the kernel mails the operators (sender local, subject, text): the DR export watchdog.
KODY_OPERATOR_ALERT = "apps.system_email.services.alerts.mail_operators"

# --- API ---------------------------------------------------------------------------------
# Bodies over this size are refused with 413 before they are parsed (MCP's SDK uses 4 MiB).
DATA_UPLOAD_MAX_MEMORY_SIZE = 4 * 1024 * 1024
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
# 3.1 so capability schemas (JSON Schema 2020-12, as MCP uses) appear in the document unchanged.
# Swagger UI and Redoc come from drf-spectacular-sidecar's static files, not a CDN.
SPECTACULAR_SETTINGS = {
    "TITLE": "Kody API",
    "VERSION": "1.0.0",
    "OAS_VERSION": "3.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "kody.api.schema_hooks.mark_required_bodies",
    ],
}

# --- Mail --------------------------------------------------------------------------------
# Account mail (verification, reset, email change). Development prints it to the console;
# production sets KODY_EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend and the host.
EMAIL_BACKEND = envstr("KODY_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = envstr("KODY_EMAIL_HOST", "localhost")
EMAIL_PORT = envint("KODY_EMAIL_PORT", 25)
EMAIL_HOST_USER = envstr("KODY_EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = envstr("KODY_EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = envbool("KODY_EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = envstr("KODY_DEFAULT_FROM_EMAIL", "Kody <no-reply@localhost>")

# --- Security ----------------------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_SSL_REDIRECT = envbool("KODY_SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = envint("KODY_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "filters": {"server_errors_only": {"()": "kody.logfilters.ServerErrorsOnly"}},
    "root": {"handlers": ["console"], "level": envstr("KODY_LOG_LEVEL", "INFO")},
    "loggers": {
        # One line per event: Django's own DEBUG console handler would repeat what the root
        # handler prints, and a 4xx is already the access log's line.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.request": {"filters": ["server_errors_only"], "propagate": True},
    },
}

# --- mail (apps.mailbox, apps.system_email) -------------------------------------------------
# Every person's inbox is {username}@KODY_MAIL_DOMAIN; the reserved system locals go to the
# operator inbox. POST /inbound/email requires KODY_INBOUND_EMAIL_SECRET (refused when unset).
KODY_MAIL_DOMAIN = envstr("KODY_MAIL_DOMAIN", "mail.localhost").lower()
KODY_INBOUND_EMAIL_SECRET = envstr("KODY_INBOUND_EMAIL_SECRET")
KODY_EMAIL_PROVIDER = envstr("KODY_EMAIL_PROVIDER", "django")
# Who gets operator alerts (auth-denial and delivery bursts, a missing DR export): these
# addresses, or every active staff user's address when the list is empty.
KODY_OPERATOR_ALERT_EMAILS = envlist("KODY_OPERATOR_ALERT_EMAILS", [])

# --- Database connections: one bounded pool per process and database -----------------
# Each process keeps at most KODY_DB_POOL_SIZE connections per database (app and audit; Django's
# psycopg pool); a request that waits KODY_DB_POOL_TIMEOUT seconds for one gets a coded 503 with
# Retry-After (kody.outage), never a 500. Size it so that every process's connections fit the
# server's max_connections (README, docs/security.md). Shard workers never pool: their
# connection count is fixed by their threads, and recycling and fencing need a real close.
# 0 switches pooling off (then KODY_DB_CONN_MAX_AGE applies to DATABASE_URL connections).
KODY_DB_POOL_SIZE = envint("KODY_DB_POOL_SIZE", 20)
KODY_DB_POOL_TIMEOUT = envfloat("KODY_DB_POOL_TIMEOUT", 5.0)
if KODY_DB_POOL_SIZE > 0:
    for _db in DATABASES.values():
        _db["CONN_MAX_AGE"] = 0  # the pool keeps connections; Django returns them per request
        _db["CONN_HEALTH_CHECKS"] = True  # a connection the server dropped is never handed out
        _db["OPTIONS"] = {
            **_db.get("OPTIONS", {}),
            "pool": {
                "min_size": 0,  # idle processes (beat, workers between tasks) hold nothing
                "max_size": KODY_DB_POOL_SIZE,
                "timeout": KODY_DB_POOL_TIMEOUT,
                # After an outage a failed reconnect gives up this soon, so the next request
                # starts a fresh attempt instead of waiting out psycopg's five-minute backoff.
                "reconnect_timeout": max(KODY_DB_POOL_TIMEOUT, 1.0),
                "max_idle": 60.0,
            },
        }

# --- OAuth: the /mcp authorization server and social sign-in (config/oauth.py) -----------
from config.oauth import (  # noqa: E402, F401  (settings are read by name)
    KODY_MCP_INSTRUCTIONS,
    KODY_OAUTH_ACCESS_TOKEN_SECONDS,
    KODY_OAUTH_REFRESH_REUSE_SECONDS,
    KODY_OAUTH_REGISTRATIONS_PER_HOUR,
    KODY_SOCIAL_PROVIDERS,
    KODY_SOCIAL_START_PER_IP,
    KODY_SOCIAL_START_PER_SESSION,
    OAUTH2_PROVIDER,
    OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL,
    OAUTH2_PROVIDER_APPLICATION_MODEL,
    OAUTH2_PROVIDER_DEVICE_GRANT_MODEL,
    OAUTH2_PROVIDER_GRANT_MODEL,
    OAUTH2_PROVIDER_ID_TOKEN_MODEL,
    OAUTH2_PROVIDER_REFRESH_TOKEN_MODEL,
)

# Failed remote-connector hellos per connector and per client address, in 15 minutes.
KODY_CONNECTOR_HELLO_FAILURES_PER_CONNECTOR = envint(
    "KODY_CONNECTOR_HELLO_FAILURES_PER_CONNECTOR", 10
)
KODY_CONNECTOR_HELLO_FAILURES_PER_IP = envint("KODY_CONNECTOR_HELLO_FAILURES_PER_IP", 30)

# Hashed token storage plus a reuse window is safe here: the validator mints a sibling pair
# instead of replaying the stored one (apps/accounts/oauth/validator.py).
# http stays an allowed scheme for native clients' loopback callbacks (RFC 8252), which the
# toolkit cannot tell apart; the validator refuses every other http redirect URI
# (apps/accounts/oauth/validator.py: secure_or_loopback), so the W008 warning is answered there.
SILENCED_SYSTEM_CHECKS = [
    *globals().get("SILENCED_SYSTEM_CHECKS", []),
    "oauth2_provider.E001",
    "oauth2_provider.W008",
]
# kody.fetch: outbound fetches of user-supplied URLs. Test-only escape hatches, never set in
# production: allow loopback targets and trust an extra CA file (a test's own https server).
KODY_FETCH_ALLOW_LOOPBACK = envbool("KODY_FETCH_ALLOW_LOOPBACK", False)
KODY_FETCH_CA_FILE = envstr("KODY_FETCH_CA_FILE")

# Agent code: booted Deno processes kept per memory cap, and an override of the
# plans' wall limit per call (unset: the plan's). Tests allow named hosts to reach a local
# server through KODY_EXECUTE_FETCH_ALLOW; never set in production.
KODY_SANDBOX_WARM = envint("KODY_SANDBOX_WARM", 2)
KODY_EXECUTE_WALL_SECONDS = envfloat("KODY_EXECUTE_WALL_SECONDS", 0.0) or None

# Live (unrevoked) package invocation tokens one person may hold, per plan (the seeds give no
# number). Creating one more answers 429 ``invocation_token_limit``; revoking frees a place.
KODY_INVOCATION_TOKEN_LIMITS = {"free": 20, "standard": 100, "pro": 200, "max": 1000}

# Per-schema prepared statements for the actor runtime's one-statement path
# (kody.actors.prepared): at most this many per database session, least recently used
# deallocated first. 0: off (for a transaction-mode pooler between Kody and Postgres).
KODY_ACTOR_PREPARED_MAX = envint("KODY_ACTOR_PREPARED_MAX", 128)

# --- two-factor (django-otp) -------------------------------------------------------
OTP_TOTP_ISSUER = "Kody"
