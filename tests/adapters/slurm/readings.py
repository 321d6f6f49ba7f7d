"""What Slurm and the ledger say, read by the real-Slurm tests themselves (``sacctmgr``,
``sacct``, the usage records) rather than through the adapter under test."""

from __future__ import annotations

import re
from decimal import Decimal
from io import StringIO

from django.core.management import call_command
from django.db.models import Sum

from scheduler.models import UsageRecord
from tests.adapters.slurm.daemons import wait_running

DONE = {"COMPLETED"}


def run(command: str, *args: str) -> str:
    """Call a management command; what it printed."""
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def associations(slurm) -> dict[tuple[str, str], dict[str, str]]:
    """``sacctmgr show assoc`` of the test cluster: (account, user) → fields."""
    out = slurm.run(
        "sacctmgr", "-P", "-n", "show", "assoc", f"cluster={slurm.name}",
        "format=Account,User,ParentName,Fairshare,QOS,DefaultQOS",
    )  # fmt: skip
    rows = {}
    for line in out.splitlines():
        account, user, parent, fairshare, qos, default_qos = line.split("|")
        rows[(account, user)] = {
            "parent": parent, "fairshare": fairshare, "qos": qos, "default_qos": default_qos,
        }  # fmt: skip
    return rows


def sacct_gpu_seconds(slurm, jobs: list[str]) -> dict[str, int]:
    """GPUs x elapsed seconds per job, read from ``sacct`` here (not by the adapter)."""
    out = slurm.run(
        "sacct", "-X", "-n", "-P", "-j", ",".join(jobs), "--format=JobIDRaw,ElapsedRaw,AllocTRES"
    )
    result = {}
    for line in out.splitlines():
        job, elapsed, tres = line.split("|")
        gpus = re.search(r"gres/gpu=(\d+)", tres)
        result[job] = int(elapsed) * (int(gpus.group(1)) if gpus else 0)
    return result


def ledger(slurm, job: str) -> Decimal:
    """GPU-seconds the ledger holds for one Slurm job (every run)."""
    total = UsageRecord.objects.filter(source="slurm", external_id=f"{slurm.name}:{job}")
    return total.aggregate(s=Sum("gpu_seconds"))["s"] or Decimal(0)


def runs_of(slurm, job: str) -> list[tuple[str, int]]:
    """Every run of a job as ``sacct --duplicates`` records it: (state, elapsed seconds)."""
    out = slurm.run(
        "sacct", "-X", "-n", "-P", "--duplicates", "-j", job, "--format=State,ElapsedRaw"
    )
    return [(line.split("|")[0], int(line.split("|")[1])) for line in out.splitlines()]


def requeue_after_a_first_run(slurm, job: str) -> None:
    """Requeue a job once it has run for a second, as a preemption with PreemptMode=REQUEUE
    does; Slurm starts it again itself once its requeue hold (BeginTime) has passed."""
    wait_running(slurm, job, ran=1)
    slurm.run("scontrol", "requeue", job)
