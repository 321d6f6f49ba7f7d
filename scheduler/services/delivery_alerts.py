"""Teams that got less than they were owed, or whose month passed a share of its entitlement:
their PIs and program managers are told.

Over the last 24 complete hours of a cluster's hourly rollups, a project's owed GPU-seconds are
Σ min(entitled, demand) per hour and what it got of them Σ min(budgeted + burst, owed) per
hour: the hourly delivery ratio of the dashboards, over one day. Below
``settings.DELIVERY_ALERT_RATIO`` (90 % by default) with at least one GPU-hour owed, the
project's PIs and its program's managers get one notice a day (site time) while it stays
below.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from governance.choices import NotificationKind, Role
from governance.models import Cluster, Project, RoleAssignment
from governance.services.notifications import Notice, notify
from scheduler.models import UsageHour

# Less owed than this in a day is noise, not a team left waiting.
MIN_OWED_GPU_SECONDS = Decimal(3600)


def delivery_alerts_check(*, now: datetime | None = None) -> int:
    """Tell the teams below the delivery threshold over the last 24 hours; returns how many
    projects were below (told now or earlier today)."""
    now = now or timezone.now()
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=24)
    ratio = Decimal(str(settings.DELIVERY_ALERT_RATIO))
    owed: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    got: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    rows = UsageHour.objects.filter(hour__gte=start, hour__lt=end).values_list(
        "cluster_id", "project_id", "entitled_gpu_seconds", "demand_gpu_seconds",
        "budgeted_gpu_seconds", "burst_gpu_seconds",
    )  # fmt: skip
    for cluster_id, project_id, entitled, demand, budgeted, burst in rows:
        hour_owed = min(entitled, demand)
        owed[(cluster_id, project_id)] += hour_owed
        got[(cluster_id, project_id)] += min(budgeted + burst, hour_owed)
    below = [
        key
        for key, amount in owed.items()
        if amount >= MIN_OWED_GPU_SECONDS and got[key] < ratio * amount
    ]
    if not below:
        return 0
    projects = Project.objects.select_related("program").in_bulk({p for _, p in below})
    clusters = Cluster.objects.in_bulk({c for c, _ in below})
    day = timezone.localdate(now)
    for cluster_id, project_id in sorted(below):
        project, cluster = projects[project_id], clusters[cluster_id]
        share = got[(cluster_id, project_id)] / owed[(cluster_id, project_id)]
        hours_owed = owed[(cluster_id, project_id)] / 3600
        hours_got = got[(cluster_id, project_id)] / 3600
        _tell_team(
            project,
            cluster,
            kind=NotificationKind.TEAM_UNDER_DELIVERED,
            title=(
                f"{project.name} got {share:.0%} of the GPU-hours it was owed on "
                f"{cluster.name} in the last 24 hours"
            ),
            body=(
                f"Owed {hours_owed:,.1f} GPU-hours (its entitlement, as far as it had "
                f"work waiting), got {hours_got:,.1f}. The dashboard shows hour by hour "
                "where the rest went."
            ),
            link=reverse("dashboards:delivery")
            + "?"
            + urlencode({"cluster": cluster.pk, "node": f"project-{project.pk}"}),
            event_key=f"delivery:{cluster.pk}:{project.pk}:{day.isoformat()}",
            now=now,
        )
    return len(below)


def month_usage_check(*, now: datetime | None = None) -> int:
    """Tell the teams whose charged GPU-hours this month (site time) passed a threshold of
    ``settings.MONTH_USAGE_THRESHOLDS`` (80 % and 100 % by default) of their entitlement for
    the whole month: entitled so far, plus the last hour's entitled rate for the hours left.
    Each threshold is told once per month. Returns how many (project, threshold) passed."""
    now = now or timezone.now()
    local = timezone.localtime(now)
    month_start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    next_month = (month_start + timedelta(days=32)).replace(day=1)
    end = now.replace(minute=0, second=0, microsecond=0)
    hours_left = Decimal(max(0, (next_month - end) // timedelta(hours=1)))
    charged: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    entitled: dict[tuple[int, int], Decimal] = defaultdict(Decimal)
    last: dict[tuple[int, int], tuple[datetime, Decimal]] = {}
    rows = UsageHour.objects.filter(hour__gte=month_start, hour__lt=end).values_list(
        "cluster_id", "project_id", "hour", "entitled_gpu_seconds", "budgeted_gpu_seconds",
        "burst_gpu_seconds",
    )  # fmt: skip
    for cluster_id, project_id, hour, ent, budgeted, burst in rows:
        key = (cluster_id, project_id)
        charged[key] += budgeted + burst
        entitled[key] += ent
        if key not in last or hour > last[key][0]:
            last[key] = (hour, ent)
    passed = []
    for key, used in charged.items():
        month = entitled[key] + last[key][1] * hours_left
        if month < MIN_OWED_GPU_SECONDS:
            continue  # no entitlement to speak of (unbudgeted): nothing to pass
        for threshold in settings.MONTH_USAGE_THRESHOLDS:
            if used >= Decimal(str(threshold)) * month:
                passed.append((key, threshold, used, month))
    if not passed:
        return 0
    projects = Project.objects.select_related("program").in_bulk({k[1] for k, *_ in passed})
    clusters = Cluster.objects.in_bulk({k[0] for k, *_ in passed})
    for (cluster_id, project_id), threshold, used, month in passed:
        project, cluster = projects[project_id], clusters[cluster_id]
        _tell_team(
            project,
            cluster,
            kind=NotificationKind.MONTH_USAGE,
            title=(
                f"{project.name} has used {threshold:.0%} of its entitlement for "
                f"{local:%B %Y} on {cluster.name}"
            ),
            body=(
                f"{used / 3600:,.1f} GPU-hours charged so far of the "
                f"{month / 3600:,.1f} its share of the cluster gives it over the whole "
                "month; what it runs above its share at a given hour is burst, shown as "
                "such in the usage report."
            ),
            link=reverse("reports:usage") + f"?period=month&month={local:%Y-%m}",
            event_key=(f"month-usage:{cluster.pk}:{project.pk}:{local:%Y-%m}:{threshold}"),
            now=now,
        )
    return len(passed)


def _tell_team(
    project: Project,
    cluster: Cluster,
    *,
    kind: str,
    title: str,
    body: str,
    link: str,
    event_key: str,
    now: datetime,
) -> None:
    """Tell ``project``'s team leads (``_team_leads``) about its use of ``cluster``."""
    notify(
        recipients=_team_leads(project),
        notice=Notice(
            kind=kind,
            title=title,
            body=body,
            link=link,
            organization_id=cluster.organization_id,
            event_key=event_key,
        ),
        now=now,
    )


def _team_leads(project: Project):
    """The project's PIs and its program's managers."""
    ids = RoleAssignment.objects.filter(
        Q(role=Role.PI, project=project) | Q(role=Role.PROGRAM_MANAGER, program=project.program)
    ).values_list("user_id", flat=True)
    return get_user_model().objects.filter(pk__in=ids, is_active=True).order_by("pk")
