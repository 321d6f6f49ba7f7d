"""The charging rule, the hourly rollup it reads and writes, and the entitlement row: the one
place both the live loop's accounting (``usage``) and usage imported from another scheduler
(``usage_external``) charge by.

Charging rule (docs/live-loop.md, "Charging"):
- a run of a free-lane workload (minimum runtime 0) is charged ``free``;
- otherwise a GPU-second is ``budgeted`` while the project's charges in its hour stay within
  the entitlement accrued in that hour up to the end of the interval (effective share x the
  cluster's healthy GPUs x the seconds so far, the same seconds the ``entitled`` figure
  counts), and ``burst`` beyond it: an hour's entitlement is not spent before it accrues, so
  burst is what ran above the entitlement of the same seconds, in a partial hour too.
  Intervals are charged in time order (then run id), so within an hour earlier usage is
  budgeted first; an interval that crosses the cap is split into a budgeted and a burst
  ledger row at the exact microsecond. A project with no share has cap 0: all its charged
  usage is burst (unbudgeted).

Every interval lies inside one UTC hour, so the hourly rollup (``UsageHour``) is a plain sum
of ledger rows, updated incrementally (``UsageHourRollup``), never by rescanning the ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, Decimal

from scheduler.choices import Charge
from scheduler.models import EntitlementRecord, UsageHour, UsageRecord

HOUR = timedelta(hours=1)
MICROSECOND = timedelta(microseconds=1)
SIX_PLACES = Decimal("0.000001")
ZERO = Decimal(0)
ROLLUP_FIELDS = (
    "budgeted_gpu_seconds",
    "burst_gpu_seconds",
    "free_gpu_seconds",
    "entitled_gpu_seconds",
    "demand_gpu_seconds",
)
CHARGE_FIELD = {
    Charge.BUDGETED: "budgeted_gpu_seconds",
    Charge.BURST: "burst_gpu_seconds",
    Charge.FREE: "free_gpu_seconds",
}


def hour_pieces(start: datetime, end: datetime) -> Iterator[tuple[datetime, datetime, datetime]]:
    """Split ``[start, end)`` at UTC hour boundaries: ``(hour, piece start, piece end)``."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    while start < end:
        hour = start.replace(minute=0, second=0, microsecond=0)
        stop = min(end, hour + HOUR)
        yield hour, start, stop
        start = stop


