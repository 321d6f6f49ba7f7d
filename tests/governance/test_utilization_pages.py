"""GPU utilization on the pages (cluster health, owed vs delivered, the usage report and its
exports, a workload's page) against PostgreSQL, with hand-worked numbers.

The personas' cluster; yesterday (D), in GPU-seconds:

ledger (``UsageHour``)                       telemetry (``UtilizationHour``, allocated / busy)
  Detection    D 10:00 budgeted 28,800         run A (Detection)   D 10:00  28,800 / 14,400
  Detection    D 11:00 budgeted 14,400         run A (Detection)   D 11:00   7,200 /    720
  Translation  D 10:00 budgeted 7,200 + free 3,600   run B (Translation) D 10:00 10,800 / 10,800
  Segmentation D 10:00 budgeted 3,600          (no telemetry)
and 40 days earlier run B 3,600 / 0 (outside every period below but in B's own trace).

Cluster, period: measured 46,800 (13 GPU-h) of the ledger's 57,600 (16 GPU-h) = 81.25 %
coverage; busy 25,920 (7.2 GPU-h): utilization 25,920 ÷ 46,800 = 55.38 %.
Detection: measured 36,000 (10 GPU-h) of 43,200 = 83.33 %; busy 15,120 (4.2 GPU-h) = 42 %;
allocated but idle 20,880 = 5.8 GPU-h. Translation: 10,800 of 10,800, 100 % busy, idle 0.
Segmentation: no telemetry (1 GPU-h in the ledger). Vision = Detection (5.8 idle; Segmentation
adds nothing), Language = 0, Acme = 5.8.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import openpyxl
import pytest
from django.test import Client
from django.utils import timezone

from scheduler.choices import RunEndReason
from scheduler.models import Run, UsageHour, UtilizationHour
from scheduler.services.workloads import workload_submit
from tests.scheduler.test_api_agents import started_run
from tests.scheduler.test_utilization_store import node_of

pytestmark = pytest.mark.django_db

HEALTH = "/dashboards/health/"
DELIVERY = "/dashboards/delivery/"
REPORT = "/reports/usage/"
IDLE_HEADER = "GPU-hours allocated but idle"


@pytest.fixture(autouse=True)
def fast_password_hasher(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def yesterday() -> datetime:
    today = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=1)


def run_in(personas, project, node, name: str) -> Run:
    workload = workload_submit(
        project=project,
        cluster=personas.cluster,
        name=name,
        gpus=8,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "train.py"]},
        submitted_by=personas.org_admin,
    )
    return started_run(workload, node)


def measured(run: Run, node, hour: datetime, allocated: int, busy: int) -> None:
    UtilizationHour.objects.create(
        run=run,
        project_id=run.project_id,
        cluster_id=run.cluster_id,
        node=node,
        hour=hour,
        allocated_gpu_seconds=Decimal(allocated),
        busy_gpu_seconds=Decimal(busy),
        samples=720,
        covered_from=hour,
        reported_until=hour + timedelta(hours=1),
        covered_seconds=Decimal(3600),
    )


def ledger(personas, project, hour: datetime, **seconds) -> None:
    UsageHour.objects.create(
        cluster=personas.cluster,
        project=project,
        hour=hour,
        **{f"{name}_gpu_seconds": Decimal(value) for name, value in seconds.items()},
    )


@pytest.fixture
def world(personas):
    """The module docstring's day; runs A and B open and marked idle."""
    day = yesterday()
    h10, h11 = day + timedelta(hours=10), day + timedelta(hours=11)
    ledger(personas, personas.project_a1, h10, budgeted=28800)
    ledger(personas, personas.project_a1, h11, budgeted=14400)
    ledger(personas, personas.project_b1, h10, budgeted=7200, free=3600)
    ledger(personas, personas.project_a2, h10, budgeted=3600)
    node = node_of(personas.cluster, "node-1")
    run_a = run_in(personas, personas.project_a1, node, "detector-notebook")
    run_b = run_in(personas, personas.project_b1, node, "translator")
    run_quiet = run_in(personas, personas.project_a2, node, "segmenter")
    measured(run_a, node, h10, 28800, 14400)
    measured(run_a, node, h11, 7200, 720)
    measured(run_b, node, h10, 10800, 10800)
    measured(run_b, node, day - timedelta(days=40), 3600, 0)
    idle_since = timezone.now() - timedelta(minutes=45)
    Run.objects.filter(pk__in=[run_a.pk, run_b.pk]).update(idle_since=idle_since)
    return {"day": day, "run_a": run_a, "run_b": run_b, "run_quiet": run_quiet}


