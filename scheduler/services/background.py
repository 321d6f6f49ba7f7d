"""Long jobs asked for in the browser, handed to a worker — or, with no broker, to a thread.

``make run`` runs tasks in-process (``CELERY_TASK_ALWAYS_EAGER``): a simulation or a what-if
run eagerly would hold the request that asked for it for the whole replay. A thread of its
own lets the request return at once and the job's page show its progress.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from django import db
from django.conf import settings

logger = logging.getLogger(__name__)


def run_in_background(task, runner: Callable[..., object], job_id: int, name: str) -> None:
    """``task.delay(job_id)`` with a broker; else ``runner(job_id=job_id)`` in a thread of its
    own, on its own database connection. ``name`` names the thread and the log lines."""
    if not settings.CELERY_TASK_ALWAYS_EAGER:
        task.delay(job_id)
        return

    def run() -> None:
        try:
            runner(job_id=job_id)
        except Exception:  # the job records its own failures; anything else is logged here
            logger.exception("%s %s failed in its thread", name, job_id)
        finally:
            db.connections.close_all()

    threading.Thread(target=run, daemon=True, name=f"{name}-{job_id}").start()
