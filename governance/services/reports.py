"""Writes around the usage reports: the daily usage cache and the monthly e-mail.

The report itself is a read (``governance.selectors.reports.usage_report``); sending it is a
side effect that must happen once per organization and month, whatever the beat or a retry
does, so each sending is recorded in ``MonthlyReportDelivery`` in the same transaction.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from governance.choices import NotificationKind, Role
from governance.models import (
    Cluster,
    MonthlyReportDelivery,
    Organization,
    RoleAssignment,
    UsageDay,
    UsageDayCursor,
)
from governance.reports.columns import report_filename
from governance.reports.xlsx_writer import report_xlsx
from governance.selectors.reports import report_period_of_month, usage_report
from governance.selectors.visibility import Visibility
from governance.services.notifications import Notice, notify

logger = logging.getLogger(__name__)

XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


# One UsageDay row per (project, UTC day) from the hourly rollup of one cluster: whole days
# (``through`` empty) or the open day's hours up to ``through``. Written day by day, as they
# are read: a first roll of a year in project order left each day's rows on as many pages
# as projects (a month's report read 3,379 pages for 18,000 rows; 286 in day order).
_ROLL_DAYS_SQL = """
INSERT INTO {day_table}
    (cluster_id, project_id, day, through, budgeted_gpu_seconds, burst_gpu_seconds,
     free_gpu_seconds, entitled_gpu_seconds, demand_gpu_seconds, owed_gpu_seconds,
     hourly_owed_delivered_gpu_seconds, no_share_budgeted_gpu_seconds)
SELECT cluster_id, project_id, (hour AT TIME ZONE 'UTC')::date, %s::timestamptz,
       SUM(budgeted_gpu_seconds), SUM(burst_gpu_seconds), SUM(free_gpu_seconds),
       SUM(entitled_gpu_seconds), SUM(demand_gpu_seconds),
       SUM(LEAST(entitled_gpu_seconds, demand_gpu_seconds)),
       SUM(LEAST(budgeted_gpu_seconds + burst_gpu_seconds,
                 LEAST(entitled_gpu_seconds, demand_gpu_seconds))),
       SUM(CASE WHEN entitled_gpu_seconds = 0 THEN budgeted_gpu_seconds ELSE 0 END)
FROM {hour_table}
WHERE cluster_id = %s AND hour >= %s AND hour < %s
GROUP BY cluster_id, project_id, (hour AT TIME ZONE 'UTC')::date
ORDER BY 3, 2
ON CONFLICT {conflict} DO NOTHING
"""
_WHOLE_DAYS = "(cluster_id, project_id, day) WHERE through IS NULL"
_OPEN_DAY = "(cluster_id, project_id, day, through) WHERE through IS NOT NULL"


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def _roll(cluster: Cluster, start: datetime, end: datetime, through: datetime | None) -> None:
    """Insert the daily cache's rows of ``cluster``'s hours in ``[start, end)``: whole days
    (``through`` None) or the open day's hours before ``through``."""
    from scheduler.models import UsageHour

    sql = _ROLL_DAYS_SQL.format(
        day_table=UsageDay._meta.db_table,
        hour_table=UsageHour._meta.db_table,
        conflict=_WHOLE_DAYS if through is None else _OPEN_DAY,
    )
    with connection.cursor() as db:
        db.execute(sql, [through, cluster.pk, start, end])


def _open_through(final: datetime, until: date) -> datetime | None:
    """How far the open day ``until`` can be cached: up to ``final`` (the hour before which
    accounting will not write again) when that is inside the day, else not at all."""
    if final.date() == until and final > _midnight(until):
        return final
    return None