# ---- Cluster health ------------------------------------------------------------------------


def test_health_utilization_sums_and_coverage_match_the_hand_worked_figures(personas, world):
    response = client_for(personas.org_admin).get(HEALTH)
    assert response.status_code == 200
    use = response.context["use"]
    assert use.total.telemetry.allocated_gpu_seconds == Decimal("46800")
    assert use.total.telemetry.busy_gpu_seconds == Decimal("25920")
    assert use.total.ledger_allocated_gpu_seconds == Decimal("57600")
    assert use.total.coverage == Decimal("0.8125")
    assert round(use.total.utilization, 6) == Decimal("0.553846")
    day = next(d for d in use.days if d.day == world["day"].date())
    assert (day.telemetry.allocated_gpu_seconds, day.telemetry.busy_gpu_seconds) == (46800, 25920)
    assert sum(1 for d in use.days if d.measured) == 1  # the 40-days-ago hour is outside
    html = response.content.decode()
    assert "55.38 %" in html and "81.25 %" in html
    assert "measured <strong>13</strong> of the <strong>16</strong> GPU-hours" in html
    assert 'data-figure="health-utilization"' in html


def test_health_per_project_table_is_most_idle_first_with_exact_figures(personas, world):
    use = client_for(personas.org_admin).get(HEALTH).context["use"]
    names = [row.name for row in use.projects]
    assert names == ["Detection", "Translation", "Segmentation"]
    detection, translation, segmentation = use.projects
    assert detection.telemetry.idle_gpu_seconds == Decimal("20880")
    assert detection.telemetry.busy_gpu_seconds == Decimal("15120")
    assert detection.utilization == Decimal("0.42")
    assert round(detection.coverage, 6) == Decimal("0.833333")
    assert translation.utilization == 1 and translation.telemetry.idle_gpu_seconds == 0
    assert translation.coverage == 1
    assert not segmentation.measured and segmentation.utilization is None
    assert segmentation.ledger_allocated_gpu_seconds == Decimal("3600")


def test_researcher_sees_only_their_projects_rows_and_idle_runs(personas, world):
    response = client_for(personas.researcher).get(HEALTH)
    assert response.status_code == 200
    use = response.context["use"]
    # Cluster-wide per-day figures, as the rest of the pyramid ...
    assert use.total.telemetry.allocated_gpu_seconds == Decimal("46800")
    # ... but only Detection's row and run.
    assert [row.name for row in use.projects] == ["Detection"]
    assert [run.pk for run in use.idle_runs] == [world["run_a"].pk]
    html = response.content.decode()
    assert "translator" not in html and "Translation" not in html
    assert f'href="/workloads/{world["run_a"].workload_id}/"' in html


def test_org_admin_sees_every_idle_run_with_a_link_and_since_when(personas, world):
    response = client_for(personas.org_admin).get(HEALTH)
    runs = response.context["use"].idle_runs
    assert {run.pk for run in runs} == {world["run_a"].pk, world["run_b"].pk}
    html = response.content.decode()
    for run in runs:
        assert f'href="/workloads/{run.workload_id}/"' in html
    assert "detector-notebook" in html and "translator" in html
    assert "45\xa0minutes ago" in html or "45 minutes ago" in html


