"""Django settings for GPU-hour budget governance.

Every value comes from the environment, parsed strictly, with defaults that are safe for a
developer's machine (SQLite under ``var/``, Celery tasks run in-process, e-mail to the console).
A production deployment sets ``DEBUG=false``, ``SECRET_KEY``, ``ALLOWED_HOSTS``,
``DATABASE_URL`` and ``CELERY_BROKER_URL``; with ``DEBUG=false`` the app refuses to start on
the development secret key.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the environment variable ``name`` stripped, or ``default`` when unset."""
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool) -> bool:
    """Parse a boolean environment variable; anything but a known spelling is an error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true or false)")


def env_int(name: str, default: int) -> int:
    """Parse an integer environment variable, naming the variable when it is malformed."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    """Parse a comma-separated environment variable into a list of non-empty items."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# A developer's checkout: `make run` writes var/local.env (DEBUG=true and a generated
# SECRET_KEY) so that every manage.py command works in it as the README prints it. The
# environment wins over the file; a server has no such file (LOCAL_ENV_FILE="" skips it).
LOCAL_ENV_FILE = os.environ.get("LOCAL_ENV_FILE", str(BASE_DIR / "var" / "local.env"))
if LOCAL_ENV_FILE:
    load_dotenv(LOCAL_ENV_FILE, override=False)

DEV_SECRET_KEY = "dev-only-insecure-secret-key-do-not-use-in-production"

DEBUG = env_bool("DEBUG", False)
# An empty SECRET_KEY counts as unset: refused below, not a server that fails on first use.
SECRET_KEY = env_str("SECRET_KEY") or DEV_SECRET_KEY
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY is the development default while DEBUG=false. "
        "Set SECRET_KEY to a long random value (or DEBUG=true on a developer's machine)."
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("SITE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.sites",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_filters",
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "csp",
    "governance",
    "scheduler",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "governance.middleware.RequestSizeLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "governance.middleware.NulCharacterMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # Last, so it sees the views' exceptions first: a database that is away is a 503.
    "governance.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "governance.urls"
WSGI_APPLICATION = "governance.wsgi.application"
SITE_ID = 1

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
                "governance.context_processors.navigation",
                "csp.context_processors.nonce",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------
# SQLite under var/ for the quick start; PostgreSQL (the database of record) via DATABASE_URL.
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'db.sqlite3'}")
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 0),
        # A kept connection is checked before a request reuses it, so after a database
        # restart each server thread reconnects instead of failing one request with a 500
        # (measured in docs/reliability.md, "Faults during load").
        conn_health_checks=env_bool("DB_CONN_HEALTH_CHECKS", True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The quick start runs a web server and in-process tasks on one file. Take the write lock
    # when a transaction begins (a deferred one that later upgrades fails at once with
    # "database is locked" whatever the timeout), wait for it, and let readers run beside a
    # writer (WAL).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Authentication (django-allauth) ----------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = env_str("ACCOUNT_EMAIL_VERIFICATION", "none")
ACCOUNT_ALLOW_REGISTRATION = env_bool("ACCOUNT_ALLOW_REGISTRATION", False)
ACCOUNT_ADAPTER = "governance.auth_adapter.AccountAdapter"
ACCOUNT_LOGOUT_ON_GET = False
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
ACCOUNT_LOGOUT_REDIRECT_URL = "account_login"

# Optional OpenID Connect sign-in, configured entirely from the environment.
SOCIALACCOUNT_PROVIDERS: dict = {}
if env_str("OIDC_SERVER_URL"):
    SOCIALACCOUNT_PROVIDERS["openid_connect"] = {
        "APPS": [
            {
                "provider_id": env_str("OIDC_PROVIDER_ID", "sso"),
                "name": env_str("OIDC_PROVIDER_NAME", "Single sign-on"),
                "client_id": env_str("OIDC_CLIENT_ID"),
                "secret": env_str("OIDC_CLIENT_SECRET"),
                "settings": {"server_url": env_str("OIDC_SERVER_URL")},
            }
        ]
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- E-mail ---------------------------------------------------------------------------
# A development machine writes each e-mail to a file under var/mail/ (the terminal of make run
# stays readable, and the mails can be opened); a server talks SMTP to EMAIL_HOST.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.filebased.EmailBackend"
    if DEBUG
    else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH", str(BASE_DIR / "var" / "mail"))
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 30)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "gpu-governance@localhost")

