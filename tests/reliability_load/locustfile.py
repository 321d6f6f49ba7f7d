"""Locust clients of the load harness: researchers reading their queue and submitting, and
managers opening the owed-vs-delivered page.

Run by ``harness.py`` (``make load`` / ``make faults``), which passes in the environment:
``LOAD_WORLD`` (the JSON written by ``world.py``), ``LOAD_RUN`` (a unique run tag) and
``LOAD_OUT`` (a directory). Each client tags its submits with a unique name
(``<run>-u<client>-<n>``) so the harness can check afterwards that every acknowledged submit
is in the database exactly once. Every request is also logged with its start time (epoch
seconds), so errors can be attributed to fault windows: ``requests.csv`` and
``submits.json`` in ``LOAD_OUT``.

Task mix per client (weights): queue status 6, submit 3, owed-vs-delivered page 1, with
0.5 to 2 s of think time between requests (``LOAD_THINK``). One submit in ten goes to the ``lab`` cluster, whose
nodes are real node agents running ``sleep``; the rest go to the demo ``h100`` cluster played
by the simulated executor (declared durations of 1 to 30 simulated minutes: a few real seconds).
"""

from __future__ import annotations

import csv
import itertools
import json
import os
import random
import threading
import time
from pathlib import Path

from locust import HttpUser, between, events, task

WORLD = json.loads(Path(os.environ["LOAD_WORLD"]).read_text())
RUN = os.environ.get("LOAD_RUN", "load")
OUT = Path(os.environ.get("LOAD_OUT", "."))
QUEUE = "queue status: GET /api/workloads/?mine=true"
SUBMIT = "submit: POST /api/workloads/"
DASHBOARD = "owed vs delivered: GET /dashboards/delivery/"
# Think time between a client's requests, "min,max" seconds; LOAD_THINK=0,0 saturates.
THINK = tuple(float(x) for x in os.environ.get("LOAD_THINK", "0.5,2").split(","))

_client_ids = itertools.count()
_lock = threading.Lock()
_requests: list[tuple[float, str, float, int, str]] = []
_submits: dict[str, dict] = {}  # name -> {"status", "id", "at"}


@events.request.add_listener
def _log_request(request_type, name, response_time, response_length, response, exception,
                 start_time=None, **kwargs):  # fmt: skip
    status = getattr(response, "status_code", 0) or 0
    with _lock:
        _requests.append((start_time or 0.0, name, response_time, status, repr(exception)[:200]
                          if exception else ""))  # fmt: skip


@events.quitting.add_listener
def _write_logs(environment, **kwargs):
    OUT.mkdir(parents=True, exist_ok=True)
    with _lock:
        with open(OUT / "requests.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["start", "name", "ms", "status", "error"])
            writer.writerows(_requests)
        (OUT / "submits.json").write_text(json.dumps(_submits))


class Researcher(HttpUser):
    """A researcher with a token (queue, submit) who also opens a manager's dashboard."""

    wait_time = between(*THINK)

    def on_start(self) -> None:
        self.number = next(_client_ids)
        account = WORLD["researchers"][self.number % len(WORLD["researchers"])]
        self.token_headers = {"Authorization": f"Token {account['token']}"}
        self.project = account["project"]
        self.session = WORLD["sessions"][self.number % len(WORLD["sessions"])]["sessionid"]
        self.submitted = 0
        self.random = random.Random(self.number)

    @task(6)
    def queue_status(self) -> None:
        self.client.get(
            "/api/workloads/?mine=true&limit=20", headers=self.token_headers, name=QUEUE
        )

    @task(3)
    def submit(self) -> None:
        self.submitted += 1
        name = f"{RUN}-u{self.number}-{self.submitted}"
        rnd = self.random
        if rnd.random() < 0.1:
            body = {
                "project": self.project, "cluster": WORLD["clusters"]["lab"], "name": name,
                "gpus": rnd.choice([1, 1, 2, 4]), "min_runtime_seconds": rnd.choice([0, 10]),
                "launch_spec": {"command": ["sleep", str(rnd.randint(2, 8))]},
            }  # fmt: skip
        else:
            body = {
                "project": self.project, "cluster": WORLD["clusters"]["h100"], "name": name,
                "gpus": rnd.choice([1, 2, 4, 8, 8]), "min_runtime_seconds": rnd.choice([0, 60, 600]),
                "declared_duration_seconds": rnd.randint(60, 1800),
                "launch_spec": {"command": ["python", "train.py"]},
            }  # fmt: skip
        began = time.time()
        with self.client.post(
            "/api/workloads/", json=body, headers=self.token_headers, name=SUBMIT,
            catch_response=True,
        ) as response:  # fmt: skip
            record = {"status": response.status_code, "at": began}
            if response.status_code == 201:
                record["id"] = response.json().get("id")
                response.success()
            else:
                response.failure(f"HTTP {response.status_code}")
            with _lock:
                _submits[name] = record

    @task(1)
    def dashboard(self) -> None:
        self.client.get(
            "/dashboards/delivery/", cookies={"sessionid": self.session}, name=DASHBOARD
        )
