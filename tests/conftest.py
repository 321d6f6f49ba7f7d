"""Suite-wide fixtures: real services, a real Celery worker, personas."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.services import ensure_running, required_services
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Hash test users' passwords cheaply: the suite creates personas in nearly every test."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# Logs of the daemons a test drove (Slurm, Celery workers, agents, PostgreSQL), shown with
# its failure: a test that fails against a real process says what that process did.
DAEMON_LOGS = pytest.StashKey[dict[str, Callable[[], str]]]()
LOG_TAIL_CHARS = 6000


def attach_daemon_log(node: pytest.Item, name: str, read: Callable[[], str]) -> None:
    """Show ``read()`` (its last characters) under ``name`` if the test ``node`` fails.

    ``read`` is called only on failure, so it may read a log file that grows during the test.
    """
    node.stash.setdefault(DAEMON_LOGS, {})[name] = read


def tail_of(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    """The last ``chars`` characters of a log file, or a line saying it is not there."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as error:
        return f"({path}: {error.strerror})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Add the attached daemon logs to the report of a failed setup, call or teardown."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    for name, read in item.stash.get(DAEMON_LOGS, {}).items():
        try:
            text = read()
        except Exception as error:  # a broken log reader must not hide the failure
            text = f"(could not read: {error!r})"
        report.sections.append((f"daemon log: {name}", text[-LOG_TAIL_CHARS:]))


def pytest_sessionstart(session: pytest.Session) -> None:
    """Fail the whole run, naming the service, when PostgreSQL or Redis cannot be had."""
    from django.conf import settings

    db_url = os.environ.get("DATABASE_URL", "")
    broker_url = settings.CELERY_BROKER_URL
    if os.environ.get("REQUIRE_SERVICES", "") == "1":
        if not db_url.startswith("postgres"):
            pytest.exit("make test needs DATABASE_URL pointing at PostgreSQL", returncode=3)
        if not broker_url.startswith("redis"):
            pytest.exit("make test needs CELERY_BROKER_URL pointing at Redis", returncode=3)
    for service in required_services(db_url, broker_url):
        error = ensure_running(service)
        if error:
            pytest.exit(error, returncode=3)


@pytest.fixture
def celery_worker(_celery_worker_process):
    """A real Celery worker process on the real Redis broker, using the test database.

    The worker runs in its own process, so tests that use it must commit their data
    (``@pytest.mark.django_db(transaction=True)``). Each test session gets its own queue so
    two sessions on one machine never take each other's tasks. The process lives for the
    whole session; tasks go to its queue only during a test that asks for it, so a later
    test without it never has its work (a scheduling cycle after a submit) done behind its
    back — which test ran first must not change what another one sees.
    """
    from governance.celery import app

    proc, queue = _celery_worker_process
    original_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    yield proc
    app.conf.task_default_queue = original_queue


@pytest.fixture(scope="session")
def _celery_worker_process(django_db_setup, django_db_blocker):
    """The session's Celery worker process and its queue (``celery_worker`` sends to it)."""
    from django.conf import settings
    from django.db import connection

    if settings.CELERY_TASK_ALWAYS_EAGER:
        pytest.fail("the Celery worker fixture needs CELERY_BROKER_URL (real Redis)")
    queue = f"test-{uuid.uuid4().hex[:12]}"
    test_db_name = connection.settings_dict["NAME"]
    base_url = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    env = {
        **os.environ,
        "DATABASE_URL": f"{base_url}/{test_db_name}",
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        "DEBUG": "true",
    }
    log_path = ROOT / "var" / f"celery-worker-{queue}.log"
    log_path.parent.mkdir(exist_ok=True)
    log = open(log_path, "w")  # noqa: SIM115 - closed in teardown
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "governance", "worker",
            "--pool=solo", "--concurrency=1", "--loglevel=INFO", "-Q", queue,
            "--hostname", f"{queue}@%h", "--without-gossip", "--without-mingle",
        ],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    from governance.celery import app

    # The ping waits up to a second for a reply: no pause between two pings.
    ready = wait_until(
        lambda: app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=1),
        timeout=60,
        interval=0,
        stop_if=lambda: proc.poll() is not None,
    )
    if not ready:
        proc.kill()
        pytest.fail(f"Celery worker did not start; see {log_path}:\n{log_path.read_text()[-2000:]}")
    yield proc, queue
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.2):
    """Poll ``predicate`` until it returns a truthy value (work done by another process)."""
    return wait_until(predicate, timeout, interval)


@pytest.fixture(autouse=True)
def _fresh_process_cache():
    """Each test starts with an empty in-process cache: counters kept there (failed API
    sign-ins per address, cached estimates) must not carry from one test into the next."""
    from django.conf import settings
    from django.core.cache import caches

    if settings.CACHES["default"]["BACKEND"].endswith("LocMemCache"):
        caches["default"].clear()
    yield