def test_an_ended_run_is_not_listed_idle(personas, world):
    Run.objects.filter(pk=world["run_b"].pk).update(
        ended_at=timezone.now(), end_reason=RunEndReason.SUCCEEDED
    )
    runs = client_for(personas.org_admin).get(HEALTH).context["use"].idle_runs
    assert [run.pk for run in runs] == [world["run_a"].pk]


def test_no_telemetry_yet_is_said_and_nothing_is_zero_percent(personas):
    ledger(personas, personas.project_a1, yesterday() + timedelta(hours=10), budgeted=3600)
    response = client_for(personas.org_admin).get(HEALTH)
    assert response.status_code == 200
    use = response.context["use"]
    assert not use.has_telemetry and use.total.utilization is None
    html = response.content.decode()
    assert "No GPU telemetry yet" in html and "no GPU telemetry yet" in html
    assert 'data-figure="health-utilization"' not in html
    assert "no telemetry" in html  # Detection's row: ledger time, nothing measured
    assert "0.00 % busy" not in html


@pytest.mark.parametrize(
    "query",
    [
        {"cluster": "abc"},
        {"cluster": "99999999999999999999"},
        {"period": "custom", "start": "2026-13-45", "end": "x"},
        {"period": "<script>"},
        {"period": "custom", "start": "2026-01-10", "end": "2026-01-01"},
    ],
)
def test_bad_query_on_health_is_never_a_500(personas, world, query):
    # The dashboards' rule: say what was wrong and show the default (never a 500).
    response = client_for(personas.org_admin).get(HEALTH, query)
    assert response.status_code == 200
    assert response.context["use"].total.telemetry.allocated_gpu_seconds == Decimal("46800")


# ---- Owed vs delivered ---------------------------------------------------------------------


def idle_cells(response) -> dict[str, str | None]:
    return {line.row.name: (line.idle or None) for line in response.context["lines"]}


def test_delivery_idle_column_per_team(personas, world):
    response = client_for(personas.org_admin).get(DELIVERY)
    assert response.status_code == 200
    lines = {line.row.name: line for line in response.context["lines"]}
    assert lines["Detection"].telemetry.idle_gpu_seconds == Decimal("20880")
    assert lines["Vision"].telemetry.idle_gpu_seconds == Decimal("20880")
    assert lines["Language"].telemetry.idle_gpu_seconds == 0
    assert lines["Acme Research"].telemetry.idle_gpu_seconds == Decimal("20880")
    assert idle_cells(response) == {
        "Acme Research": "5.8",
        "Vision": "5.8",
        "Detection": "5.8",
        "Segmentation": None,
        "Language": "0",
        "Translation": "0",
        "Summaries": None,
    }
    html = response.content.decode()
    assert "Allocated but idle" in html and "no telemetry" in html
    assert "Idle time is charged like any other" in html


def test_delivery_pi_sees_their_project_only(personas, world):
    response = client_for(personas.pi).get(DELIVERY)
    assert idle_cells(response) == {"Detection": "5.8"}


# ---- The usage report and its exports ------------------------------------------------------


def month_of(day: datetime) -> str:
    return f"{day:%Y-%m}"


