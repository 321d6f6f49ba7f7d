"""``manage.py serve``: the whole product in one process tree for the quick start.

Serves the web application and keeps the periodic loop (Celery beat's schedule) running:
- without a broker (``CELERY_BROKER_URL`` unset) a background thread runs each scheduled task
  in-process at its interval, so nothing else needs to be started;
- with a broker it starts a real Celery worker with an embedded beat as a child process.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from datetime import timedelta

from celery import current_app, schedules
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

logger = logging.getLogger(__name__)


def _as_schedule(value) -> schedules.BaseSchedule:
    """The beat schedule object for a settings entry (seconds, timedelta or a schedule)."""
    if isinstance(value, (int, float)):
        return schedules.schedule(timedelta(seconds=value))
    if isinstance(value, timedelta):
        return schedules.schedule(value)
    return value


STATUS_EVERY_SECONDS = 60


class LastError:
    """The latest failure of a scheduled task in this process, for the status line."""

    def __init__(self) -> None:
        self.text = ""

    def record(self, task_name: str, exc: BaseException) -> None:
        self.text = f"{task_name}: {type(exc).__name__}: {exc}"[:200]


LAST_ERROR = LastError()


def run_status_lines(stop: threading.Event, write, every: float = STATUS_EVERY_SECONDS) -> None:
    """Write one line each ``every`` seconds: cycles, running, pending, nodes, last error.

    ``make run`` prints this instead of a line per task (they ran every second or two, so the
    demo accounts and any real error scrolled away at once); warnings and errors are still
    logged as they happen.
    """
    from scheduler.selectors.status import loop_status

    while not stop.wait(every):
        try:
            write(loop_status().line(LAST_ERROR.text))
        except Exception:  # the status line must never take the server down
            logger.exception("status line failed")


def schedule_next_last_run(schedule: schedules.BaseSchedule, last_run, now):
    """The run time to record for an entry that fell due at ``now``.

    An interval entry keeps its cadence: its run counts as made when it fell due, so the
    loop's polling and the entries run before it do not push every later run back (a 5 s
    cycle polled each 0.5 s would otherwise run about 11 times a minute, not 12). An entry
    more than one interval late (a long task, a suspended laptop) starts afresh from ``now``
    rather than running again at once to catch up. A crontab entry records ``now``, as beat.
    """
    if not isinstance(schedule, schedules.schedule):
        return now
    due_at = last_run + schedule.run_every
    return due_at if now - due_at < schedule.run_every else now


def run_schedule_in_process(stop: threading.Event) -> None:
    """Run every entry of ``CELERY_BEAT_SCHEDULE`` in this process when it falls due.

    Interval entries run at once and then every interval; crontab entries (the monthly
    report) wait for their next due time, exactly as Celery beat would run them. A failure is
    logged and kept for the status line.
    """
    entries = []
    start = current_app.now()
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        schedule = _as_schedule(entry["schedule"])
        # An interval entry is due at once; a crontab entry waits for its next due time.
        is_crontab = isinstance(schedule, schedules.crontab)
        last_run = start if is_crontab else start - schedule.run_every
        entries.append([name, entry["task"], schedule, last_run])
    while not stop.is_set():
        for item in entries:
            _name, task_name, schedule, last_run = item
            due, _next = schedule.is_due(last_run)
            if not due:
                continue
            item[3] = schedule_next_last_run(schedule, last_run, current_app.now())
            try:
                result = current_app.tasks[task_name].apply()
                if result.failed():
                    LAST_ERROR.record(task_name, result.result)
            except Exception as exc:  # a failing task must not stop the loop; it is logged
                LAST_ERROR.record(task_name, exc)
                logger.exception("scheduled task %s failed", task_name)
        stop.wait(0.5)


class Command(BaseCommand):
    """Serve the product and run the scheduling loop beside it."""

    help = "Serve the web application with the periodic loop running (quick start)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args, host: str, port: int, **options):
        from scheduler.executors.simulated import simulated_nodes_wake

        stop = threading.Event()
        worker = None
        # Before the loop's first heartbeat check: the demo's in-server agents are alive.
        simulated_nodes_wake()
        # One status line a minute instead of a line per task (warnings and errors stay).
        logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
        threading.Thread(
            target=run_status_lines,
            args=(stop, self.stdout.write),
            daemon=True,
            name="status",
        ).start()
        if settings.CELERY_TASK_ALWAYS_EAGER:
            # Task discovery is lazy; load every app's tasks module so the in-process loop
            # finds the scheduled tasks by name.
            current_app.loader.import_default_modules()
            self.stdout.write("Periodic loop: in-process (no CELERY_BROKER_URL set).")
            threading.Thread(
                target=run_schedule_in_process, args=(stop,), daemon=True, name="loop"
            ).start()
        else:
            self.stdout.write(
                f"Periodic loop: Celery worker with beat on {settings.CELERY_BROKER_URL}."
            )
            worker = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "governance", "worker", "--beat",
                 "--loglevel=WARNING", "-Q", settings.CELERY_TASK_DEFAULT_QUEUE,
                 "--schedule", str(settings.BASE_DIR / "var" / "celerybeat-schedule")]
            )  # fmt: skip
        try:
            call_command("runserver", f"{host}:{port}", use_reloader=False)
        finally:
            stop.set()
            if worker is not None:
                worker.terminate()
                worker.wait(timeout=20)
