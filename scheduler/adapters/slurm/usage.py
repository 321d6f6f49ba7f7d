"""``slurm_usage_import``: Slurm jobs (``sacct``) → the usage ledger and owed figures.

Each job allocation is charged ``GPUs x (end - start)`` GPU-seconds to the project of its
account through ``usage_external_record`` (source ``slurm``, external id
``<slurm cluster>:<job id>``): a re-import charges nothing twice, a running job is charged
up to now and its remainder once it has ended, a requeued job (one id, several runs) is
charged for each run. GPUs are the ``gres/gpu=N`` of ``AllocTRES``. A job in the free QOS is
charged to the free lane. Jobs whose account is not a project's (a program or organization
account, an account the tree does not know) are reported, not charged.

Owed: the same import appends entitlement (effective share x the cluster's GPUs) and demand
(GPUs each job asked for, ``ReqTRES``, from submit to end) for every hour since the last
import, via ``usage_external_entitlement`` — the figures the live loop writes, so owed =
Σ min(entitled, demand) and every dashboard reads them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from governance.models import Project
from scheduler.adapters.slurm.client import SlurmClient, SlurmError
from scheduler.adapters.slurm.sync import qos_names, slurm_account_map
from scheduler.models import AccountingCursor, Node
from scheduler.services.usage_external import (
    CREATED,
    DemandInterval,
    usage_external_entitlement,
    usage_external_record,
)

SOURCE = "slurm"
_GPU = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")
NOT_STARTED = {"", "none", "unknown"}
# A first scheduled import reaches this far back; later ones start at the previous import
# minus a margin (re-reading is free: the ledger is idempotent).
FIRST_IMPORT_LOOKBACK = timedelta(days=1)
IMPORT_OVERLAP = timedelta(minutes=10)


def gpus_of(tres: str) -> int:
    """The GPU count of a TRES string (``billing=1,cpu=1,gres/gpu=2,node=1`` → 2)."""
    match = _GPU.search(tres or "")
    return int(match.group(1)) if match else 0


def parse_time(text: str) -> datetime | None:
    """An ``sacct`` time (UTC, ``%Y-%m-%dT%H:%M:%S``) or ``None`` for Unknown/None."""
    if (text or "").strip().lower() in NOT_STARTED:
        return None
    return datetime.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)


@dataclass
class ImportReport:
    """What one import did: jobs seen and charged, GPU-seconds added, what was not charged."""

    since: datetime
    until: datetime
    jobs: int = 0
    charged: int = 0
    unchanged: int = 0
    gpu_seconds: float = 0.0
    entitlement_rows: int = 0
    unmapped: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The report as lines for a terminal or the connection's last summary."""
        out = [
            f"sacct {self.since:%Y-%m-%dT%H:%M:%S} → {self.until:%Y-%m-%dT%H:%M:%S} UTC: "
            f"{self.jobs} job run(s); {self.charged} charged "
            f"({self.gpu_seconds:.0f} GPU-seconds added), {self.unchanged} already charged; "
            f"{self.entitlement_rows} entitlement row(s)."
        ]
        out += [f"not charged (account maps to no project): {u}" for u in self.unmapped]
        out += [f"skipped: {s}" for s in self.skipped]
        return out


class _Run(NamedTuple):
    """One started job run to charge, in the order runs are charged (by start)."""

    start: datetime
    job: str
    project_id: int
    stop: datetime
    gpus: int
    qos: str


class _Jobs(NamedTuple):
    """What ``sacct``'s rows say: the runs to charge and every project job's demand."""

    runs: list[_Run]
    demand: list[DemandInterval]