def test_report_idle_column_page_csv_xlsx_and_api(personas, world):
    from rest_framework.test import APIClient

    query = {"month": month_of(world["day"]), "level": "project"}
    client = client_for(personas.finance)
    page = client.get(REPORT, query)
    assert page.status_code == 200
    rows = {row.project: row for row in page.context["report"].rows}
    assert rows["Detection"].idle_gpu_seconds == Decimal("20880")
    assert rows["Translation"].idle_gpu_seconds == 0
    assert rows["Segmentation"].idle_gpu_seconds is None
    assert page.context["report"].totals.idle_gpu_seconds == Decimal("20880")
    html = page.content.decode()
    assert "Allocated but idle GPU" in html and "Idle time is charged like any other" in html

    lines = list(
        csv.DictReader(io.StringIO(client.get("/reports/usage.csv", query).content.decode()))
    )
    header = list(lines[0])
    assert header[-1] == IDLE_HEADER and "Total GPU-seconds" in header  # added, none renamed
    by_project = {line["Project"]: line[IDLE_HEADER] for line in lines[:-1]}
    assert by_project == {"Detection": "5.800000", "Translation": "0.000000", "Segmentation": ""}
    assert lines[-1][IDLE_HEADER] == "5.800000"

    book = openpyxl.load_workbook(io.BytesIO(client.get("/reports/usage.xlsx", query).content))
    sheet = book["Usage"]
    heads = [cell.value for cell in sheet[1]]
    column = heads.index(IDLE_HEADER) + 1
    assert column == len(heads)
    assert sheet.cell(row=sheet.max_row, column=column).value == 5.8  # a number cell

    api = APIClient()
    api.force_login(personas.finance)
    body = api.get("/api/reports/usage/", query).json()
    idle = {row["project"]: row["idle_gpu_hours"] for row in body["rows"]}
    assert idle == {"Detection": "5.800000", "Translation": "0.000000", "Segmentation": None}
    assert body["totals"]["idle_gpu_seconds"] == "20880.000000"


def test_report_program_level_adds_only_measured_projects(personas, world):
    query = {"month": month_of(world["day"]), "level": "program"}
    report = client_for(personas.org_admin).get(REPORT, query).context["report"]
    assert {row.program: row.idle_gpu_seconds for row in report.rows} == {
        "Vision": Decimal("20880"),
        "Language": Decimal("0"),
    }


def test_report_without_telemetry_says_so(personas):
    day = yesterday()
    ledger(personas, personas.project_a1, day + timedelta(hours=10), budgeted=3600)
    query = {"month": month_of(day)}
    client = client_for(personas.finance)
    report = client.get(REPORT, query).context["report"]
    assert [row.idle_gpu_seconds for row in report.rows] == [None]
    lines = list(
        csv.DictReader(io.StringIO(client.get("/reports/usage.csv", query).content.decode()))
    )
    assert {line[IDLE_HEADER] for line in lines} == {""}


@pytest.mark.parametrize(
    "url,query",
    [
        (REPORT, {"month": "2026-13"}),
        ("/reports/usage.csv", {"level": "team"}),
        ("/reports/usage.xlsx", {"period": "range", "start": "2026-02-30", "end": "2026-03-01"}),
        ("/api/reports/usage/", {"month": "not-a-month"}),
    ],
)
def test_bad_report_query_is_a_400(personas, world, url, query):
    from rest_framework.test import APIClient

    if url.startswith("/api/"):
        api = APIClient()
        api.force_login(personas.finance)
        assert api.get(url, query).status_code == 400
    else:
        assert client_for(personas.finance).get(url, query).status_code == 400


# ---- A workload's page ---------------------------------------------------------------------


def test_workload_page_traces_its_run_per_hour(personas, world):
    run = world["run_a"]
    response = client_for(personas.researcher).get(f"/workloads/{run.workload_id}/")
    assert response.status_code == 200
    (trace,) = response.context["traces"]
    day = world["day"]
    assert [(h["hour"], h["utilization"]) for h in trace.hours] == [
        (day + timedelta(hours=10), Decimal("0.5")),
        (day + timedelta(hours=11), Decimal("0.1")),
    ]
    assert trace.idle_gpu_hours == Decimal("5.8")
    html = response.content.decode()
    assert 'data-figure="run-utilization"' in html
    assert "42.00 %" in html and "5.8 allocated but idle" in html
    assert 'data-testid="idle"' in html  # the idle flag beside it


def test_workload_page_without_telemetry_says_so(personas, world):
    run = world["run_quiet"]
    response = client_for(personas.org_admin).get(f"/workloads/{run.workload_id}/")
    html = response.content.decode()
    assert "No GPU telemetry for this run" in html
    assert 'data-figure="run-utilization"' not in html
    assert "plotly" not in html


