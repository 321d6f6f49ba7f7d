"""Outgoing e-mail: files under ``var/mail/`` on a developer's machine, SMTP on a server."""

from __future__ import annotations

from governance.settings.core import DEBUG
from governance.settings.environment import BASE_DIR, env_bool, env_int, env_str

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
