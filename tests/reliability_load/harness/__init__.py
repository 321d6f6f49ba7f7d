"""Load and faults-during-load harness: ``make load`` and ``make faults`` (docs/reliability.md).

Everything runs on services of its own, so killing and restarting them disturbs nobody else
(the shared PostgreSQL on 5432 and Redis on 6379 are never touched):

1. a PostgreSQL 15 cluster made with ``initdb`` in a temporary directory (run as the
   ``postgres`` user), on 127.0.0.1:``LOAD_PG_PORT`` (5440), and a Redis on ``LOAD_REDIS_PORT``
   (6390) that keeps nothing on disk;
2. ``migrate``, ``collectstatic``, ``load_demo`` (the Philly demo organization: 32 x 8 GPUs
   played by the simulated executor), then ``world.py`` (load accounts, sessions, a ``lab``
   cluster of two real node agents);
3. gunicorn (``DEBUG=false``, gthread workers), a Celery worker and a Celery beat (the
   scheduling loop: cycles every 5 s, accounting every 15 s, simulated executor and demo
   replay every 2 s), and two ``python -m scheduler.agent`` processes for the lab nodes;
4. locust, headless, ``LOAD_USERS`` (30) clients for ``DURATION`` seconds (120 for ``load``,
   240 for ``faults``): queue status, submit and the owed-vs-delivered page, with
   ``LOAD_THINK`` ("0.5,2") seconds of think time (``0,0`` saturates the server);
5. with ``--faults``, during the load, one at a time: kill -9 the Celery worker (a supervisor
   loop here restarts it one second later, as systemd's ``Restart=always`` would), restart
   Redis, restart PostgreSQL, kill -9 a node agent and bring it back 30 s later;
6. afterwards ``verify.py``: every acknowledged submit in the database exactly once, no
   workload started twice, ledger == Σ run GPUs x run time per cluster.

It prints a summary table (markdown: per endpoint requests, throughput, p50/p95/p99, errors
in steady state and in fault windows; CPU seconds per component; the checks; per fault the
seconds to each sign of recovery) and writes it with the raw figures to
``var/reliability/<mode>-<UTC time>/``. A benchmark: nothing is asserted on time; the exit
status is 1 only when a correctness check fails (lost/duplicated submit, a workload started
twice, an unbalanced ledger, or an error outside the fault windows).

    .venv/bin/python -m tests.reliability_load.harness [--faults] [--duration S] [--users N]

The pieces: ``config`` (ports, the processes' environment), ``services`` (our PostgreSQL and
Redis), ``processes`` (the supervised processes), ``probes`` (signs of health read from the
database), ``faults``, ``cpu`` (CPU seconds per component), ``report`` (figures, summary,
pass or fail) and ``run`` (the ``Harness`` that drives them).
"""

from __future__ import annotations

from tests.reliability_load.harness.report import in_window
from tests.reliability_load.harness.run import Harness, parse_options

__all__ = ["Harness", "in_window", "main"]


def main() -> int:
    """Run the harness with the command line's options; the exit status."""
    return Harness(parse_options(__doc__.split("\n\n")[0])).run()
