"""The usage report page and its downloads: finance and org admins only, numbers formatted,
the page's totals equal the CSV's, refusals next to the field."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.test import Client

from tests.governance.test_reports_selector import october_fixture  # noqa: F401

pytestmark = pytest.mark.django_db

PAGE = "/reports/usage/"


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_finance_sees_the_month_with_thousands_separators(october):
    response = client_for(october.finance).get(PAGE, {"month": "2026-10"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "GPU usage 2026-10" in html
    assert "1,000.0" in html  # Translation's GPU-hours on b200
    assert "4,500.00" in html  # its cost
    assert "4,510.00" in html  # the total cost
    assert "1,004.5" in html  # total GPU-hours: 3616200.750001 / 3600
    assert "CC-DET" in html
    assert 'href="/reports/usage.csv?month=2026-10"' in html


def test_page_total_matches_the_csv_download(october):
    client = client_for(october.finance)
    page = client.get(PAGE, {"month": "2026-10", "level": "program"})
    download = client.get("/reports/usage.csv", {"month": "2026-10", "level": "program"})
    assert download.status_code == 200
    lines = list(csv.DictReader(io.StringIO(download.content.decode())))
    total_hours = Decimal(lines[-1]["Total GPU-hours"])
    assert f"{total_hours:,.1f}" in page.content.decode()
    assert page.context["report"].totals.total_gpu_seconds == Decimal(
        lines[-1]["Total GPU-seconds"]
    )


def test_xlsx_download(october):
    response = client_for(october.org_admin).get("/reports/usage.xlsx", {"month": "2026-10"})
    assert response.status_code == 200
    assert response["Content-Disposition"] == (
        'attachment; filename="gpu-usage-2026-10-project.xlsx"'
    )
    assert response.content[:2] == b"PK"


@pytest.mark.parametrize("persona", ["program_manager", "pi", "researcher", "outsider"])
def test_other_roles_get_403(october, persona):
    client = client_for(getattr(october, persona))
    assert client.get(PAGE).status_code == 403
    assert client.get("/reports/usage.csv").status_code == 403


def test_navigation_offers_the_report_to_finance_and_org_admins_only(october):
    for persona, shown in (("finance", True), ("org_admin", True), ("pi", False)):
        response = client_for(getattr(october, persona)).get("/")
        labels = [item["label"] for item in response.context["nav_items"]]
        assert ("Usage report" in labels) is shown, persona


def test_bad_dates_are_shown_next_to_the_field(october):
    response = client_for(october.finance).get(
        PAGE, {"period": "range", "start": "2026-10-31", "end": "2026-10-01"}
    )
    assert response.status_code == 400
    assert response.context["errors"] == {
        "end": ["The last day (2026-10-01) is before the first (2026-10-31)."]
    }
    assert "is before the first" in response.content.decode()
    download = client_for(october.finance).get("/reports/usage.csv", {"level": "team"})
    assert download.status_code == 400
    assert download.content.decode().startswith("level:")


def test_empty_period_is_explained(october):
    response = client_for(october.finance).get(PAGE, {"month": "2025-01"})
    assert response.status_code == 200
    assert "No GPU time used in this period" in response.content.decode()


def test_the_page_opens_on_the_month_so_far_and_the_api_on_the_last_complete_one(october):
    from django.utils import timezone
    from rest_framework.test import APIClient

    from governance.services.reports import previous_month

    now = timezone.now()
    page = client_for(october.finance).get(PAGE)
    assert page.status_code == 200
    assert page.context["query"].month == f"{now:%Y-%m}"
    assert f"GPU usage {now:%Y-%m}" in page.content.decode()
    api = APIClient()
    api.force_login(october.finance)
    body = api.get("/api/reports/usage/").json()
    assert body["title"] == f"GPU usage {previous_month(now):%Y-%m}"


class _Table(HTMLParser):
    """The report table's header cells and the cells of each body row, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.heads: list[str] = []
        self.rows: list[list[str]] = []
        self.section = ""
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("thead", "tbody", "tfoot"):
            self.section = tag
        elif tag == "tr" and self.section == "tbody":
            self.rows.append([])
        elif tag in ("th", "td"):
            self.cell = []

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self.cell is not None:
            text = "".join(self.cell).strip()
            if self.section == "thead":
                self.heads.append(text)
            elif self.section == "tbody":
                self.rows[-1].append(text)
            self.cell = None


@pytest.mark.parametrize("level", ["organization", "program", "project"])
def test_each_row_has_a_cell_under_each_heading_and_names_are_shown_as_typed(october, level):
    october.project_a1.name = "<b>Det</b> & co"
    october.project_a1.save()
    october.program_a.name = '<img src=x onerror="alert(1)">'
    october.program_a.save()
    response = client_for(october.finance).get(PAGE, {"month": "2026-10", "level": level})
    html = response.content.decode()
    table = _Table()
    table.feed(html)
    assert len(table.rows) == len(response.context["report"].rows) > 0
    assert all(len(cells) == len(table.heads) for cells in table.rows)
    assert "<img src=x" not in html and "<b>Det" not in html
    months = {cells[0] for cells in table.rows}
    assert months == {"2026-10"}
    if level == "project":
        projects = {cells[table.heads.index("Project")] for cells in table.rows}
        assert "<b>Det</b> & co" in projects
        centres = {cells[table.heads.index("Cost centre")] for cells in table.rows}
        assert "CC-DET" in centres
    if level != "organization":
        programs = {cells[table.heads.index("Program")] for cells in table.rows}
        assert '<img src=x onerror="alert(1)">' in programs


def test_a_page_read_writes_nothing_once_the_daily_cache_is_current(october):
    """The page rolls closed days into the daily cache before reading; when there is nothing
    to roll it must not lock or write (it did: an UPDATE of each cluster's cursor per view)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from governance.models import Cluster, UsageDay
    from governance.services.reports import usage_days_refresh_all
    from scheduler.models import AccountingCursor

    for cluster in Cluster.objects.all():
        AccountingCursor.objects.create(
            cluster=cluster, accounted_until=datetime(2026, 11, 2, 3, tzinfo=UTC)
        )
    assert usage_days_refresh_all() > 0
    cached = UsageDay.objects.count()
    client = client_for(october.finance)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(PAGE, {"month": "2026-10"})
    assert response.status_code == 200
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if (
            q["sql"].lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))
            and "django_session" not in q["sql"]
        )
        or "FOR UPDATE" in q["sql"].upper()
    ]
    assert writes == []
    assert UsageDay.objects.count() == cached
