"""``manage.py generate_usage_history``: a budget tree with a year of hourly usage, for benchmarks.

Builds one organization ("Usage history <seed>") with programs of 20 projects, clusters of
32 x 8 GPUs, allocations, cost rates, a finance user and an org admin, then one
``UsageHour`` row per (cluster, project, hour) and — unless ``--no-ledger`` — the matching
ledger rows (``UsageRecord``: budgeted, burst and free pieces of each hour;
``EntitlementRecord``: one per hour), so that ``rebuild_usage`` gives the same rollup and
reports can be checked against the ledger. The clusters' accounting cursor is set to the end
and the closed days are rolled into the daily cache (``UsageDay``).

The hourly rows are made by PostgreSQL itself (``INSERT … SELECT`` over ``generate_series``
with a seeded hash for the noise), in hour order like the live loop writes them: 300
projects x 2 clusters x 365 days (5.3 M rollup rows, about as many ledger rows of each kind)
take a few minutes on two cores. PostgreSQL only.

Usage shape: each project has a base appetite; demand follows the time of day with noise;
a project gets 50-100 % of what it asks for; its first *entitled* GPU-seconds are budgeted
and the rest burst; about 5 % of projects hold no share (all their charged time is burst)
and about a third of the hours carry some free-lane work. The ledger's pieces carry the
rollup's exact amounts; their intervals are those amounts ÷ GPUs, rounded to the microsecond.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection, transaction

from governance.choices import Role
from governance.models import (
    Allocation,
    Cluster,
    CostRate,
    Organization,
    Program,
    Project,
    RoleAssignment,
)
from governance.parsing import calendar_day
from governance.services.reports import usage_days_refresh
from scheduler.choices import RunEndReason, RunLane, WorkloadState
from scheduler.models import AccountingCursor, Run, Workload

PROJECTS_PER_PROGRAM = 20
GPU_TYPES = ("h100", "b200", "a100", "l40s")
DEFAULT_RATES = {
    "h100": Decimal("2.4000"),
    "b200": Decimal("4.1000"),
    "a100": Decimal("1.3000"),
    "l40s": Decimal("0.9000"),
}
HUNDRED = Decimal("100")

# One row per (cluster, project, hour), hour-major. ``p`` holds each project's figures on each
# cluster: entitled GPU-seconds per hour, base appetite, nominal GPUs for demand.
ROLLUP_SQL = """
INSERT INTO scheduler_usagehour
    (project_id, cluster_id, hour, budgeted_gpu_seconds, burst_gpu_seconds, free_gpu_seconds,
     entitled_gpu_seconds, demand_gpu_seconds)
SELECT project_id, cluster_id, hour,
       LEAST(charged, entitled), charged - LEAST(charged, entitled), free, entitled, demand
FROM (
    SELECT p.project_id, p.cluster_id, h.hour, p.entitled,
           d.demand_gpus * 3600 AS demand,
           floor(d.demand_gpus * (0.5 + 0.5 * r.u2))::numeric * 3600 AS charged,
           CASE WHEN r.u3 < 0.3 THEN floor(r.u3 * 20)::numeric * 3600 ELSE 0 END AS free
    FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 hour',
                         interval '1 hour') AS h(hour)
    CROSS JOIN usage_history_projects p
    CROSS JOIN LATERAL (
        SELECT (hashint8extended(k, %(seed)s) & 1048575)::float8 / 1048576 AS u1,
               (hashint8extended(k, %(seed)s + 1) & 1048575)::float8 / 1048576 AS u2,
               (hashint8extended(k, %(seed)s + 2) & 1048575)::float8 / 1048576 AS u3
        FROM (SELECT p.project_id * 1000003 + p.cluster_id * 7919
                     + extract(epoch FROM h.hour)::bigint / 3600 AS k) AS key
    ) r
    CROSS JOIN LATERAL (
        SELECT floor(p.appetite * p.nominal_gpus * 2 * r.u1
                     * (0.75 + 0.25 * sin(2 * pi() * extract(hour FROM h.hour) / 24)))::numeric
               AS demand_gpus
    ) d
    ORDER BY h.hour, p.cluster_id, p.project_id
) AS x
"""

# Ledger pieces of each rollup hour: budgeted from the top of the hour, burst right after it
# (the charged run holds its GPUs the whole hour), free on the project's free-lane run.
LEDGER_SQL = """
INSERT INTO scheduler_usagerecord
    (run_id, source, external_id, project_id, cluster_id, interval_start, interval_end, gpus,
     gpu_seconds, charge, created_at)
