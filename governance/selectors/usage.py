"""Owed vs delivered: usage figures per node of the budget tree, read from the hourly rollup.

Everything here reads ``scheduler.models.UsageHour`` (budgeted, burst, free, entitled and
demand GPU-seconds per cluster, project and UTC hour) and is scoped by the visibility
selector. Amounts are exact ``Decimal`` GPU-seconds as stored; the ``*_gpu_hours`` properties
divide by 3600 for display. Definitions (DESIGN.md, "Words"):

- owed = Σ over hours of min(entitled, demand);
- charged (= delivered) = budgeted + burst (the free lane is not charged);
- burst = charged above entitlement in an hour (the ledger already splits it);
- unbudgeted = free + burst + charged time in hours where the project had no entitlement
  (a project with no share is charged as burst by the ledger, so this is free + burst for
  ledger-made data);
- delivery ratio = Σ over projects min(charged, owed) ÷ Σ owed (for one project:
  min(charged, owed) ÷ owed), ``None`` when owed is 0;
- hourly delivery ratio = Σ over projects and hours min(charged, owed) ÷ Σ owed.

Periods are the hours whose start lies in ``[start, end)``; pass whole UTC hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from governance.models import Cluster, Organization, Program, Project

ZERO = Decimal("0")
SECONDS_PER_HOUR = Decimal("3600")

LEVELS = ("organization", "program", "project")
BUCKETS = ("hour", "day")


def _hours(seconds: Decimal) -> Decimal:
    return seconds / SECONDS_PER_HOUR


@dataclass
class UsageRow:
    """Usage figures of one node of the tree over a period, on one cluster or summed over all.

    ``key`` is ``(kind, id)``; ``parent`` the parent's key (``None`` for an organization).
    Amounts are exact GPU-seconds (``Decimal``). A parent's amounts are the sums of its
    children's, exactly: ``owed_delivered`` and ``hourly_owed_delivered`` are summed per
    project first (min(charged, owed) over the period, resp. per hour), so a parent's
    delivery ratio is Σ min(charged, owed) ÷ Σ owed over its projects, as DESIGN defines the
    org-wide figure.
    """

    kind: str
    id: int
    name: str
    parent: tuple[str, int] | None
    cluster_id: int | None
    budgeted_gpu_seconds: Decimal = ZERO
    burst_gpu_seconds: Decimal = ZERO
    free_gpu_seconds: Decimal = ZERO
    entitled_gpu_seconds: Decimal = ZERO
    demand_gpu_seconds: Decimal = ZERO
    owed_gpu_seconds: Decimal = ZERO
    unbudgeted_gpu_seconds: Decimal = ZERO
    owed_delivered_gpu_seconds: Decimal = ZERO  # Σ projects min(charged, owed)
    hourly_owed_delivered_gpu_seconds: Decimal = ZERO  # Σ projects Σ hours min(charged, owed)

    @property
    def key(self) -> tuple[str, int]:
        """``(kind, id)``, unique across the three levels."""
        return (self.kind, self.id)

    @property
    def depth(self) -> int:
        """0 for an organization, 1 for a program, 2 for a project (for indenting)."""
        return LEVELS.index(self.kind)

    @property
    def charged_gpu_seconds(self) -> Decimal:
        """Budgeted + burst: what the node's workloads were charged (= delivered)."""
        return self.budgeted_gpu_seconds + self.burst_gpu_seconds

    @property
    def total_gpu_seconds(self) -> Decimal:
        """Every GPU-second used: budgeted + burst + free (what the ledger sums to)."""
        return self.budgeted_gpu_seconds + self.burst_gpu_seconds + self.free_gpu_seconds

    @property
    def delivery_ratio(self) -> Decimal | None:
        """Σ min(charged, owed) ÷ Σ owed over the node's projects; ``None`` when nothing owed."""
        if not self.owed_gpu_seconds:
            return None
        return self.owed_delivered_gpu_seconds / self.owed_gpu_seconds

    @property
    def hourly_delivery_ratio(self) -> Decimal | None:
        """Σ over hours min(charged, owed) ÷ Σ owed (no catch-up); ``None`` when nothing owed."""
        if not self.owed_gpu_seconds:
            return None
        return self.hourly_owed_delivered_gpu_seconds / self.owed_gpu_seconds

    # GPU-hours for display (seconds ÷ 3600; GPU-hours are not exact decimals).
    @property
    def owed_gpu_hours(self) -> Decimal:
        return _hours(self.owed_gpu_seconds)

    @property
    def charged_gpu_hours(self) -> Decimal:
        return _hours(self.charged_gpu_seconds)

    delivered_gpu_hours = charged_gpu_hours

    @property
    def budgeted_gpu_hours(self) -> Decimal:
        return _hours(self.budgeted_gpu_seconds)

    @property
    def burst_gpu_hours(self) -> Decimal:
        return _hours(self.burst_gpu_seconds)

    @property
    def free_gpu_hours(self) -> Decimal:
        return _hours(self.free_gpu_seconds)

    @property
    def unbudgeted_gpu_hours(self) -> Decimal:
        return _hours(self.unbudgeted_gpu_seconds)

    @property
    def entitled_gpu_hours(self) -> Decimal:
        return _hours(self.entitled_gpu_seconds)

    @property
    def total_gpu_hours(self) -> Decimal:
        return _hours(self.total_gpu_seconds)


