"""How the product is served: ``gunicorn -c python:governance.gunicorn_conf governance.wsgi``.

Every setting can be changed by its ``GUNICORN_*`` environment variable. The benchmarks and
the load harness serve with this file, so their figures are the deployed configuration's.

Why these values:

- Threaded workers (``gthread``), one process per core plus one: a request spends part of
  its time waiting on PostgreSQL and Redis, when another thread of the same process can run;
  the extra process covers the moments when all threads of one wait.
- ``worker_connections`` is a small multiple of the threads. A worker accepts connections
  while it has room; with the default (1,000) the first worker to wake takes most of a burst
  of keep-alive clients and keeps them, while another sits idle. Measured on 2 cores with 50
  clients submitting back to back (``tests/bench/test_bench_submit_load.py``): 110-116
  submits/s with the default, 169-178 with 20 per worker (docs/benchmarks.md). Clients
  beyond the limit wait in the listen backlog, not refused; behind a reverse proxy the
  proxy's few upstream connections are all a worker sees.
- Keep-alive 5 s: long enough for a page's assets and a script's next call, short enough that
  idle browsers do not hold a worker's connections.
- Each worker, once the application is loaded, moves every object it holds then out of the
  garbage collector's sight (``gc.freeze``): Django, the REST framework and Plotly's
  validators are hundreds of thousands of long-lived objects, and a full collection walks
  them all in the middle of whichever request triggers it. Rendering the fair-share page 40
  times in one process, two such collections added about 90 ms each (docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import os

from governance.parsing import whole_number


def _int(name: str, default: int) -> int:
    """``name``'s whole number, ``default`` when unset; a clear refusal of anything else."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    number = whole_number(value)
    if number is None or number < 1:
        raise SystemExit(f"{name} must be a whole number of at least 1, got {value!r}.")
    return number


bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
worker_class = "gthread"
workers = _int("GUNICORN_WORKERS", (os.cpu_count() or 1) + 1)
threads = _int("GUNICORN_THREADS", 4)
worker_connections = _int("GUNICORN_WORKER_CONNECTIONS", 5 * threads)
keepalive = _int("GUNICORN_KEEPALIVE", 5)
backlog = _int("GUNICORN_BACKLOG", 512)
timeout = _int("GUNICORN_TIMEOUT", 60)
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "warning")


def post_worker_init(worker) -> None:
    """Load every view (the URL patterns import them) and the charts' Plotly template, then
    freeze what the application holds (see above) after a last full collection."""
    from django.urls import get_resolver

    from governance.figures import figure_json

    get_resolver().url_patterns  # noqa: B018 - imports every URL module and its views
    figure_json({"data": []})  # builds Plotly's default template once, not on a first chart
    gc.collect()
    gc.freeze()
