"""The home page answers each role's first question: the queue, this week's delivery, last
month's bill, the nodes that need attention. Figures are the hand-worked ones of
``test_dashboards_health`` (yesterday: Detection owed 15.2 GPU-hours and was delivered 16)."""

from __future__ import annotations

from datetime import UTC, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.models import CostRate
from scheduler.choices import NodeState
from scheduler.models import Node
from scheduler.services.workloads import workload_submit
from tests.governance.test_dashboards_health import build_two_hours, hour_row

pytestmark = pytest.mark.django_db


def home(client, user) -> str:
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def delivery_card(client, user) -> str:
    """The home page's first delivery card, as HTML."""
    return home(client, user).split('data-testid="home-delivery"', 1)[1].split("</section>", 1)[0]


def submit(personas, name, user):
    return workload_submit(
        project=personas.project_a1, cluster=personas.cluster, name=name, gpus=2,
        min_runtime_seconds=600, launch_spec={"command": ["x"]}, submitted_by=user,
    )  # fmt: skip


def test_a_researcher_sees_the_queue_of_the_project_and_how_to_submit(client, personas):
    submit(personas, "mine-1", personas.researcher)
    submit(personas, "mine-2", personas.researcher)
    submit(personas, "the-pis", personas.pi)
    html = home(client, personas.researcher)
    assert 'data-testid="home-queue"' in html
    assert '<div class="big">3</div><div class="muted small">waiting (2 yours)</div>' in html
    assert 'href="/workloads/submit/">Submit a workload</a>' in html
    assert 'data-testid="home-delivery"' not in html  # a researcher answers for no node
    assert 'data-testid="home-finance"' not in html and 'data-testid="home-nodes"' not in html


def test_a_pi_sees_what_the_project_was_owed_and_delivered_this_week(client, personas):
    build_two_hours(personas)
    section = delivery_card(client, personas.pi)
    assert "Detection" in section
    # More was delivered than owed: the card says so rather than "16 of 15.2".
    assert (
        '<div class="big">16</div><div class="muted small">GPU-hours delivered: all 15.2 owed,'
        " and 0.8 more on GPUs others did not need"
    ) in section
    assert '<div class="big">100.00 %</div>' in section
    assert section.count("<li title=") == 7  # one bar per day of the week
    # The numbers are in the bars' titles, which a phone cannot hover: a caption says what
    # a bar is.
    assert "Each day: the part of what was owed that was delivered" in section


def test_a_pi_short_of_what_was_owed_reads_delivered_of_owed(client, personas):
    # Yesterday 10:00: owed min(10, 10) = 10 GPU-hours, delivered 5.
    hour = timezone.now().astimezone(UTC).replace(hour=10, minute=0, second=0, microsecond=0)
    hour_row(personas, personas.project_a1, hour - timedelta(days=1), entitled=36000,
             demand=36000, budgeted=18000)  # fmt: skip
    section = delivery_card(client, personas.pi)
    assert '<div class="big">5</div><div class="muted small">GPU-hours delivered of 10 owed' in (
        section
    )
    assert '<div class="big">50.00 %</div>' in section and "more on GPUs" not in section


def test_a_program_manager_sees_the_program(client, personas):
    build_two_hours(personas)
    section = delivery_card(client, personas.program_manager)
    # Vision = Detection (owed 15.2, delivered 16) + Segmentation (nothing).
    assert "Vision" in section and "GPU-hours delivered: all 15.2 owed, and 0.8 more" in section


def test_a_program_with_one_project_short_does_not_read_all_owed(client, personas):
    day = build_two_hours(personas)
    # The day before, 10:00 and 11:00: Segmentation owed 10 GPU-hours, delivered 5;
    # Detection owed 10, delivered 20 (10 of them on GPUs others did not need).
    before = day - timedelta(hours=14)
    hour_row(personas, personas.project_a2, before, entitled=36000, demand=36000,
             budgeted=18000)  # fmt: skip
    hour_row(personas, personas.project_a1, before + timedelta(hours=1), entitled=36000,
             demand=36000, budgeted=36000, burst=36000)  # fmt: skip
    section = delivery_card(client, personas.program_manager)
    # The week: owed 15.2 + 10 + 10 = 35.2, delivered 16 + 5 + 20 = 41. Of what was owed,
    # per project: Detection min(36, 25.2) + Segmentation min(5, 10) = 30.2, so 85.80 %.
    # Summed over the program first, the card read "all 35.2 owed, and 5.8 more".
    assert '<div class="big">85.80 %</div>' in section
    assert (
        '<div class="big">41</div><div class="muted small">GPU-hours delivered: 30.2 of the '
        "35.2 owed, and 10.8 more on GPUs others did not need"
    ) in section
    # That day's bar: 10 + 5 of the 20 owed (75 %), not min(1, 25 / 20).
    label = (
        f"{before:%a} {before.day} {before:%b}: 15 of 20 GPU-h owed delivered (25 delivered in all)"
    )
    bar = section.split(f'<li title="{label}">', 1)[1].split("</li>", 1)[0]
    assert 'style="height: 75%"' in bar


def test_finance_sees_last_months_gpu_hours_and_cost_with_the_downloads(client, personas):
    first_of_month = (
        timezone.now().astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    )
    in_last_month = first_of_month - timedelta(days=10) + timedelta(hours=5)
    # 2 GPU-hours budgeted and 1 of burst on Translation; 2.50 USD per GPU-hour.
    hour_row(personas, personas.project_b1, in_last_month, entitled=7200, demand=10800,
             budgeted=7200, burst=3600)  # fmt: skip
    CostRate.objects.create(
        gpu_type=personas.cluster.gpu_type, rate_per_gpu_hour=Decimal("2.50"), currency="USD",
        valid_from=first_of_month - timedelta(days=400),
    )  # fmt: skip
    html = home(client, personas.finance)
    section = html.split('data-testid="home-finance"', 1)[1].split("</section>", 1)[0]
    month = f"{in_last_month:%Y-%m}"
    assert '<div class="big">3</div><div class="muted small">GPU-hours used</div>' in section
    assert "7.50 USD" in section
    assert f'href="/reports/usage.xlsx?month={month}">Download XLSX</a>' in section


def test_an_operator_sees_the_nodes_that_need_attention(client, personas):
    now = timezone.now()
    Node.objects.create(cluster=personas.cluster, name="fine", gpus=8, last_heartbeat=now)
    Node.objects.create(
        cluster=personas.cluster, name="fan", gpus=8, last_heartbeat=now,
        state=NodeState.DRAINING, state_reason="Fan replacement.",
    )  # fmt: skip
    Node.objects.create(
        cluster=personas.cluster, name="quiet", gpus=8, last_heartbeat=now - timedelta(minutes=9)
    )
    html = home(client, personas.org_admin)
    section = html.split('data-testid="home-nodes"', 1)[1].split("</section>", 1)[0]
    assert "2 of 3 nodes need attention" in section
    assert ">fan</a>" in section and "Fan replacement." in section
    assert ">quiet</a>" in section and "no heartbeat since 9" in section
    assert ">fine</a>" not in section
