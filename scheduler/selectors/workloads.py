"""Reads of workloads, runs and cycles for pages and the API."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import (
    Count,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce

from governance.models import Cluster
from scheduler.choices import NodeState, WorkloadState
from scheduler.models import Node, ProjectStanding, Run, SchedulingCycle, Workload


def visible_workloads(vis) -> QuerySet[Workload]:
    """Workloads of the projects ``vis`` sees (the one rule for lists, details and pages)."""
    return Workload.objects.filter(project__in=vis.projects())


def with_standing(workloads: QuerySet[Workload]) -> QuerySet[Workload]:
    """``workloads`` with ``standing_phrase``: where each one's project stands on its
    cluster, as the last cycle said it (the first words of ``Workload.reason``), read in the
    same query instead of once per workload."""
    return workloads.annotate(
        standing_phrase=Subquery(
            ProjectStanding.objects.filter(
                cluster_id=OuterRef("cluster_id"), project_id=OuterRef("project_id")
            ).values("phrase")[:1]
        )
    )


def visible_workloads_with_runs(vis) -> QuerySet[Workload]:
    """``visible_workloads`` with what a workload's page shows: project, cluster, submitter,
    the project's standing (``with_standing``) and its runs, latest attempt first, with the
    project of whoever preempted them."""
    return (
        with_standing(visible_workloads(vis))
        .select_related("project", "cluster", "submitted_by")
        .prefetch_related(
            Prefetch(
                "runs",
                queryset=Run.objects.order_by("-attempt").select_related(
                    "preempted_by__project__program"
                ),
            )
        )
    )


def may_cancel(vis, workload: Workload) -> bool:
    """The submitter, a PI of the workload's project, or an org admin of its organization."""
    return (
        (vis.user_id is not None and workload.submitted_by_id == vis.user_id)
        or workload.project_id in vis.pi_project_ids
        or workload.cluster.organization_id in vis.admin_org_ids
    )


ANOTHER_PROJECT = "another project"


def run_stop_shown(vis, run: Run) -> tuple[Workload | None, str]:
    """The workload that preempted ``run`` and why the run was stopped, as ``vis`` may see
    them (the one rule for pages, API and notifications).

    The engine's explanation names projects by their key (``program/project``); when the
    reader may not see the preemptor's project, the preemptor is not given and its key
    reads "another project". ``vis=None``: a reader who sees only the run's own project.
    """
    preemptor = run.preempted_by
    text = run.stop_explanation or ""
    if preemptor is None:
        return None, text
    project = preemptor.project
    if (vis is None and project.pk == run.project_id) or (
        vis is not None and vis.sees_project(project)
    ):
        return preemptor, text
    key = f"{project.program.slug}/{project.slug}"
    text = text.replace(f"project {key}", ANOTHER_PROJECT).replace(key, ANOTHER_PROJECT)
    return None, text


def nodes_with_usage(queryset):
    """Nodes annotated with the GPUs and the number of runs still open on them."""
    open_runs = Q(run_nodes__run__ended_at__isnull=True)
    return queryset.select_related("cluster").annotate(
        gpus_in_use=Coalesce(
            Sum("run_nodes__gpus", filter=open_runs), Value(0), output_field=IntegerField()
        ),
        running=Count("run_nodes", filter=open_runs),
    )


def workload_preemption_history(*, workload: Workload) -> QuerySet[Run]:
    """Every run of ``workload``, first start first, with its end reason and preemptor."""
    return Run.objects.filter(workload=workload).select_related("preempted_by").order_by("attempt")


@dataclass
class ClusterLiveState:
    """What an operator page shows about a cluster right now."""

    nodes: list[Node]
    gpus: int
    healthy_gpus: int
    allocated_gpus: int
    pending: int
    running: int
    latest_cycle: SchedulingCycle | None


def cluster_live_state(*, cluster: Cluster) -> ClusterLiveState:
    """Nodes, GPU counts, queue sizes and the latest cycle of ``cluster``. Four queries."""
    nodes = list(Node.objects.filter(cluster=cluster).order_by("name"))
    counts = Workload.objects.filter(cluster=cluster).aggregate(
        pending=Count("id", filter=Q(state=WorkloadState.PENDING)),
        running=Count("id", filter=Q(state=WorkloadState.RUNNING)),
    )
    allocated = (
        Run.objects.filter(cluster=cluster, ended_at__isnull=True).aggregate(t=Sum("gpus"))["t"]
        or 0
    )
    return ClusterLiveState(
        nodes=nodes,
        gpus=sum(n.gpus for n in nodes),
        healthy_gpus=sum(n.gpus for n in nodes if n.state == NodeState.HEALTHY),
        allocated_gpus=allocated,
        pending=counts["pending"],
        running=counts["running"],
        latest_cycle=SchedulingCycle.objects.filter(cluster=cluster)
        .order_by("-started_at", "-id")
        .first(),
    )