def usage_days_refresh(*, cluster: Cluster) -> int:
    """Roll ``cluster``'s closed days into the daily cache, and the open day's final hours;
    return how many whole days were added.

    A day is closed when usage accounting has passed its end by an hour
    (``AccountingCursor``): accounting only writes at or after its cursor, so the hourly
    rows of earlier hours never change again. The open day's rows are remade when that
    hour moves (once an hour); the rows they replace stay one refresh longer for a read
    that began before. Idempotent and safe to run concurrently (the cursor row is locked;
    rows already there are kept); reads nothing but the two cursors when there is nothing
    to roll. A no-op on SQLite (reports then read the hourly rows: the same figures, slower).
    """
    from scheduler.models import AccountingCursor, UsageHour

    if connection.vendor != "postgresql":
        return 0
    accounted = (
        AccountingCursor.objects.filter(cluster=cluster)
        .values_list("accounted_until", flat=True)
        .first()
    )
    if accounted is None:
        return 0
    # An hour of margin: the runs' ledger and the entitlement pass may be a moment apart.
    final = (accounted - timedelta(hours=1)).astimezone(UTC)
    final = final.replace(minute=0, second=0, microsecond=0)
    sealed = final.date()
    current = UsageDayCursor.objects.filter(cluster=cluster).values_list("until", "open_through")
    current = current.first()
    if current is not None:
        until, open_through = current
        if until >= sealed and open_through == _open_through(final, until):
            # Nothing to roll: no lock and no write (pages and the API call this on every read).
            return 0
    with transaction.atomic():
        cursor, created = UsageDayCursor.objects.select_for_update().get_or_create(
            cluster=cluster, defaults={"until": sealed}
        )
        if created:
            first = UsageHour.objects.filter(cluster=cluster).order_by("hour").first()
            cursor.until = min(first.hour.astimezone(UTC).date(), sealed) if first else sealed
        added = 0
        if cursor.until < sealed:
            _roll(cluster, _midnight(cursor.until), _midnight(sealed), None)
            added = (sealed - cursor.until).days
            cursor.until = sealed
        wanted = _open_through(final, cursor.until)
        if wanted != cursor.open_through:
            if wanted is not None:
                _roll(cluster, _midnight(cursor.until), wanted, wanted)
            # Keep the rows a read that saw the cursor before this refresh may still take.
            kept = [t for t in (wanted, cursor.open_through) if t is not None]
            UsageDay.objects.filter(cluster=cluster, through__isnull=False).exclude(
                through__in=kept
            ).delete()
            cursor.open_through = wanted
        cursor.save(update_fields=["until", "open_through"])
    return added


def usage_days_reopen(*, cluster_id: int, since: date) -> int:
    """Hourly usage was written for ``since`` (a late import of an external job): drop the
    cluster's cached days from ``since`` on (the open day's rows too) and move its cursor
    back there, so every reader takes those days from the hourly rows until
    ``usage_days_refresh`` rolls them again. Returns the cached rows dropped. Call it inside
    the transaction that wrote the hours."""
    cursor = UsageDayCursor.objects.select_for_update().filter(cluster_id=cluster_id).first()
    if cursor is None:
        return 0
    # Figures kept under the cursor's state may hold these hours, cached here or not.
    cursor.generation = uuid.uuid4()
    if cursor.until < since:
        cursor.save(update_fields=["generation"])
        return 0
    dropped, _ = UsageDay.objects.filter(cluster_id=cluster_id, day__gte=since).delete()
    cursor.until = since
    cursor.open_through = None
    cursor.save(update_fields=["until", "open_through", "generation"])
    return dropped


def usage_days_refresh_all() -> int:
    """``usage_days_refresh`` for every cluster; returns the days added in all."""
    return sum(usage_days_refresh(cluster=c) for c in Cluster.objects.order_by("id"))


def usage_days_rebuild(*, cluster: Cluster) -> int:
    """Drop and remake ``cluster``'s daily cache (after ``rebuild_usage`` or a data repair)."""
    with transaction.atomic():
        UsageDay.objects.filter(cluster=cluster).delete()
        UsageDayCursor.objects.filter(cluster=cluster).delete()
    return usage_days_refresh(cluster=cluster)


def previous_month(now: datetime) -> date:
    """The first day of the calendar month before ``now``'s (UTC)."""
    first_of_this = now.astimezone(UTC).date().replace(day=1)
    return (first_of_this - timedelta(days=1)).replace(day=1)


def finance_recipients(*, organization: Organization) -> list[str]:
    """E-mail addresses of the active finance users of ``organization`` (sorted, unique)."""
    emails = RoleAssignment.objects.filter(
        role=Role.FINANCE, organization=organization, user__is_active=True
    ).values_list("user__email", flat=True)
    return sorted({e for e in emails if e})