def _period(
    connection, since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """``(since, until)`` of the import with their defaults; ``ValueError`` for a bad period
    or a cluster this product schedules itself."""
    until = until or now
    if since is None:
        since = (
            connection.usage_imported_until - IMPORT_OVERLAP
            if connection.usage_imported_until
            else now - FIRST_IMPORT_LOOKBACK
        )
    if timezone.is_naive(since) or timezone.is_naive(until):
        raise ValueError("since/until: give a timezone (e.g. 2026-03-01T00:00:00Z).")
    if since >= until:
        raise ValueError(f"since: {since.isoformat()} is not before until {until.isoformat()}.")
    if until > now:
        raise ValueError(f"until: {until.isoformat()} is in the future.")
    if Node.objects.filter(cluster=connection.cluster).exists():
        # The live loop accounts this cluster already: two writers would charge owed twice.
        raise ValueError(
            f"cluster: {connection.cluster} has nodes driven by this product's own scheduler; "
            "a cluster is either scheduled here or by Slurm, not both."
        )
    return since, until


def _read_jobs(
    rows: list[dict[str, str]],
    connection,
    project_of: dict[str, int],
    until: datetime,
    report: ImportReport,
) -> _Jobs:
    """The runs to charge and the demand of ``rows``; jobs not charged go to ``report``."""
    demand: list[DemandInterval] = []
    runs: list[_Run] = []
    for row in rows:
        if row["Cluster"] and row["Cluster"] != connection.slurm_cluster:
            continue
        start, end = parse_time(row["Start"]), parse_time(row["End"])
        submit = parse_time(row["Submit"])
        project_id = project_of.get(row["Account"].lower())
        job = row["JobIDRaw"]
        if project_id is not None and submit is not None:
            demand.append(DemandInterval(project_id, gpus_of(row["ReqTRES"]), submit, end))
        state = row["State"].split(" ")[0]
        if start is None or state == "PENDING" or start >= until:
            # Never started (a pending job's Start is only Slurm's forecast): nothing to charge.
            continue
        report.jobs += 1
        if project_id is None:
            report.unmapped.append(f"job {job} account {row['Account'] or '-'}")
            continue
        stop = min(end or until, until)
        if end is None and state not in {"RUNNING", "SUSPENDED", "REQUEUED"}:
            report.skipped.append(f"job {job}: state {row['State']} without an end time")
            continue
        runs.append(_Run(start, job, project_id, stop, gpus_of(row["AllocTRES"]), row["QOS"]))
    runs.sort()
    return _Jobs(runs, demand)


def _charge_runs(
    connection,
    runs: list[_Run],
    projects: dict,
    free_qos: str,
    now: datetime,
    report: ImportReport,
) -> None:
    """Record each run in the ledger (once: a re-import changes nothing); count in ``report``."""
    for run in runs:
        if run.stop <= run.start or run.gpus == 0:
            report.unchanged += 1
            continue
        result = usage_external_record(
            cluster=connection.cluster,
            project=projects[run.project_id],
            source=SOURCE,
            external_id=f"{connection.slurm_cluster}:{run.job}",
            start=run.start,
            end=run.stop,
            gpus=run.gpus,
            free=run.qos == free_qos,
            now=now,
        )
        if result.status == CREATED:
            report.charged += 1
            report.gpu_seconds += float(result.gpu_seconds)
        else:
            report.unchanged += 1


def slurm_usage_import(
    *,
    connection,
    since: datetime | None = None,
    until: datetime | None = None,
    now: datetime | None = None,
    client=None,
) -> ImportReport:
    """Charge the jobs of ``connection``'s Slurm that ran in ``[since, until]``.

    ``since`` defaults to the connection's import cursor (minus a margin) or a day ago;
    ``until`` to now. All charges of one import are written in one transaction: a failure
    leaves the ledger as it was, and the import can be re-run. Raises ``SlurmError`` when
    ``sacct`` fails, ``ValueError`` naming the argument for a bad period.
    """
    now = now or timezone.now()
    since, until = _period(connection, since, until, now)
    cluster = connection.cluster
    client = client or SlurmClient.for_connection(connection)
    cursor = AccountingCursor.objects.filter(cluster=cluster).first()
    # Owed needs every job pending or running since the entitlement cursor.
    read_from = min(since, cursor.accounted_until) if cursor else since
    rows = client.sacct(
        start=read_from.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        end=until.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
    )
    names = slurm_account_map(connection=connection)
    project_of = names.project_by_account
    projects = Project.objects.in_bulk(set(project_of.values()))
    free_qos, _ = qos_names(connection)
    report = ImportReport(since=since, until=until)
    jobs = _read_jobs(rows, connection, project_of, until, report)
    with transaction.atomic():
        _charge_runs(connection, jobs.runs, projects, free_qos, now, report)
        report.entitlement_rows = usage_external_entitlement(
            cluster=cluster, demand=jobs.demand, until=until, start=since
        )
        previous = connection.usage_imported_until
        type(connection).objects.filter(pk=connection.pk).update(
            usage_imported_until=max(previous, until) if previous else until,
            last_import_at=now,
            last_import_summary="\n".join(report.lines())[:4000],
        )
    return report


__all__ = ["ImportReport", "SlurmError", "gpus_of", "parse_time", "slurm_usage_import"]