# --- Internationalization ---------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True
USE_THOUSAND_SEPARATOR = True

# --- Static files -----------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "var" / "staticfiles"
# The browser's Plotly is static/vendor/plotly/plotly-governance.min.js: the plotly.js version
# the plotly package's figures are written for, with only the traces we draw (make
# plotly-bundle; a test checks the versions agree). Served from here, never from a CDN.
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_MAX_AGE = env_int("WHITENOISE_MAX_AGE", 3600)
MEDIA_ROOT = BASE_DIR / "var" / "media"

# --- Request limits ---------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = env_int("FILE_UPLOAD_MAX_MEMORY_SIZE", 2 * 1024 * 1024)
# Any request body, file uploads included, refused from its Content-Length before it is read
# (governance/middleware.py): the largest legitimate one is a 2 MB simulator trace plus form.
MAX_REQUEST_BYTES = env_int("MAX_REQUEST_BYTES", 3 * 1024 * 1024)

# --- Security (effective whenever DEBUG=false) -----------------------------------------
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"

# --- Content Security Policy (django-csp 4; tests/governance/test_web_security.py) ------------
# Everything comes from our own origin: no CDN (Plotly and Swagger UI are served from static).
# Scripts: our files only, plus a per-response nonce for any inline <script> a template needs
# (``request.csp_nonce``); the pages have none today, and the json_script data blocks are not
# executed, so CSP does not apply to them.
# No 'unsafe-eval': the figures are SVG traces (bar, scatter, sunburst), and Plotly only
# compiles code at run time for its WebGL traces (regl), which we do not use; the browser test
# loads every page with a plot and fails on any CSP violation, so a figure that needed eval
# would be caught there.
# style-src needs 'unsafe-inline': Plotly injects a <style> element with its rules and writes
# style attributes into the SVG it builds, and the templates size meters with style attributes.
# Inline styles cannot run code; scripts stay strict. (A style nonce would not help: Plotly's
# injected <style> carries none, and a nonce in style-src disables 'unsafe-inline'.)
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],  # Swagger UI and Plotly's mode bar draw icons as data: URIs
        "font-src": [SELF],
        "connect-src": [SELF],  # htmx/poll.js fetch our own pages
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# --- Sign-in throttling (django-allauth) ------------------------------------------------------
# After 5 failed sign-ins for one account within 5 minutes (or 10 a minute from one address)
# allauth refuses further attempts, the right password included, until the window passes.
# The counts live in the cache: set CACHE_URL (redis://...) when several processes serve the
# site, or each process counts on its own.
ACCOUNT_RATE_LIMITS = {
    "login_failed": env_str("ACCOUNT_LOGIN_FAILED_RATE_LIMIT", "10/m/ip,5/5m/key"),
}
CACHE_URL = env_str("CACHE_URL")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "governance.api.authentication.LockedTokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # Parsers that enforce DATA_UPLOAD_MAX_MEMORY_SIZE (DRF's own read the body unbounded).
    "DEFAULT_PARSER_CLASSES": [
        "governance.api.parsers.LimitedJSONParser",
        "governance.api.parsers.LimitedFormParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "governance.api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "governance.api_errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU-hour budget governance API",
    "DESCRIPTION": "Budget tree, allocations, approvals, workloads and usage.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Document the refusals (400/401/403/404/413) each operation can give (governance/api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "governance.api.schema.add_error_responses",
    ],
    # Several models have a "state"; name each enum after its model so the schema is unambiguous.
    "ENUM_NAME_OVERRIDES": {
        "WorkloadStateEnum": "scheduler.choices.WorkloadState",
        "RunEndReasonEnum": "scheduler.choices.RunEndReason",
        "OrderKindEnum": "scheduler.choices.OrderKind",
        "TreeLevelEnum": "governance.selectors.reports.LEVELS",
        "EmailChoiceEnum": "governance.choices.EmailChoice",
        "NotificationKindEnum": "governance.choices.NotificationKind",
    },
}