def report_monthly_send_one(
    *, organization: Organization, month: date, now: datetime | None = None
) -> MonthlyReportDelivery | None:
    """E-mail ``organization``'s usage report for ``month`` to its finance users, once.

    Returns the new delivery record, or ``None`` when it was sent before (a retry) or the
    organization has no finance user with an address. The record is inserted first and the
    mail sent inside the same transaction: a concurrent run waits on the unique row and then
    finds it; a failed send rolls the record back so the retry sends again.
    """
    now = now or timezone.now()
    month = month.replace(day=1)
    if MonthlyReportDelivery.objects.filter(organization=organization, month=month).exists():
        return None
    recipients = finance_recipients(organization=organization)
    if not recipients:
        logger.info("No finance user with an address in %s: no monthly report", organization)
        return None
    first, last = report_period_of_month(month)
    visibility = Visibility(
        user_id=None, roles=frozenset({Role.FINANCE}), finance_org_ids=frozenset({organization.pk})
    )
    report = usage_report(visibility=visibility, start=first, end=last, level="project")
    try:
        with transaction.atomic():
            delivery = MonthlyReportDelivery.objects.create(
                organization=organization,
                month=month,
                sent_at=now,
                recipients=recipients,
                total_gpu_seconds=report.totals.total_gpu_seconds,
            )
            message = EmailMessage(
                subject=f"{organization.name}: {report.title}",
                body=_body(report, organization),
                from_email=settings.DEFAULT_FROM_EMAIL,
                to=recipients,
            )
            message.attach(report_filename(report, "xlsx"), report_xlsx(report=report), XLSX_TYPE)
            message.send(fail_silently=False)
            _tell_finance(organization, month, report.title, now)
    except IntegrityError:
        return None  # another run recorded (and sent) it first
    return delivery


def _tell_finance(organization: Organization, month: date, title: str, now: datetime) -> None:
    """The finance users' notice that the month's report is ready (with the mailed one)."""
    users = (
        get_user_model()
        .objects.filter(roles__role=Role.FINANCE, roles__organization=organization, is_active=True)
        .distinct()
    )
    notify(
        recipients=users,
        notice=Notice(
            kind=NotificationKind.REPORT_READY,
            title=f"{organization.name}: {title} is ready",
            body="Also sent by e-mail, with the XLSX attached.",
            link=reverse("reports:usage") + f"?period=month&month={month:%Y-%m}",
            organization_id=organization.pk,
            event_key=f"report:{organization.pk}:{month:%Y-%m}",
        ),
        now=now,
    )


def report_monthly_send(
    *, month: date | None = None, now: datetime | None = None
) -> list[MonthlyReportDelivery]:
    """Send every organization's report for ``month`` (default: the month before ``now``).

    Idempotent: organizations already sent for that month are skipped.
    """
    now = now or timezone.now()
    month = month or previous_month(now)
    usage_days_refresh_all()
    sent = []
    for organization in Organization.objects.order_by("id"):
        delivery = report_monthly_send_one(organization=organization, month=month, now=now)
        if delivery is not None:
            sent.append(delivery)
    return sent


def _body(report, organization: Organization) -> str:
    totals = report.totals
    cost = (
        f"{totals.cost:,.2f} {report.currency}"
        if totals.cost is not None and report.currency not in (None, "mixed")
        else "not costed"
    )
    lines = [
        f"{report.title} for {organization.name} (UTC, {report.start} to {report.end}).",
        "",
        f"Budgeted GPU-hours: {totals.budgeted_gpu_hours:,.2f}",
        f"Burst GPU-hours:    {totals.burst_gpu_hours:,.2f}",
        f"Free GPU-hours:     {totals.free_gpu_hours:,.2f}",
        f"Total GPU-hours:    {totals.total_gpu_hours:,.2f}",
        f"Cost:               {cost}",
        "",
        "The attached workbook has one row per project, cluster and month with cost centres.",
        *report.warnings,
    ]
    return "\n".join(lines) + "\n"
