"""The three dashboard pages: what each persona sees, roll-ups, bad input (never a 500).

Usage data: the two hours of yesterday worked out in ``test_dashboards_health`` (in GPU-hours:
Detection owed 15.2, delivered 16 of which 8.8 burst; Translation owed 8.96, delivered 10
of which 2 burst; Summaries owed 3.84, delivered 0, free lane 4; Segmentation owed 0).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from scheduler.models import AccountingCursor
from tests.governance.test_dashboards_health import build_two_hours

pytestmark = pytest.mark.django_db

DELIVERY = reverse("dashboards:delivery")
FAIRSHARE = reverse("dashboards:fairshare")
HEALTH = reverse("dashboards:health")


@pytest.fixture
def day(personas):
    return build_two_hours(personas)


def signed_in(client, user):
    client.force_login(user)
    return client


def yesterday_only(day) -> dict:
    iso = f"{day:%Y-%m-%d}"
    return {"period": "custom", "start": iso, "end": iso}


def warnings_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def line_figures(response) -> dict:
    """Node name → (owed, delivered, burst, unbudgeted GPU-h, delivery %, hourly %)."""
    found = {}
    for line in response.context["lines"]:
        row = line.row
        found[row.name] = (
            round(row.owed_gpu_hours, 2),
            round(row.charged_gpu_hours, 2),
            round(row.burst_gpu_hours, 2),
            round(row.unbudgeted_gpu_hours, 2),
            None if line.delivery_pct is None else round(line.delivery_pct, 2),
            None if line.hourly_delivery_pct is None else round(line.hourly_delivery_pct, 2),
        )
    return found


def test_org_admin_sees_every_node_with_exact_rollups(client, personas, day):
    response = signed_in(client, personas.org_admin).get(DELIVERY, yesterday_only(day))
    assert response.status_code == 200
    D = Decimal
    assert line_figures(response) == {
        "Acme Research": (D("28"), D("26"), D("10.8"), D("14.8"), D("86.29"), D("57.71")),
        "Vision": (D("15.2"), D("16"), D("8.8"), D("8.8"), D("100"), D("47.37")),
        "Detection": (D("15.2"), D("16"), D("8.8"), D("8.8"), D("100"), D("47.37")),
        "Segmentation": (D("0"), D("0"), D("0"), D("0"), None, None),
        "Language": (D("12.8"), D("10"), D("2"), D("6"), D("70"), D("70")),
        "Translation": (D("8.96"), D("10"), D("2"), D("2"), D("100"), D("100")),
        "Summaries": (D("3.84"), D("0"), D("0"), D("4"), D("0"), D("0")),
    }
    assert [line.level for line in response.context["lines"]] == [0, 1, 2, 2, 1, 2, 2]
    # The organization is in focus: one bar per program (by name, as the table).
    bars = response.context["bars"]["data"]
    assert bars[0]["name"] == "Owed" and bars[0]["x"] == [12.8, 15.2]
    assert bars[1]["x"] == [10.0, 16.0]
    assert bars[0]["y"] == ["Language · 70.0 %", "Vision · 100.0 %"]
    html = response.content.decode()
    assert "86.29 %" in html and "15.2" in html and "—" in html
    assert "plotly-governance.min.js" in html and html.count("plotly-governance.min.js") == 1
    assert "css/dashboards.css" in html


def test_focus_on_a_program_charts_its_projects_and_its_hours(client, personas, day):
    query = {**yesterday_only(day), "node": f"program-{personas.program_b.pk}"}
    response = signed_in(client, personas.finance).get(DELIVERY, query)
    assert response.status_code == 200
    assert response.context["focus"].name == "Language"
    bars = response.context["bars"]["data"]
    assert [y.split(" · ")[0] for y in bars[0]["y"]] == ["Summaries", "Translation"]
    assert bars[0]["x"] == [3.84, 8.96]
    series = {trace["name"]: trace["y"] for trace in response.context["timeseries"]["data"]}
    assert len(series["Delivered (charged)"]) == 24  # one day per hour
    assert series["Delivered (charged)"][10] == 10.0
    assert series["Owed (entitled, capped at demand)"][10] == pytest.approx(12.8)
    assert series["Entitled (share x healthy GPUs)"][11] == pytest.approx((24192 + 10368) / 3600)


def test_program_manager_sees_their_program_only(client, personas, day):
    client = signed_in(client, personas.program_manager)
    response = client.get(DELIVERY, yesterday_only(day))
    assert [line.row.name for line in response.context["lines"]] == [
        "Vision",
        "Detection",
        "Segmentation",
    ]
    assert response.context["focus"].name == "Vision"
    other = {**yesterday_only(day), "node": f"program-{personas.program_b.pk}"}
    assert client.get(DELIVERY, other).status_code == 404
    organization = {**yesterday_only(day), "node": f"organization-{personas.organization.pk}"}
    assert client.get(DELIVERY, organization).status_code == 404


def test_pi_sees_their_project_only(client, personas, day):
    client = signed_in(client, personas.pi)
    response = client.get(DELIVERY, yesterday_only(day))
    assert [line.row.name for line in response.context["lines"]] == ["Detection"]
    query = {**yesterday_only(day), "node": f"program-{personas.program_a.pk}"}
    assert client.get(DELIVERY, query).status_code == 404
    response = client.get(FAIRSHARE, {"parent": f"program-{personas.program_b.pk}"})
    assert response.status_code == 404


def test_outsider_sees_an_explained_empty_page(client, personas, day):
    client = signed_in(client, personas.outsider)
    for url in (DELIVERY, FAIRSHARE, HEALTH):
        response = client.get(url)
        assert response.status_code == 200
        assert "No cluster to show" in response.content.decode()
        assert "lines" not in response.context


def test_researcher_has_no_team_to_show_but_no_error(client, personas, day):
    response = signed_in(client, personas.researcher).get(DELIVERY, yesterday_only(day))
    assert response.status_code == 200
    assert [line.row.name for line in response.context["lines"]] == ["Detection"]


def test_anonymous_is_sent_to_sign_in(client):
    response = client.get(DELIVERY)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize(
    "query, says",
    [
        ({"period": "custom", "start": "2026-13-45", "end": "2026-01-02"}, "YYYY-MM-DD"),
        ({"period": "custom", "start": "yesterday", "end": ""}, "YYYY-MM-DD"),
        ({"period": "custom", "start": "2026-03-10", "end": "2026-03-01"}, "is after the end"),
        ({"period": "custom", "start": "2020-01-01", "end": "2026-01-01"}, "at most 366 days"),
        ({"period": "custom", "start": "2999-01-01", "end": "2999-01-02"}, "not started yet"),
        ({"period": "custom"}, "needs a start and an end"),
        ({"period": "fortnight"}, "not understood"),
        ({"cluster": "99999"}, "No cluster 99999 among yours"),
        ({"cluster": "h100"}, "not understood"),
        ({"days": "1000"}, "not understood"),
    ],
)
@pytest.mark.parametrize("url", [DELIVERY, FAIRSHARE, HEALTH])
def test_bad_input_is_a_message_never_a_500(client, personas, day, url, query, says):
    response = signed_in(client, personas.org_admin).get(url, query)
    assert response.status_code == 200
    assert any(says in message for message in warnings_of(response))
    assert response.context["filters"].cluster == personas.cluster


def test_malformed_node_is_a_404(client, personas, day):
    client = signed_in(client, personas.org_admin)
    assert client.get(DELIVERY, {"node": "program-abc"}).status_code == 404
    assert client.get(FAIRSHARE, {"parent": "robot-1"}).status_code == 404


def test_default_period_is_the_last_seven_days(client, personas, day):
    response = signed_in(client, personas.org_admin).get(DELIVERY)
    period = response.context["filters"].period
    assert period.key == "7d"
    assert period.end - period.start == timedelta(days=7)
    assert period.start <= day < period.end
    assert period.bucket == "day"


def test_fairshare_page_lists_the_ranking(client, personas, day):
    response = signed_in(client, personas.org_admin).get(FAIRSHARE, {"days": "7"})
    assert response.status_code == 200
    rows = {line.row.name: line.row for line in response.context["lines"]}
    # Charged over the window: Vision 16, Language 10 GPU-h → Language goes first.
    assert rows["Language"].sibling_rank == 1
    assert rows["Vision"].metric == pytest.approx((16 / 26) / 0.6)
    assert [r.name for r in response.context["view"].project_order][:2] == [
        "Summaries",
        "Translation",
    ]
    chart = response.context["chart"]["data"]
    assert [trace["name"] for trace in chart] == ["Language", "Vision"]
    assert len(chart[0]["x"]) == 8  # seven midnights and now
    assert "Usage ÷ share" in response.content.decode()


def test_program_manager_charts_their_program_by_default(client, personas, day):
    response = signed_in(client, personas.program_manager).get(FAIRSHARE)
    assert response.context["chart_parent"].name == "Vision"
    assert [t["name"] for t in response.context["chart"]["data"]] == [
        "Segmentation",
        "Detection",
    ]


def test_row_links_keep_the_other_choices_and_set_their_own_node_once(client, personas, day):
    from urllib.parse import parse_qs

    vision, language = personas.program_a, personas.program_b
    page = signed_in(client, personas.org_admin).get(
        FAIRSHARE, {"parent": f"program-{vision.pk}", "days": "7"}
    )
    links = {line.row.name: parse_qs(line.chart_url[1:]) for line in page.context["lines"]}
    assert links["Language"] == {"days": ["7"], "parent": [f"program-{language.pk}"]}
    page = signed_in(client, personas.org_admin).get(
        DELIVERY, {"period": "30d", "node": f"program-{vision.pk}"}
    )
    links = {line.row.name: parse_qs(line.focus_url[1:]) for line in page.context["lines"]}
    assert links["Language"] == {"period": ["30d"], "node": [f"program-{language.pk}"]}
    assert page.context["all_url"] == "?period=30d"


def test_health_page_shows_the_pyramid(client, personas, day):
    response = signed_in(client, personas.pi).get(HEALTH, yesterday_only(day))
    assert response.status_code == 200
    tiles = response.context["tiles"]
    assert round(tiles["availability"], 2) == Decimal("98.96")
    assert round(tiles["impact"], 2) == Decimal("86.29")
    pyramid = {t["name"]: t["y"] for t in response.context["pyramid"]["data"]}
    assert pyramid["Availability (healthy ÷ all GPUs)"] == [98.96]
    html = response.content.decode()
    assert "98.96 %" in html and "No node is draining." in html


def test_health_page_explains_a_period_without_data(client, personas):
    response = signed_in(client, personas.org_admin).get(HEALTH)
    assert response.status_code == 200
    assert "No accounting data in this period" in response.content.decode()


def test_navigation_links_the_dashboards_for_managers_not_researchers(client, personas):
    response = signed_in(client, personas.program_manager).get(DELIVERY)
    labels = {item["label"]: item for item in response.context["nav_items"]}
    assert labels["Dashboards"]["active"] is True
    client.logout()
    response = signed_in(client, personas.researcher).get(reverse("home"))
    assert "Dashboards" not in {item["label"] for item in response.context["nav_items"]}


def test_a_new_installation_charts_hours_from_its_first_accounted_hour(client, personas):
    """Three hours of figures in the default 7-day period: daily bars would be one stub, so
    the time series is hourly and starts at the first accounted hour."""
    now = timezone.now()
    began = now - timedelta(hours=3)
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_from=began, accounted_until=now
    )
    response = signed_in(client, personas.org_admin).get(DELIVERY)
    x = response.context["timeseries"]["data"][0]["x"]
    first = datetime.fromisoformat(str(x[0]))
    assert first == began.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    assert 3 <= len(x) <= 5  # an hour each, to the hour in progress


def test_weeks_of_figures_keep_daily_bars(client, personas):
    now = timezone.now()
    AccountingCursor.objects.create(
        cluster=personas.cluster, accounted_from=now - timedelta(days=20), accounted_until=now
    )
    response = signed_in(client, personas.org_admin).get(DELIVERY)
    assert len(response.context["timeseries"]["data"][0]["x"]) == 7