SELECT run_id, '', '', project_id, cluster_id, s, e, gpus, amount, charge, now()
FROM (
    SELECT p.charged_run_id AS run_id, u.project_id, u.cluster_id, u.hour AS s,
           u.hour + make_interval(secs => round(u.budgeted_gpu_seconds
               / ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600), 6)) AS e,
           ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600)::int AS gpus,
           u.budgeted_gpu_seconds AS amount, 'budgeted' AS charge
    FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
    WHERE u.budgeted_gpu_seconds > 0 AND u.hour >= %(start)s AND u.hour < %(end)s
    UNION ALL
    SELECT p.charged_run_id, u.project_id, u.cluster_id,
           u.hour + make_interval(secs => round(u.budgeted_gpu_seconds
               / ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600), 6)),
           u.hour + interval '1 hour',
           ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600)::int,
           u.burst_gpu_seconds, 'burst'
    FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
    WHERE u.burst_gpu_seconds > 0 AND u.hour >= %(start)s AND u.hour < %(end)s
    UNION ALL
    SELECT p.free_run_id, u.project_id, u.cluster_id, u.hour, u.hour + interval '1 hour',
           (u.free_gpu_seconds / 3600)::int, u.free_gpu_seconds, 'free'
    FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
    WHERE u.free_gpu_seconds > 0 AND u.hour >= %(start)s AND u.hour < %(end)s
) AS pieces
ORDER BY s, cluster_id, project_id
"""

ENTITLEMENT_SQL = """
INSERT INTO scheduler_entitlementrecord
    (project_id, cluster_id, interval_start, interval_end, effective_share, healthy_gpus,
     demand_gpus, entitled_gpu_seconds, demand_gpu_seconds)
SELECT u.project_id, u.cluster_id, u.hour, u.hour + interval '1 hour', p.effective_share,
       p.healthy_gpus, (u.demand_gpu_seconds / 3600)::int, u.entitled_gpu_seconds,
       u.demand_gpu_seconds
FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
WHERE u.hour >= %(start)s AND u.hour < %(end)s
ORDER BY u.hour, u.cluster_id, u.project_id
"""


def _split(rng: random.Random, n: int, total: Decimal) -> list[Decimal]:
    """``n`` random percents (two decimals) summing to at most ``total``."""
    weights = [rng.uniform(0.5, 2.0) for _ in range(n)]
    scale = float(total) / sum(weights)
    return [Decimal(str(round(w * scale - 0.005, 2))).max(Decimal("0.01")) for w in weights]


class Command(BaseCommand):
    help = (
        "Generate an organization with PROJECTS projects on CLUSTERS clusters and DAYS days of "
        "hourly usage (rollup and ledger), for the report benchmarks. PostgreSQL only."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--projects", type=int, default=300)
        parser.add_argument("--clusters", type=int, default=2)
        parser.add_argument("--days", type=int, default=365)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument(
            "--end",
            help="Last day (exclusive), YYYY-MM-DD in UTC; default: today.",
        )
        parser.add_argument(
            "--until-now",
            action="store_true",
            help="End at the current hour instead of midnight, as a live cluster whose "
            "accounting is current (today's hours so far are in the history).",
        )
        parser.add_argument(
            "--no-ledger",
            action="store_true",
            help="Write the hourly rollup only (faster; rebuild_usage would then empty it).",
        )

    def handle(self, *args, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("generate_usage_history needs PostgreSQL (set DATABASE_URL).")
        projects, clusters, days = options["projects"], options["clusters"], options["days"]
        if not 1 <= projects <= 100_000:
            raise CommandError("--projects must be between 1 and 100000.")
        if not 1 <= clusters <= len(GPU_TYPES):
            raise CommandError(f"--clusters must be between 1 and {len(GPU_TYPES)}.")
        if not 1 <= days <= 3660:
            raise CommandError("--days must be between 1 and 3660.")
        if options["end"] and options["until_now"]:
            raise CommandError("Give --end or --until-now, not both.")
        if options["until_now"]:
            end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        elif options["end"]:
            day = calendar_day(options["end"])
            if day is None:
                raise CommandError("--end must be a date, YYYY-MM-DD.")
            end = datetime(day.year, day.month, day.day, tzinfo=UTC)
        else:
            end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        start = end - timedelta(days=days)
        seed = options["seed"]
        slug = f"usage-history-{seed}"
        if Organization.objects.filter(slug=slug).exists():
            raise CommandError(
                f"Organization {slug!r} exists already: use another --seed or a fresh database."
            )
        began = time.monotonic()
        with transaction.atomic():
            self._tree(
                slug=slug,
                seed=seed,
                projects=projects,
                clusters=clusters,
                start=start,
                end=end,
            )
            params = {"start": start, "end": end, "seed": seed}
            with connection.cursor() as cursor:
                self._skip_foreign_key_triggers(cursor)
                cursor.execute(ROLLUP_SQL, params)
                rollup_rows = cursor.rowcount
                self.stdout.write(
                    f"{rollup_rows:,} hourly rollup rows ({time.monotonic() - began:.0f} s)"
                )
                if not options["no_ledger"]:
                    cursor.execute(LEDGER_SQL, params)
                    self.stdout.write(
                        f"{cursor.rowcount:,} usage ledger rows ({time.monotonic() - began:.0f} s)"
                    )
                    cursor.execute(ENTITLEMENT_SQL, params)
                    self.stdout.write(
                        f"{cursor.rowcount:,} entitlement ledger rows "
                        f"({time.monotonic() - began:.0f} s)"
                    )
        with connection.cursor() as cursor:
            for table in ("scheduler_usagehour", "scheduler_usagerecord"):
                cursor.execute(f"ANALYZE {table}")
        # The history is accounted up to its end; roll its days into the daily cache.
        for cluster in Cluster.objects.filter(organization__slug=slug):
            AccountingCursor.objects.update_or_create(
                cluster=cluster, defaults={"accounted_until": end, "accounted_from": start}
            )
            days = usage_days_refresh(cluster=cluster)
            self.stdout.write(
                f"{cluster.slug}: {days} days in the daily cache ({time.monotonic() - began:.0f} s)"
            )
        with connection.cursor() as cursor:
            # The planner's statistics of every table written here, as autovacuum would
            # gather later: without them it takes a 300-project tree for one row and picks
            # nested loops over the daily cache (60 ms instead of 5 for a week's chart).
            for table in (
                "governance_usageday",
                "governance_organization",
                "governance_program",
                "governance_project",
                "governance_allocation",
                "governance_cluster",
            ):
                cursor.execute(f"ANALYZE {table}")
        self.stdout.write(
            self.style.SUCCESS(
                f"{slug}: {projects} projects on {clusters} clusters, {days} days "
                f"from {start:%Y-%m-%d} to {end:%Y-%m-%d} in {time.monotonic() - began:.0f} s"
            )
        )

    def _skip_foreign_key_triggers(self, cursor) -> None:
        """Skip the deferred foreign-key checks of the bulk inserts, when allowed.

        Django's foreign keys are ``DEFERRABLE INITIALLY DEFERRED``: checking ~15 M rows at
        COMMIT takes longer than writing them. Every key written here points at a row this
        transaction just made, so the checks cannot fail; ``session_replication_role =
        replica`` (superuser only, for this transaction only) skips them. Without the
        privilege the checks run and the command is slower.
        """
        try:
            with transaction.atomic():
                cursor.execute("SET LOCAL session_replication_role = replica")
        except DatabaseError:
            self.stdout.write("Not a superuser: foreign keys are checked at commit (slower).")

    def _tree(self, *, slug, seed, projects, clusters, start, end) -> None:
        """Organization, programs, projects, clusters, shares, rates, users, one charged and
        one free-lane run per project and cluster; fills the ``usage_history_projects``
        temporary table the SQL above reads."""
        rng = random.Random(seed)
        User = get_user_model()
        org = Organization.objects.create(name=f"Usage history {seed}", slug=slug)
        admin = User.objects.create_user(username=f"{slug}-admin", password=None)
        finance = User.objects.create_user(
            username=f"{slug}-finance", email=f"finance@{slug}.example", password=None
        )
        RoleAssignment.objects.create(user=admin, role=Role.ORG_ADMIN, organization=org)
        RoleAssignment.objects.create(user=finance, role=Role.FINANCE, organization=org)
        n_programs = -(-projects // PROJECTS_PER_PROGRAM)
        program_objs = Program.objects.bulk_create(
            Program(organization=org, name=f"Program {i + 1:03d}", slug=f"program-{i + 1:03d}")
            for i in range(n_programs)
        )
        project_objs = Project.objects.bulk_create(
            Project(
                program=program_objs[i // PROJECTS_PER_PROGRAM],
                name=f"Project {i + 1:04d}",
                slug=f"project-{i + 1:04d}",
                cost_centre=f"CC-{1000 + i // 5}",
            )
            for i in range(projects)
        )
        cluster_objs = Cluster.objects.bulk_create(
            Cluster(
                organization=org,
                name=f"{GPU_TYPES[i].upper()} cluster",
                slug=GPU_TYPES[i],
                gpu_type=GPU_TYPES[i],
                nodes=32,
                gpus_per_node=8,
            )
            for i in range(clusters)
        )
        for cluster in cluster_objs:
            if not CostRate.objects.filter(gpu_type=cluster.gpu_type).exists():
                CostRate.objects.create(
                    gpu_type=cluster.gpu_type,
                    rate_per_gpu_hour=DEFAULT_RATES[cluster.gpu_type],
                    valid_from=start,
                    note="generate_usage_history",
                )
        allocations, figures = [], []
        no_share = {p.pk for p in project_objs if rng.random() < 0.05}
        for cluster in cluster_objs:
            program_shares = _split(rng, n_programs, Decimal("95"))
            for program, program_share in zip(program_objs, program_shares, strict=True):
                allocations.append(
                    Allocation(
                        cluster=cluster,
                        program=program,
                        percent=program_share,
                        valid_from=start,
                        set_by=admin,
                        reason="generated",
                    )
                )
                members = [p for p in project_objs if p.program_id == program.pk]
                budgeted = [p for p in members if p.pk not in no_share]
                shares = _split(rng, len(budgeted), Decimal("95")) if budgeted else []
                share_of = dict(zip((p.pk for p in budgeted), shares, strict=True))
                for project in members:
                    share = share_of.get(project.pk, Decimal(0))
                    if share:
                        allocations.append(
                            Allocation(
                                cluster=cluster,
                                project=project,
                                percent=share,
                                valid_from=start,
                                set_by=admin,
                                reason="generated",
                            )
                        )
                    effective = program_share * share / HUNDRED
                    entitled_gpus = effective / HUNDRED * cluster.total_gpus
                    figures.append(
                        {
                            "project": project,
                            "cluster": cluster,
                            "effective": effective,
                            "entitled": (entitled_gpus * 3600).quantize(Decimal("0.000001")),
                            "appetite": rng.uniform(0.3, 1.7),
                            "nominal": max(float(entitled_gpus), 2.0),
                        }
                    )
        Allocation.objects.bulk_create(allocations, batch_size=2000)
        workloads, runs = [], []
        for item in figures:
            for lane, min_runtime in ((RunLane.CHARGED, 3600), (RunLane.FREE, 0)):
                workloads.append(
                    Workload(
                        project=item["project"],
                        cluster=item["cluster"],
                        name=f"history-{lane}",
                        gpus=1,
                        min_runtime_seconds=min_runtime,
                        state=WorkloadState.SUCCEEDED,
                        submitted_at=start,
                        first_started_at=start,
                        finished_at=end,
                    )
                )
        workloads = Workload.objects.bulk_create(workloads, batch_size=2000)
        for workload in workloads:
            runs.append(
                Run(
                    workload=workload,
                    attempt=1,
                    project_id=workload.project_id,
                    cluster_id=workload.cluster_id,
                    gpus=1,
                    lane=RunLane.FREE if workload.min_runtime_seconds == 0 else RunLane.CHARGED,
                    started_at=start,
                    ended_at=end,
                    end_reason=RunEndReason.SUCCEEDED,
                    accounted_until=end,
                )
            )
        runs = Run.objects.bulk_create(runs, batch_size=2000)
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMPORARY TABLE usage_history_projects (project_id bigint, "
                "cluster_id bigint, entitled numeric, effective_share numeric, healthy_gpus int, "
                "appetite float8, nominal_gpus float8, charged_run_id bigint, free_run_id bigint)"
                " ON COMMIT DROP"
            )
            cursor.executemany(
                "INSERT INTO usage_history_projects VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [
                    (
                        item["project"].pk,
                        item["cluster"].pk,
                        item["entitled"],
                        item["effective"].quantize(Decimal("0.00000001")),
                        item["cluster"].total_gpus,
                        item["appetite"],
                        item["nominal"],
                        runs[2 * index].pk,
                        runs[2 * index + 1].pk,
                    )
                    for index, item in enumerate(figures)
                ],
            )