def test_workload_page_of_another_project_is_not_shown_to_a_researcher(personas, world):
    run = world["run_b"]
    assert client_for(personas.researcher).get(f"/workloads/{run.workload_id}/").status_code == 404


# ---- The day sums the pages read -----------------------------------------------------------


def day_sums(personas, day: datetime) -> tuple:
    from scheduler.models import UtilizationDay

    row = UtilizationDay.objects.get(
        cluster=personas.cluster, project=personas.project_a1, day=day.date()
    )
    return row.allocated_gpu_seconds, row.busy_gpu_seconds


def test_day_sums_follow_every_insert_update_and_delete_of_the_hour_rows(personas):
    from scheduler.services.utilization import utilization_report
    from tests.scheduler.test_utilization_store import T0, item, run_on

    node = node_of(personas.cluster, "node-1")
    run = run_on(personas, node)  # Detection, 4 GPUs, from 2026-03-02 09:00 UTC
    start, day = T0, T0.replace(hour=0)
    # Through the agents' own path: 4 GPUs for 5 minutes = 1,200 GPU-seconds, 300 busy.
    period = item(run, start, start + timedelta(minutes=5), 1200, 300)
    utilization_report(node=node, reports=[period], now=start + timedelta(minutes=5))
    assert day_sums(personas, day) == (Decimal("1200"), Decimal("300"))
    # The next report folds into the same hour row (an update): 600 more, all busy.
    later = item(run, start + timedelta(minutes=5), start + timedelta(minutes=7.5), 600, 600)
    utilization_report(node=node, reports=[later], now=start + timedelta(minutes=8))
    assert day_sums(personas, day) == (Decimal("1800"), Decimal("900"))
    UtilizationHour.objects.filter(run=run).delete()
    assert day_sums(personas, day) == (Decimal("0"), Decimal("0"))


def test_a_period_of_part_days_is_read_from_the_hour_rows(personas, world):
    from governance.selectors.telemetry import telemetry_sums

    day = world["day"]
    # 10:30 to 11:30 takes only the 11:00 hour of Detection (7,200 / 720).
    sums = telemetry_sums(
        cluster_ids=[personas.cluster.pk],
        start=day + timedelta(hours=10, minutes=30),
        end=day + timedelta(hours=11, minutes=30),
    )
    (telemetry,) = sums.values()
    assert (telemetry.allocated_gpu_seconds, telemetry.busy_gpu_seconds) == (7200, 720)
    whole = telemetry_sums(
        cluster_ids=[personas.cluster.pk], start=day, end=day + timedelta(days=1), per="month"
    )
    assert (
        whole[
            (day.date().replace(day=1), personas.project_a1.pk, personas.cluster.pk)
        ].busy_gpu_seconds
        == 15120
    )


def test_days_and_projects_give_the_same_sums_either_way(personas, world):
    from governance.selectors import telemetry

    day = world["day"]
    start, end = day - timedelta(days=45), day + timedelta(days=1)
    days, projects = telemetry.telemetry_days_and_projects(
        cluster_id=personas.cluster.pk, start=start, end=end
    )
    rows = telemetry._days_and_projects_union(personas.cluster.pk, start.date(), end.date())
    union_days = {d: (a, b) for d, p, a, b in rows if d is not None}
    union_projects = {p: (a, b) for d, p, a, b in rows if d is None}
    grouped_days = {d: (t.allocated_gpu_seconds, t.busy_gpu_seconds) for d, t in days.items()}
    assert (
        grouped_days
        == union_days
        == {
            day.date(): (Decimal("46800"), Decimal("25920")),
            (day - timedelta(days=40)).date(): (Decimal("3600"), Decimal("0")),
        }
    )
    assert (
        {p: (t.allocated_gpu_seconds, t.busy_gpu_seconds) for p, t in projects.items()}
        == (union_projects)
        == {
            personas.project_a1.pk: (Decimal("36000"), Decimal("15120")),
            personas.project_b1.pk: (Decimal("14400"), Decimal("10800")),
        }
    )