def gpu_seconds(gpus: int, start: datetime, end: datetime) -> Decimal:
    """Exactly ``gpus`` x (end - start) in seconds, to the microsecond."""
    return Decimal(gpus * ((end - start) // MICROSECOND)).scaleb(-6)


def rate_seconds(percent: Decimal, gpus: int, start: datetime, end: datetime) -> Decimal:
    """``percent`` % of ``gpus`` GPUs over ``[start, end)``, in GPU-seconds (6 places, down)."""
    return (percent / 100 * gpu_seconds(gpus, start, end)).quantize(SIX_PLACES, ROUND_DOWN)


@dataclass
class UsageHourRollup:
    """The ``UsageHour`` rows one accounting pass touches, locked and updated in memory."""

    cluster_id: int
    rows: dict[tuple[int, datetime], UsageHour]
    new: set[tuple[int, datetime]]

    @classmethod
    def load(cls, cluster_id: int, keys: Iterable[tuple[int, datetime]]) -> UsageHourRollup:
        """Lock the rows of ``keys`` (project, hour) that exist; start the others at zero."""
        rollup = cls(cluster_id, {}, set())
        rollup.extend(keys)
        return rollup

    def extend(self, keys: Iterable[tuple[int, datetime]]) -> None:
        """Also hold the rows of ``keys``: lock those that exist, start the others at zero.
        Rows already held keep their figures (changes not yet saved included)."""
        keys = set(keys) - self.rows.keys()
        if not keys:
            return
        existing = UsageHour.objects.select_for_update().filter(
            cluster_id=self.cluster_id,
            hour__in={hour for _, hour in keys},
            project_id__in={project for project, _ in keys},
        )
        for row in existing:
            key = (row.project_id, row.hour.astimezone(UTC))
            if key in keys:
                self.rows[key] = row
                keys.discard(key)
        for key in keys:
            self.rows[key] = UsageHour(cluster_id=self.cluster_id, project_id=key[0], hour=key[1])
            self.new.add(key)

    def add(self, project_id: int, hour: datetime, field: str, amount: Decimal) -> None:
        """Add ``amount`` to one figure of a row."""
        row = self.rows[(project_id, hour)]
        setattr(row, field, Decimal(getattr(row, field)) + amount)

    def budgeted(self, project_id: int, hour: datetime) -> Decimal:
        """What the project was charged as budgeted in ``hour`` so far."""
        return Decimal(self.rows[(project_id, hour)].budgeted_gpu_seconds)

    def entitled(self, project_id: int, hour: datetime) -> Decimal:
        """The project's entitlement in ``hour`` so far."""
        return Decimal(self.rows[(project_id, hour)].entitled_gpu_seconds)

    def save(self) -> None:
        """Write the new rows and the changed ones."""
        created = [self.rows[k] for k in self.new]
        existing = [r for k, r in self.rows.items() if k not in self.new]
        UsageHour.objects.bulk_create(created)
        UsageHour.objects.bulk_update(existing, ROLLUP_FIELDS)


def charge_split(
    rollup: UsageHourRollup,
    *,
    project_id: int,
    hour: datetime,
    start: datetime,
    end: datetime,
    gpus: int,
    free: bool,
    accrued: Decimal,
) -> list[tuple[datetime, datetime, str]]:
    """The charging rule for ``[start, end)`` inside ``hour``: ``(start, end, charge)`` parts.

    Free-lane time is ``free``; otherwise ``budgeted`` up to ``accrued`` — the entitlement
    the project has accrued in ``hour`` by ``end`` (the caller's to work out, on the same
    seconds the ``entitled`` figure counts) — and ``burst`` above it. Burst charged earlier in
    the hour does not use up entitlement accrued later, so a project steadily above its
    entitlement is budgeted exactly its entitlement after every pass. The room is read from
    ``rollup``, so the caller must add each part to it (as its ``record`` does) before asking
    for the next piece. Used by the live loop's accounting and by usage imported from another
    scheduler alike: one rule.
    """
    if free:
        return [(start, end, Charge.FREE)]
    room = accrued - rollup.budgeted(project_id, hour)
    if gpu_seconds(gpus, start, end) <= room:
        return [(start, end, Charge.BUDGETED)]
    # Split at the last microsecond that still fits under the cap.
    split = start + MICROSECOND * int(max(room, ZERO).scaleb(6) // gpus)
    budgeted = [(start, split, Charge.BUDGETED)] if split > start else []
    return [*budgeted, (split, end, Charge.BURST)]


@dataclass
class EntitlementPass:
    """The entitlement one pass wrote, per (project, hour): ``(start, end, GPU-seconds)``
    pieces. ``accrued`` says how much of an hour's entitlement had accrued by an instant."""

    pieces: dict[tuple[int, datetime], list[tuple[datetime, datetime, Decimal]]] = field(
        default_factory=dict
    )

    def accrued(self, rollup: UsageHourRollup, project_id: int, hour: datetime, at: datetime):
        """The hour's entitlement in ``rollup`` (this pass included) less what this pass
        added for seconds after ``at``: what had accrued by ``at``. Never more than the
        rollup holds, so budgeted never passes entitled."""
        entitled = rollup.entitled(project_id, hour)
        for start, end, amount in self.pieces.get((project_id, hour), ()):
            if end > at:
                later = (end - max(start, at)) // MICROSECOND
                entitled -= (amount * later / ((end - start) // MICROSECOND)).quantize(SIX_PLACES)
        return entitled


def entitlement_record(
    rollup: UsageHourRollup,
    *,
    cluster_id: int,
    project_id: int,
    hour: datetime,
    start: datetime,
    end: datetime,
    share: Decimal,
    healthy_gpus: int,
    demand_gpus: int,
    demand_gpu_seconds: Decimal,
) -> EntitlementRecord:
    """The (unsaved) entitlement row of one project for ``[start, end)``, added to ``rollup``.

    Entitled = effective share x healthy GPUs over the interval; demand is the caller's.
    """
    entitled = rate_seconds(share, healthy_gpus, start, end)
    rollup.add(project_id, hour, "entitled_gpu_seconds", entitled)
    rollup.add(project_id, hour, "demand_gpu_seconds", demand_gpu_seconds)
    return EntitlementRecord(
        project_id=project_id,
        cluster_id=cluster_id,
        interval_start=start,
        interval_end=end,
        effective_share=share,
        healthy_gpus=healthy_gpus,
        demand_gpus=demand_gpus,
        entitled_gpu_seconds=entitled,
        demand_gpu_seconds=demand_gpu_seconds,
    )


def usage_row(
    rollup: UsageHourRollup,
    *,
    hour: datetime,
    project_id: int,
    cluster_id: int,
    start: datetime,
    end: datetime,
    gpus: int,
    charge: str,
    **whose: object,
) -> UsageRecord:
    """The (unsaved) ledger row of one charged part ``[start, end)`` inside ``hour``, added to
    ``rollup``. ``whose`` names whose usage it is: ``run_id=`` for a run of the live loop,
    ``source=`` and ``external_id=`` for a job of another scheduler."""
    amount = gpu_seconds(gpus, start, end)
    rollup.add(project_id, hour, CHARGE_FIELD[charge], amount)
    return UsageRecord(
        project_id=project_id,
        cluster_id=cluster_id,
        interval_start=start,
        interval_end=end,
        gpus=gpus,
        gpu_seconds=amount,
        charge=charge,
        **whose,
    )