# --- Celery -----------------------------------------------------------------------------
# Without a broker, tasks run in-process (eager) so the quick start needs no services.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240)
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "governance")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
# The live scheduling loop (docs/live-loop.md).
SCHEDULER_CYCLE_SECONDS = env_int("SCHEDULER_CYCLE_SECONDS", 5)
SCHEDULER_ACCOUNT_SECONDS = env_int("SCHEDULER_ACCOUNT_SECONDS", 60)
SCHEDULER_HEARTBEAT_CHECK_SECONDS = env_int("SCHEDULER_HEARTBEAT_CHECK_SECONDS", 15)
SCHEDULER_AGENT_TIMEOUT_SECONDS = env_int("SCHEDULER_AGENT_TIMEOUT_SECONDS", 60)
SCHEDULER_STOP_GRACE_SECONDS = env_int("SCHEDULER_STOP_GRACE_SECONDS", 30)
SCHEDULER_WINDOW_SECONDS = env_int("SCHEDULER_WINDOW_SECONDS", 7 * 86400)
SCHEDULER_POLICY = env_str("SCHEDULER_POLICY", "fairshare")
# A worker keeps the engine between a cluster's cycles and reads only what changed
# (scheduler/services/cycle_kept.py); it rebuilds it from the database at least this often.
SCHEDULER_KEEP_ENGINE = env_bool("SCHEDULER_KEEP_ENGINE", True)
SCHEDULER_REBUILD_SECONDS = env_int("SCHEDULER_REBUILD_SECONDS", 600)
# Enqueued cycles are coalesced to one queued per cluster by a Redis flag; its lifetime
# bounds how long a lost task's flag can hold back enqueues (scheduler/services/cycle_queue.py).
SCHEDULER_CYCLE_QUEUED_TTL_SECONDS = env_int(
    "SCHEDULER_CYCLE_QUEUED_TTL_SECONDS", 4 * SCHEDULER_CYCLE_SECONDS
)
# Fault injection for the failure tests only (a cycle sleeps this long holding its lock).
SCHEDULER_CYCLE_PAUSE_SECONDS = env_int("SCHEDULER_CYCLE_PAUSE_SECONDS", 0)
CELERY_BEAT_SCHEDULE = {
    "apply-due-allocations": {
        "task": "governance.tasks.allocations_apply_due",
        "schedule": env_int("ALLOCATIONS_APPLY_EVERY_SECONDS", 60),
    },
    "scheduler-cycle": {
        "task": "scheduler.tasks.scheduler_cycle_all",
        "schedule": SCHEDULER_CYCLE_SECONDS,
        # A cycle older than two periods is stale: the next one supersedes it.
        "options": {"expires": 2 * SCHEDULER_CYCLE_SECONDS},
    },
    "usage-account": {
        "task": "scheduler.tasks.usage_account",
        "schedule": SCHEDULER_ACCOUNT_SECONDS,
    },
    "nodes-expire-heartbeats": {
        "task": "scheduler.tasks.nodes_expire_heartbeats",
        "schedule": SCHEDULER_HEARTBEAT_CHECK_SECONDS,
    },
    # Runs whose GPUs stay allocated but nearly unused are marked idle, owners told once.
    "idle-rule": {
        "task": "scheduler.tasks.idle_rule_apply_all",
        "schedule": 60,
        "options": {"expires": 120},
    },
}
# The simulated executor and the demo replay (docs/agents.md).
# A developer's machine (`make run`) runs the demo's simulated nodes; a server only when asked.
SIMULATED_EXECUTOR_ENABLED = env_bool("SIMULATED_EXECUTOR_ENABLED", DEBUG)
SIMULATED_EXECUTOR_CLUSTERS = env_list("SIMULATED_EXECUTOR_CLUSTERS", ["philly/h100"])
SIMULATED_EXECUTOR_SPEEDUP = env_int("SIMULATED_EXECUTOR_SPEEDUP", 1)
SIMULATED_EXECUTOR_SECONDS = env_int("SIMULATED_EXECUTOR_SECONDS", 2)
SIMULATED_EXECUTOR_DEFAULT_DURATION_SECONDS = env_int(
    "SIMULATED_EXECUTOR_DEFAULT_DURATION_SECONDS", 3600
)
DEMO_REPLAY_ENABLED = env_bool("DEMO_REPLAY_ENABLED", DEBUG)
DEMO_REPLAY_MAX_PENDING = env_int("DEMO_REPLAY_MAX_PENDING", 300)
# The finance usage report for the previous month, mailed on the 1st (docs/reports.md).
from celery.schedules import crontab  # noqa: E402

