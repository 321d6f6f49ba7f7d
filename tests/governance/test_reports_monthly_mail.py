"""The monthly report mail: to finance users only, XLSX attached with totals equal to the
ledger, once per organization and month however often beat or a retry runs it."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.core import mail
from openpyxl import load_workbook

from governance.choices import NotificationKind
from governance.models import MonthlyReportDelivery, Notification
from governance.services.reports import report_monthly_send
from tests.factories import UserFactory, finance_of
from tests.governance.test_reports_selector import (  # noqa: F401 (the fixture)
    ledger_total,
    october_fixture,
)

pytestmark = pytest.mark.django_db

NOVEMBER_FIRST = datetime(2026, 11, 1, 6, tzinfo=UTC)


@pytest.fixture(autouse=True)
def locmem_mail(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_last_months_report_goes_to_finance_users_only(october):
    second = UserFactory(username="finance2")
    finance_of(october.organization, second)
    sent = report_monthly_send(now=NOVEMBER_FIRST)
    assert [d.month for d in sent] == [date(2026, 10, 1)]
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert sorted(message.to) == ["finance2@example.org", "finance@example.org"]
    assert message.cc == [] and message.bcc == []
    assert message.subject == "Acme Research: GPU usage 2026-10"
    assert "Total GPU-hours:    1,004.50" in message.body
    assert "Cost:               4,510.00 USD" in message.body

    ((name, content, mimetype),) = message.attachments
    assert name == "gpu-usage-2026-10-project.xlsx"
    assert mimetype == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    sheet = load_workbook(io.BytesIO(content))["Usage"]
    header = [c.value for c in sheet[1]]
    totals = [c.value for c in sheet[sheet.max_row]]
    assert totals[0] == "Total"
    ledger = ledger_total(datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC))
    assert Decimal(repr(totals[header.index("Total GPU-seconds")])) == ledger
    assert MonthlyReportDelivery.objects.get().total_gpu_seconds == ledger


def test_a_second_run_for_the_same_month_sends_nothing(october):
    report_monthly_send(now=NOVEMBER_FIRST)
    again = report_monthly_send(now=datetime(2026, 11, 1, 6, 5, tzinfo=UTC))
    assert again == []
    assert len(mail.outbox) == 1
    assert MonthlyReportDelivery.objects.count() == 1


def test_finance_users_are_told_in_the_app_once(october):
    report_monthly_send(now=NOVEMBER_FIRST)
    report_monthly_send(now=datetime(2026, 11, 1, 6, 5, tzinfo=UTC))
    (notice,) = Notification.objects.all()
    assert notice.recipient == october.finance
    assert notice.kind == NotificationKind.REPORT_READY
    assert notice.title == "Acme Research: GPU usage 2026-10 is ready"
    assert notice.link == "/reports/usage/?period=month&month=2026-10"


def test_a_failed_send_is_not_recorded_so_the_retry_sends(october, monkeypatch):
    from django.core.mail import EmailMessage

    original = EmailMessage.send

    def broken(self, fail_silently=False):
        raise OSError("mail server down")

    monkeypatch.setattr(EmailMessage, "send", broken)
    with pytest.raises(OSError):
        report_monthly_send(now=NOVEMBER_FIRST)
    assert MonthlyReportDelivery.objects.count() == 0
    monkeypatch.setattr(EmailMessage, "send", original)
    assert len(report_monthly_send(now=NOVEMBER_FIRST)) == 1
    assert len(mail.outbox) == 1


def test_an_organization_without_finance_users_gets_no_mail(october):
    october.finance.roles.all().delete()
    assert report_monthly_send(now=NOVEMBER_FIRST) == []
    assert mail.outbox == []


def test_beat_runs_the_task_on_the_first_of_the_month():
    entry = django_settings.CELERY_BEAT_SCHEDULE["reports-send-monthly"]
    assert entry["task"] == "governance.tasks.reports_send_monthly"
    assert entry["schedule"].day_of_month == {1}
    assert entry["schedule"].hour == {6}
    from governance.tasks import reports_send_monthly

    assert reports_send_monthly.name == "governance.tasks.reports_send_monthly"
