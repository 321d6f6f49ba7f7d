"""The site itself: secret key, hosts, apps, middleware, templates, database, static files,
locale, request limits and logging."""

from __future__ import annotations

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from governance.settings.environment import BASE_DIR, env_bool, env_int, env_list, env_str

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
