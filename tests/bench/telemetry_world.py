"""GPU telemetry for the dashboards' bench world (a year of hourly usage, 300 projects).

``generate_usage_history`` writes the rollups and, per project and cluster, one charged and
one free run spanning the year. Here the node agents' side is added, so the pages that show
utilization read a realistic volume: seven projects in ten run on nodes whose agents read
the GPUs (the rest have no telemetry and must show "no telemetry"), and each of their hours
with usage gets one ``UtilizationHour`` row per run with GPU time — allocated = the ledger's
GPU-seconds of that run's lane in that hour, busy a project-typical share of it (20-95 %,
varying hour to hour). About two million rows, written by one INSERT … SELECT. Ten open
runs are marked idle, as the idle rule would have marked them, for the list on cluster health.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from governance.models import Cluster, Project
from scheduler.choices import RunLane, WorkloadState
from scheduler.models import Node, Run, UtilizationHour, Workload

TELEMETRY_SHARE = 7  # of 10 projects, by id
IDLE_RUNS = 10

# One row per (run, node, hour) for the hours with usage of the projects with telemetry.
INSERT = """
INSERT INTO scheduler_utilizationhour (run_id, project_id, cluster_id, node_id, hour,
    allocated_gpu_seconds, busy_gpu_seconds, samples, covered_from, reported_until,
    covered_seconds)
SELECT r.id, u.project_id, u.cluster_id, n.id, u.hour, a.allocated,
    round(a.allocated * least(1.0, greatest(0.0,
        0.2 + 0.75 * ((u.project_id * 37) %% 100) / 100.0 + (random() - 0.5) * 0.3
    ))::numeric, 6),
    720, u.hour, u.hour + interval '1 hour', 3600
FROM scheduler_usagehour u
JOIN scheduler_run r ON r.project_id = u.project_id AND r.cluster_id = u.cluster_id
    AND r.ended_at IS NOT NULL
JOIN scheduler_node n ON n.cluster_id = u.cluster_id AND n.name = %s
CROSS JOIN LATERAL (SELECT CASE WHEN r.lane = %s
    THEN u.budgeted_gpu_seconds + u.burst_gpu_seconds ELSE u.free_gpu_seconds END
    AS allocated) a
WHERE u.cluster_id = ANY(%s) AND u.project_id %% 10 < %s AND a.allocated > 0
"""
NODE = "bench-telemetry-node"
DAY_SUMS = """
INSERT INTO scheduler_utilizationday (cluster_id, project_id, day, allocated_gpu_seconds,
    busy_gpu_seconds)
SELECT cluster_id, project_id, (hour AT TIME ZONE 'UTC')::date, SUM(allocated_gpu_seconds),
    SUM(busy_gpu_seconds)
FROM scheduler_utilizationhour WHERE cluster_id = ANY(%s) GROUP BY 1, 2, 3
"""


def telemetry_add(*, organization_slug: str) -> int:
    """Add the telemetry (once: nothing when the organization's clusters have rows)."""
    clusters = list(Cluster.objects.filter(organization__slug=organization_slug))
    if UtilizationHour.objects.filter(cluster__in=clusters).exists():
        return UtilizationHour.objects.filter(cluster__in=clusters).count()
    for cluster in clusters:
        # As many GPUs as the cluster: its health page counts the same GPUs as before.
        Node.objects.get_or_create(
            cluster=cluster, name=NODE, defaults={"gpus": cluster.total_gpus}
        )
    with connection.cursor() as cursor:
        # Two million rows at once: the day-sum triggers are set aside and the day sums
        # written by one GROUP BY, which is what the triggers would have summed row by row.
        cursor.execute("ALTER TABLE scheduler_utilizationhour DISABLE TRIGGER USER")
        try:
            cursor.execute(
                INSERT, [NODE, RunLane.CHARGED, [c.pk for c in clusters], TELEMETRY_SHARE]
            )
            cursor.execute(DAY_SUMS, [[c.pk for c in clusters]])
        finally:
            cursor.execute("ALTER TABLE scheduler_utilizationhour ENABLE TRIGGER USER")
        # What autovacuum does to a live table soon after: statistics, and the visibility
        # map that lets the pages' sums read the index alone.
        cursor.execute("VACUUM ANALYZE scheduler_utilizationhour")
        cursor.execute("VACUUM ANALYZE scheduler_utilizationday")
    _idle_runs(clusters)
    return UtilizationHour.objects.filter(cluster__in=clusters).count()


def _idle_runs(clusters: list[Cluster]) -> None:
    """Open runs the idle rule has marked, spread over projects with telemetry."""
    now = timezone.now()
    projects = list(
        Project.objects.filter(program__organization__clusters__in=clusters)
        .distinct()
        .order_by("id")
    )
    projects = [p for p in projects if p.pk % 10 < TELEMETRY_SHARE][:IDLE_RUNS]
    for index, project in enumerate(projects):
        cluster = clusters[index % len(clusters)]
        started = now - timedelta(hours=3 + index)
        workload = Workload.objects.create(
            project=project,
            cluster=cluster,
            name=f"notebook-{index}",
            gpus=1,
            min_runtime_seconds=600,
            state=WorkloadState.RUNNING,
            submitted_at=started,
            first_started_at=started,
        )
        Run.objects.create(
            workload=workload,
            attempt=1,
            project=project,
            cluster=cluster,
            gpus=1,
            lane=RunLane.CHARGED,
            started_at=started,
            accounted_until=now,
            idle_since=now - timedelta(minutes=40 + 7 * index),
        )
