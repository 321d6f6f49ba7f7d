"""The README's "Other commands" work as printed in a fresh checkout once ``make run`` has
written the checkout's own settings (``var/local.env``): nobody sets DEBUG or SECRET_KEY by
hand, and a server, which has no such file, still refuses the development key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Settings a developer's shell or the test run may carry: a fresh terminal has none of them.
UNSET = ("DEBUG", "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "LOCAL_ENV_FILE")


def readme_commands() -> list[str]:
    """Every ``manage.py`` command the README's "Other commands" section names."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Other commands", 1)[1].split("\n## ", 1)[0]
    names = set(re.findall(r"manage\.py (\w+)", section))
    names |= set(re.findall(r"`(\w+_import_usage) ", section))  # named in passing
    return sorted(names)


def fresh_terminal() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in UNSET and not k.startswith("PYTEST")}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The files a clone holds (tracked, or new and not ignored), then ``make var/local.env``,
    the step of ``make run`` that writes the checkout's settings."""
    dest = tmp_path_factory.mktemp("checkout")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    subprocess.run(
        ["make", "--no-print-directory", "var/local.env", f"PYTHON={sys.executable}"],
        cwd=dest,
        env=fresh_terminal(),
        check=True,
    )
    return dest


def test_the_readme_names_the_commands_this_test_runs():
    assert {"simulate", "load_demo", "run_agent", "rebuild_usage", "slurm_sync"} <= set(
        readme_commands()
    )


@pytest.mark.parametrize("command", readme_commands())
def test_each_readme_command_works_as_printed_after_make_run(checkout, command):
    done = subprocess.run(
        [sys.executable, "manage.py", command, "--help"],
        cwd=checkout,
        env=fresh_terminal(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"manage.py {command}" in done.stdout


def test_the_local_settings_are_private_and_not_the_development_key(checkout):
    local = checkout / "var" / "local.env"
    assert local.stat().st_mode & 0o077 == 0
    values = dict(line.split("=", 1) for line in local.read_text().splitlines() if "=" in line)
    assert values["DEBUG"] == "true"
    assert len(values["SECRET_KEY"]) >= 50
    assert values["SECRET_KEY"] != "dev-only-insecure-secret-key-do-not-use-in-production"


def test_without_the_local_settings_the_development_key_is_still_refused(checkout):
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=checkout,
        env={**fresh_terminal(), "LOCAL_ENV_FILE": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "SECRET_KEY is the development default while DEBUG=false" in done.stderr
