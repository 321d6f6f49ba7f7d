"""The daily usage cache that reports and dashboards read, and how far it reaches."""

from __future__ import annotations

import uuid

from django.db import models

from governance.models.tree import Cluster, Project


class UsageDay(models.Model):
    """Daily cache of the hourly usage rollup (``scheduler.models.UsageHour``), for reports.

    One row per (cluster, project, UTC day), made from the 24 hourly rows by
    ``governance.services.reports.usage_days_refresh`` once the day is closed (accounted
    past its end), so it never changes afterwards. Besides the plain sums it keeps the
    hour-by-hour figures a sum cannot give back: owed (Σ min(entitled, demand)), hourly
    delivered (Σ min(charged, owed)) and the charged time of hours with no entitlement.
    Why: a month of hourly rows for 300 projects on 2 clusters is 432 k rows, a year 5.3 M;
    the finance report and the dashboards read 24 x fewer rows here. Reads use it only for
    days below ``UsageDayCursor.until`` and the hourly rows for the rest, so the figures are
    the same with or without the cache.

    ``through`` is empty for a whole day. The day in progress is also kept, as rows summing
    its hours from midnight up to ``through`` (the hours accounting will not change again):
    readers take them when ``UsageDayCursor.open_through`` names that ``through``, and the
    later hours from the hourly rows, so a dashboard of today reads an hour or two of hourly
    rows instead of up to 24. Each refresh adds the new rows before it drops those of the
    ``through`` before last: a read that saw the previous cursor still finds its rows.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    through = models.DateTimeField(null=True, blank=True)
    budgeted_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    burst_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    free_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    entitled_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    demand_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    owed_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)
    hourly_owed_delivered_gpu_seconds = models.DecimalField(
        max_digits=24, decimal_places=6, default=0
    )
    no_share_budgeted_gpu_seconds = models.DecimalField(max_digits=24, decimal_places=6, default=0)

    class Meta:
        ordering = ["day", "project_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "project", "day"],
                condition=models.Q(through__isnull=True),
                name="usage_day_unique",
            ),
            models.UniqueConstraint(
                fields=["cluster", "project", "day", "through"],
                condition=models.Q(through__isnull=False),
                name="usage_day_part_unique",
            ),
        ]
        indexes = [
            # Reports and dashboards: every project of a cluster over a range of days.
            models.Index(fields=["cluster", "day"], name="usage_day_range"),
        ]

    def __str__(self) -> str:
        part = f" until {self.through:%H:%M}" if self.through else ""
        return f"{self.project_id} @ {self.day:%Y-%m-%d}{part}"


class UsageDayCursor(models.Model):
    """Days before ``until`` of one cluster are in ``UsageDay`` (one row per cluster), and
    the hours of day ``until`` before ``open_through`` (when set) in its rows with that
    ``through``. ``generation`` changes whenever usage the cache holds, or hours accounting
    had finished, were written again (``usage_days_reopen``) and with a new cursor: a figure
    kept under the cursor's state is then never taken again."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, related_name="+")
    until = models.DateField()
    open_through = models.DateTimeField(null=True, blank=True)
    generation = models.UUIDField(default=uuid.uuid4)

    def __str__(self) -> str:
        return f"{self.cluster_id} daily usage until {self.until}"