CELERY_BEAT_SCHEDULE["reports-send-monthly"] = {
    "task": "governance.tasks.reports_send_monthly",
    "schedule": crontab(minute=0, hour=6, day_of_month=1),  # 06:00 on the 1st
}
# Roll closed days into the daily usage cache (reports and dashboards read whole days from it).
# Notification e-mails whose worker stopped mid-send are marked failed (never sent twice), and
# queued ones whose task was lost (the broker was away) are sent (docs/notifications.md).
CELERY_BEAT_SCHEDULE["notification-emails-sweep"] = {
    "task": "governance.tasks.notification_emails_sweep",
    "schedule": 300,
}
# A team that got less than this share of the GPU-hours it was owed over the last 24 hours
# has its PIs and program managers told (at most once a day; docs/notifications.md).
DELIVERY_ALERT_RATIO = float(env_str("DELIVERY_ALERT_RATIO", "0.9"))
# Shares of a month's entitlement whose passing (by charged GPU-hours) a team is told about.
MONTH_USAGE_THRESHOLDS = [float(x) for x in env_list("MONTH_USAGE_THRESHOLDS", ["0.8", "1.0"])]
CELERY_BEAT_SCHEDULE["delivery-alerts"] = {
    "task": "scheduler.tasks.delivery_alerts_check",
    "schedule": crontab(minute=15),  # every hour
}
CELERY_BEAT_SCHEDULE["notification-digests-send"] = {
    "task": "governance.tasks.notification_digests_send",
    "schedule": crontab(minute=10),  # every hour; each person gets at most one a day
}
CELERY_BEAT_SCHEDULE["usage-days-refresh"] = {
    "task": "governance.tasks.usage_days_refresh",
    "schedule": crontab(minute=5),  # five past every hour
}
CELERY_BEAT_SCHEDULE["simulated-executor"] = {
    "task": "scheduler.executors.tasks.simulated_executor_tick",
    "schedule": SIMULATED_EXECUTOR_SECONDS,
    "options": {"expires": 4 * SIMULATED_EXECUTOR_SECONDS},
}
# Slurm sites (docs/slurm.md): every enabled SlurmConnection is synced and its usage imported;
# with no connection configured both entries do nothing.
CELERY_BEAT_SCHEDULE["slurm-sync"] = {
    "task": "scheduler.tasks.slurm_sync_all",
    "schedule": env_int("SLURM_SYNC_SECONDS", 600),
}
CELERY_BEAT_SCHEDULE["slurm-import-usage"] = {
    "task": "scheduler.tasks.slurm_import_usage_all",
    "schedule": env_int("SLURM_IMPORT_SECONDS", 300),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"client_errors": {"()": "governance.log_filters.ClientErrorsWithoutTraceback"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["client_errors"]}},
    # Django's own console handler (DEBUG only) would print a refused request's traceback
    # beside ours: its records go up to the root's filtered console alone (no ADMINS are
    # set, so Django's mail handler had nobody to write to).
    "loggers": {"django": {"handlers": [], "level": env_str("LOG_LEVEL", "INFO")}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
