"""The rows the usage selectors return: one node's figures over a period, one chart bucket.

Amounts are exact ``Decimal`` GPU-seconds as the rollups store them; the ``*_gpu_hours``
properties divide by 3600 for display. The words (owed, charged, burst, unbudgeted, delivery
ratio) are defined in ``governance.selectors.usage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

ZERO = Decimal("0")
SECONDS_PER_HOUR = Decimal("3600")

LEVELS = ("organization", "program", "project")


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
    def owed_delivered_gpu_hours(self) -> Decimal:
        """The part of what was owed that was delivered (what the delivery ratio counts)."""
        return _hours(self.owed_delivered_gpu_seconds)

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


def add_project_sums(row: UsageRow, sums: dict) -> None:
    """Add one (project, cluster) aggregate to a row; min(charged, owed) is taken here."""
    budgeted = sums["budgeted"] or ZERO
    burst = sums["burst"] or ZERO
    free = sums["free"] or ZERO
    owed = sums["owed"] or ZERO
    row.budgeted_gpu_seconds += budgeted
    row.burst_gpu_seconds += burst
    row.free_gpu_seconds += free
    row.entitled_gpu_seconds += sums["entitled"] or ZERO
    row.demand_gpu_seconds += sums["demand"] or ZERO
    row.owed_gpu_seconds += owed
    row.unbudgeted_gpu_seconds += free + burst + (sums["no_share_budgeted"] or ZERO)
    row.owed_delivered_gpu_seconds += min(budgeted + burst, owed)
    row.hourly_owed_delivered_gpu_seconds += sums["hourly_owed_delivered"] or ZERO


_SUMMED_FIELDS = (
    "budgeted_gpu_seconds",
    "burst_gpu_seconds",
    "free_gpu_seconds",
    "entitled_gpu_seconds",
    "demand_gpu_seconds",
    "owed_gpu_seconds",
    "unbudgeted_gpu_seconds",
    "owed_delivered_gpu_seconds",
    "hourly_owed_delivered_gpu_seconds",
)


def add_row(target: UsageRow, source: UsageRow) -> None:
    """Add every summed amount of ``source`` into ``target`` (a child into its parent)."""
    for name in _SUMMED_FIELDS:
        setattr(target, name, getattr(target, name) + getattr(source, name))
