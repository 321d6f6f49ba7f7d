"""Writes around the finance usage report: the monthly e-mail to finance users.

The report itself is a read (``governance.selectors.reports.usage_report``); sending it is a
side effect that must happen once per organization and month, whatever the beat or a retry
does, so each sending is recorded in ``MonthlyReportDelivery`` in the same transaction.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.utils import timezone

from governance.choices import Role
from governance.models import MonthlyReportDelivery, Organization, RoleAssignment
from governance.reports.columns import report_filename
from governance.reports.xlsx_writer import report_xlsx
from governance.selectors.reports import report_period_of_month, usage_report
from governance.selectors.visibility import Visibility

logger = logging.getLogger(__name__)

XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


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
    except IntegrityError:
        return None  # another run recorded (and sent) it first
    return delivery


def report_monthly_send(
    *, month: date | None = None, now: datetime | None = None
) -> list[MonthlyReportDelivery]:
    """Send every organization's report for ``month`` (default: the month before ``now``).

    Idempotent: organizations already sent for that month are skipped.
    """
    now = now or timezone.now()
    month = month or previous_month(now)
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
