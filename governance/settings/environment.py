"""How settings are read: the environment, parsed strictly, over a developer's ``var/local.env``."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

BASE_DIR = Path(__file__).resolve().parent.parent.parent

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