@dataclass
class UsagePoint:
    """One bucket (hour or UTC day) of a node's usage for the time-series chart.

    ``delivered`` is charged (budgeted + burst). Exact GPU-seconds; ``*_gpu_hours`` for
    plotting.
    """

    start: datetime
    entitled_gpu_seconds: Decimal = ZERO
    owed_gpu_seconds: Decimal = ZERO
    delivered_gpu_seconds: Decimal = ZERO
    burst_gpu_seconds: Decimal = ZERO
    free_gpu_seconds: Decimal = ZERO
    demand_gpu_seconds: Decimal = ZERO

    @property
    def entitled_gpu_hours(self) -> Decimal:
        return _hours(self.entitled_gpu_seconds)

    @property
    def owed_gpu_hours(self) -> Decimal:
        return _hours(self.owed_gpu_seconds)

    @property
    def delivered_gpu_hours(self) -> Decimal:
        return _hours(self.delivered_gpu_seconds)

    @property
    def demand_gpu_hours(self) -> Decimal:
        return _hours(self.demand_gpu_seconds)


def usage_by_tree_node(
    *, visibility, cluster: Cluster | None, start: datetime, end: datetime
) -> list[UsageRow]:
    """One row per node of the tree the user wholly sees, depth-first, with usage figures.

    ``cluster`` None sums every visible cluster (``cluster_id`` None on the rows). A node is
    a row only when the user sees its whole subtree (org admin/finance: the organization and
    below; program manager: their program and its projects; PI/researcher: their project),
    so every parent row is the exact sum of its children's rows. Projects with no usage in
    the period still get a (zero) row. Two queries plus the visibility ones.
    """
    raise NotImplementedError


def usage_timeseries(
    *,
    visibility,
    cluster: Cluster | None,
    start: datetime,
    end: datetime,
    node: Organization | Program | Project | None = None,
    bucket: str = "hour",
) -> list[UsagePoint]:
    """Delivered (charged) vs entitled vs owed of ``node`` per hour or UTC day, oldest first.

    ``node`` None: everything the user wholly sees. A node the user cannot wholly see raises
    ``PermissionDenied`` (views resolve it through the visibility selector first: a 404).
    Owed per bucket = Σ over projects and hours of min(entitled, demand). Buckets with no
    rollup rows are filled with zeros, so the x axis is continuous.
    """
    raise NotImplementedError
