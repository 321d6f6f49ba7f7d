"""After a load or fault run: every acknowledged submit is in the database exactly once, no
workload ran twice at once, and the usage ledger balances.

Run by the harness as ``python -m tests.reliability_load.verify --out DIR --run TAG`` with
``DATABASE_URL`` pointing at the harness's own database, once the loop processes, agents and
locust have stopped. It settles the runs still open (reports them finished through the
executors' own service, as ``tests/scheduler/test_failures_processes.py`` does), accounts
usage, then reuses the failure tests' checks (``tests/scheduler/conftest.py``):
``single_start_per_workload`` (no two overlapping runs of a workload; one start order per
node of a run's placement) and ``ledger_total == runs_total`` per cluster
(Σ ledger GPU-seconds == Σ run GPUs x run time, exactly). Writes ``verify.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from pathlib import Path

import django


def check_submits(run_tag: str, submits: dict) -> dict:
    """Acknowledged submits found exactly once (by their unique name), missing, duplicated."""
    from scheduler.models import Workload

    found = Counter(
        Workload.objects.filter(name__startswith=f"{run_tag}-").values_list("name", flat=True)
    )
    ids = dict(Workload.objects.filter(name__startswith=f"{run_tag}-").values_list("name", "id"))
    acked = {name: r for name, r in submits.items() if r["status"] == 201}
    missing = [n for n in acked if found[n] == 0]
    duplicated = [n for n, c in found.items() if c > 1]
    wrong_id = [n for n, r in acked.items() if found[n] == 1 and ids[n] != r.get("id")]
    refused_but_stored = [n for n, r in submits.items() if r["status"] != 201 and found[n] > 0]
    unknown = [n for n in found if n not in submits]
    return {
        "submits_attempted": len(submits),
        "submits_acknowledged": len(acked),
        "acknowledged_found_once": sum(1 for n in acked if found[n] == 1),
        "missing": missing[:20],
        "duplicated": duplicated[:20],
        "wrong_id": wrong_id[:20],
        # A request that failed on the client side (e.g. the connection dropped after the
        # commit) may still have created its workload; it is counted, not an error.
        "unacknowledged_but_stored": len(refused_but_stored),
        "stored_without_a_record": len(unknown),
    }


def settle_and_check(cluster) -> dict:
    """End open runs, account usage, then the failure tests' checks; their results."""
    from django.db.models import Avg, Count, F, Max, Sum

    from scheduler.choices import ExitOutcome, OrderKind
    from scheduler.models import Order, Run, SchedulingCycle, Workload
    from scheduler.services.executor_reports import run_report_exit
    from scheduler.services.usage import usage_account
    from tests.scheduler.conftest import ledger_total, runs_total, single_start_per_workload

    open_runs = list(Run.objects.filter(cluster=cluster, ended_at__isnull=True))
    for run in open_runs:
        run_report_exit(run=run, outcome=ExitOutcome.SUCCEEDED, exit_code=0)
    usage_account(cluster=cluster)
    result = {
        "workloads": Workload.objects.filter(cluster=cluster).count(),
        "runs": Run.objects.filter(cluster=cluster).count(),
        "runs_open_at_end": len(open_runs),
        "runs_by_end_reason": dict(
            Run.objects.filter(cluster=cluster)
            .values_list("end_reason")
            .annotate(n=Count("id"))
            .values_list("end_reason", "n")
        ),
        "cycles": SchedulingCycle.objects.filter(cluster=cluster).count(),
        # Cycles that used the engine their worker process kept (the others rebuilt it).
        "cycles_kept": SchedulingCycle.objects.filter(cluster=cluster, engine="kept").count(),
        # Time spent inside cycles (the worker's main cost), and the queue they worked on.
        **{
            key: round(value or 0, 1)
            for key, value in SchedulingCycle.objects.filter(cluster=cluster)
            .aggregate(
                cycle_seconds=Sum("duration_seconds"),
                cycle_mean_ms=Avg("duration_seconds") * 1000,
                cycle_max_pending=Max("pending"),
            )
            .items()
        },
        "orders_acknowledged": Order.objects.filter(
            node__cluster=cluster, acknowledged_at__isnull=False
        ).count(),
    }
    try:
        single_start_per_workload(cluster)
        result["started_twice"] = "none"
    except AssertionError as exc:
        result["started_twice"] = str(exc)
    # No run started on a node outside its placement (so never on two agents' nodes but its
    # own), and no node got two start orders for one run.
    result["starts_off_placement"] = (
        Order.objects.filter(run__cluster=cluster, kind=OrderKind.START)
        .exclude(
            id__in=Order.objects.filter(
                run__run_nodes__node_id=F("node_id"), run__cluster=cluster
            ).values("id")
        )
        .count()
    )
    result["duplicate_start_orders"] = (
        Order.objects.filter(run__cluster=cluster, kind=OrderKind.START)
        .values("run_id", "node_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    ledger, runs = ledger_total(cluster), runs_total(cluster)
    result["ledger_gpu_seconds"] = str(ledger)
    result["runs_gpu_seconds"] = str(runs)
    result["ledger_balances"] = ledger == runs
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--run", required=True)
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    django.setup()
    from governance.models import Cluster

    out = Path(options.out)
    submits = json.loads((out / "submits.json").read_text())
    report = {"submits": check_submits(options.run, submits), "clusters": {}}
    for cluster in Cluster.objects.filter(organization__slug="philly").order_by("slug"):
        report["clusters"][cluster.slug] = settle_and_check(cluster)
    (out / "verify.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
