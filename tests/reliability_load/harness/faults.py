"""``--faults``: the four faults injected one at a time during the load, and the seconds to
each sign of recovery after each."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tests.reliability_load.harness.config import log
from tests.reliability_load.harness.probes import (
    cycle_done_after,
    db_query,
    node_state,
    order_acknowledged_after,
    seconds_until,
)

if TYPE_CHECKING:
    from tests.reliability_load.harness.run import Harness

# A recovery signal: a predicate of ``t``, the moment the fault was injected.
Signal = Callable[[float], bool]


def measure_fault(
    name: str,
    inject: Callable[[], object],
    measures: dict[str, Signal],
    restore: Callable[[dict], None] | None = None,
) -> dict:
    """Inject one fault, measure each recovery signal in parallel; the fault's record (its
    window and the seconds from its start to each signal, None when not within the limit)."""
    record: dict = {"fault": name, "start": time.time()}
    log(f"fault: {name}")
    try:
        inject()
        record["injected"] = time.time()
        if restore is not None:
            restore(record)
    except Exception as exc:  # recorded and reported; the next fault still runs
        record["error"] = repr(exc)
        log(f"fault: {name} could not be injected or undone: {exc!r}")
    results: dict = {}

    since = record.get("injected", record["start"])

    def measure(key: str, predicate: Signal) -> None:
        elapsed = seconds_until(lambda: predicate(since))
        results[key] = None if elapsed is None else round(time.time() - record["start"], 1)

    threads = [
        threading.Thread(target=measure, args=(key, pred), daemon=True)
        for key, pred in measures.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record.update(results)
    record["end"] = time.time()
    log(f"fault: {name} recovered: {results}")
    return record


def run_faults(harness: Harness, began: float) -> None:
    """The four faults, one every ``--fault-gap`` seconds from ``began``, recorded in
    ``harness.faults``."""
    h100 = harness.world["clusters"]["h100"]
    lab = harness.world["clusters"]["lab"]
    services = harness.services
    gap = harness.options.fault_gap

    def at(offset: float) -> None:
        # The fault schedule: sleep until the fault's planned moment.
        time.sleep(max(0.0, began + offset - time.time()))

    # Each recovery signal is a predicate of ``t``, the moment the fault was injected
    # (the service is back up by then, except the worker and agent, which come back by
    # themselves or later): it must happen after ``t``. Times are reported from the
    # fault's start.
    def cycles_and_orders() -> dict[str, Signal]:
        return {
            "cycle_h100_s": lambda t: cycle_done_after(h100, t),
            "cycle_lab_s": lambda t: cycle_done_after(lab, t),
            "order_acknowledged_s": lambda t: order_acknowledged_after(t),
        }

    at(gap)
    worker = harness.processes["worker"]
    harness.faults.append(measure_fault(
        "kill -9 the Celery worker", lambda: worker.signal(signal.SIGKILL),
        {**cycles_and_orders(),
         "worker_restarted_s": lambda t: bool(worker.restarts and worker.restarts[-1] > t)},
    ))  # fmt: skip
    at(2 * gap)
    harness.faults.append(measure_fault(
        "restart Redis (SHUTDOWN NOSAVE, start)",
        lambda: (services.stop_redis(), services.start_redis()),
        {**cycles_and_orders(), "redis_up_s": lambda t: services.redis_ping()},
    ))  # fmt: skip
    at(3 * gap)
    harness.faults.append(measure_fault(
        "restart PostgreSQL (pg_ctl restart -m fast)", services.restart_postgres,
        {**cycles_and_orders(),
         "postgres_up_s": lambda t: db_query("SELECT 1") is not None},
    ))  # fmt: skip
    at(4 * gap)
    harness.faults.append(kill_node_agent(harness))


def kill_node_agent(harness: Harness) -> dict:
    """kill -9 the first lab node agent; bring it back once the server has marked its node
    down and ``--agent-down`` seconds have passed. Recovery is measured from the restart."""
    agent = harness.world["agents"][0]
    process = harness.processes[f"agent-{agent['node']}"]
    down_for = harness.options.agent_down

    def bring_back(record: dict) -> None:
        # Wait until the server has noticed (heartbeat timeout: node down, runs requeued),
        # at least ``agent_down`` seconds, then start the agent again.
        seconds_until(lambda: node_state(agent["node"]) == "down", limit=60)
        record["node_marked_down_s"] = round(time.time() - record["start"], 1)
        # The planned outage: sleep out what is left of ``agent_down``.
        time.sleep(max(0.0, record["start"] + down_for - time.time()))
        harness.start_agent(agent)
        record["agent_restarted_s"] = round(time.time() - record["start"], 1)
        record["injected"] = time.time()  # recovery is measured from the restart

    return measure_fault(
        f"kill -9 node agent {agent['node']}, back after {down_for:.0f} s",
        lambda: process.signal(signal.SIGKILL),
        {"node_healthy_again_s": lambda t: node_state(agent["node"]) == "healthy",
         "order_acknowledged_on_node_s": lambda t: order_acknowledged_after(t, agent["node"])},
        restore=bring_back,
    )  # fmt: skip
