"""The split editor: who may open it, saving a split, sending a request, every bad input."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.choices import ApprovalState
from governance.forms import start_of_day
from governance.models import Allocation, ApprovalRequest, Project
from governance.selectors.tree import share_at
from governance.services.allocations import allocation_split

pytestmark = pytest.mark.django_db


def split_url(personas, parent):
    kind = "program" if parent in personas.programs else "organization"
    return reverse("split", args=[personas.cluster.pk, kind, parent.pk])


def vision_post(personas, a1="55", a2="30", reason="Detection ships first.", **extra):
    data = {
        f"percent_{personas.project_a1.pk}": a1,
        f"percent_{personas.project_a2.pk}": a2,
        "reason": reason,
        "valid_from": "",
        "valid_to": "",
    }
    data.update(extra)
    return data


@pytest.fixture
def manager(client, personas):
    client.force_login(personas.program_manager)
    return client


def test_manager_sees_every_child_prefilled_with_its_share(manager, personas):
    response = manager.get(split_url(personas, personas.program_a))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Split Vision among its projects" in body
    assert f'name="percent_{personas.project_a1.pk}"' in body
    assert 'value="50.00"' in body and 'value="30.00"' in body
    assert "80.00 %" in body and "20.00 %" in body  # total and unallocated rest
    assert "/static/js/split.js" in body
    assert response.context["manage"] is True


def test_manager_saves_a_split_and_sees_the_new_shares(manager, personas):
    before = Allocation.objects.count()
    response = manager.post(split_url(personas, personas.program_a), vision_post(personas))
    assert response.status_code == 302
    assert response["Location"] == reverse("tree", args=[personas.cluster.pk])
    # Only the changed child gets a new row.
    assert Allocation.objects.count() == before + 1
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("55.00")
    page = manager.get(response["Location"])
    body = page.content.decode()
    assert "Saved the split of Vision on h100" in body
    assert "Detection 50.00 % → 55.00 %" in body
    rows = {r.label: r for r in page.context["rows"]}
    assert rows["Detection"].share == Decimal("55.00")
    assert rows["Unallocated in Vision"].share == Decimal("15.00")
    history = manager.get(reverse("history", args=["project", personas.project_a1.pk]))
    assert "Detection ships first." in history.content.decode()


def test_a_future_split_redirects_to_the_tree_as_of_its_start(manager, personas):
    start = timezone.localdate() + timedelta(days=7)
    response = manager.post(
        split_url(personas, personas.program_a),
        vision_post(personas, valid_from=start.isoformat(), shown_for=start.isoformat()),
    )
    assert response.status_code == 302
    assert response["Location"].endswith(f"?at={start.isoformat()}")
    assert share_at(node=personas.project_a1, cluster=personas.cluster) == Decimal("50.00")


@pytest.mark.parametrize(
    ("a1", "message"),
    [
        ("150", "Must be between 0 and 100."),
        ("-5", "Must be between 0 and 100."),
        ("abc", "Enter a number, like 42.5."),
        ("", "Enter a percent between 0 and 100"),
        ("12.345", "Use at most 2 decimals"),
        ("NaN", "Enter a number, like 42.5."),
        ("Infinity", "Enter a number, like 42.5."),
        ("1e5", "Must be between 0 and 100."),
    ],
)
def test_bad_percent_is_shown_next_to_its_field_and_nothing_changes(manager, personas, a1, message):
    before = Allocation.objects.count()
    response = manager.post(split_url(personas, personas.program_a), vision_post(personas, a1=a1))
    assert response.status_code == 200
    form = response.context["form"]
    assert message in " ".join(form.errors[f"percent_{personas.project_a1.pk}"])
    assert message in response.content.decode()
    assert Allocation.objects.count() == before
    # The typed value is kept so the manager can correct it.
    assert f'value="{a1}"' in response.content.decode()


def test_split_past_100_percent_is_refused_with_the_sum(manager, personas):
    before = Allocation.objects.count()
    response = manager.post(
        split_url(personas, personas.program_a), vision_post(personas, a1="60", a2="45")
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "The shares sum to 105.00 %" in body
    assert Allocation.objects.count() == before


def test_service_refusal_past_100_percent_later_is_shown(manager, personas):
    """A temporary grant next week pushes the future sum past 100 %: the service refuses."""
    from governance.services.allocations import allocation_split

    next_week = timezone.now() + timedelta(days=7)
    allocation_split(
        actor=personas.program_manager,
        parent=personas.program_a,
        cluster=personas.cluster,
        percents={personas.project_a2: Decimal("50")},
        reason="Segmentation's sprint.",
        valid_from=next_week,
        valid_to=next_week + timedelta(days=3),
    )
    before = Allocation.objects.count()
    response = manager.post(split_url(personas, personas.program_a), vision_post(personas, a1="60"))
    assert response.status_code == 200
    errors = response.context["form"].non_field_errors()
    assert errors, "the service's 100 % refusal must be shown above the form"
    assert "100" in " ".join(errors)
    assert Allocation.objects.count() == before


def test_valid_to_before_valid_from_is_refused(manager, personas):
    start = timezone.localdate() + timedelta(days=5)
    before = Allocation.objects.count()
    response = manager.post(
        split_url(personas, personas.program_a),
        vision_post(
            personas,
            valid_from=start.isoformat(),
            valid_to=(start - timedelta(days=2)).isoformat(),
        ),
    )
    assert response.status_code == 200
    assert "Must be after valid from." in response.context["form"].errors["valid_to"]
    assert Allocation.objects.count() == before


def test_start_in_the_past_is_refused(manager, personas):
    yesterday = timezone.localdate() - timedelta(days=1)
    response = manager.post(
        split_url(personas, personas.program_a),
        vision_post(personas, valid_from=yesterday.isoformat()),
    )
    assert "history is never rewritten" in " ".join(response.context["form"].errors["valid_from"])


def test_malformed_date_is_refused(manager, personas):
    response = manager.post(
        split_url(personas, personas.program_a), vision_post(personas, valid_to="31/12/2026")
    )
    assert response.status_code == 200
    assert "Enter a date as YYYY-MM-DD." in response.context["form"].errors["valid_to"]


def test_reason_is_required(manager, personas):
    before = Allocation.objects.count()
    response = manager.post(
        split_url(personas, personas.program_a), vision_post(personas, reason=" ")
    )
    assert response.status_code == 200
    assert "Say why the shares change" in " ".join(response.context["form"].errors["reason"])
    assert Allocation.objects.count() == before


def test_saving_without_a_change_says_nothing_was_changed(manager, personas):
    before = Allocation.objects.count()
    response = manager.post(split_url(personas, personas.program_a), vision_post(personas, a1="50"))
    assert response.status_code == 200
    assert "No share was changed" in response.content.decode()
    assert Allocation.objects.count() == before


def test_pi_request_mode_creates_an_approval_request_not_a_share(client, personas):
    client.force_login(personas.pi)
    url = split_url(personas, personas.program_a)
    page = client.get(url)
    assert page.status_code == 200
    assert page.context["manage"] is False
    assert "Request a change to Vision" in page.content.decode()
    # The PI only sees (and edits) their own project, and no total it cannot know.
    assert [item["row"].node for item in page.context["table"]] == [personas.project_a1]
    assert page.context["complete"] is False
    before = Allocation.objects.count()
    response = client.post(
        url,
        {
            f"percent_{personas.project_a1.pk}": "60",
            "reason": "Paper deadline in May.",
        },
    )
    request = ApprovalRequest.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("approval-detail", args=[request.pk])
    assert request.state == ApprovalState.SUBMITTED
    assert request.requested_by == personas.pi
    assert Allocation.objects.count() == before


def test_program_manager_requests_a_bigger_share_for_their_program(manager, personas):
    url = split_url(personas, personas.organization)
    page = manager.get(url)
    assert page.status_code == 200
    assert page.context["manage"] is False
    response = manager.post(
        url, {f"percent_{personas.program_a.pk}": "65", "reason": "Vision grows."}
    )
    assert response.status_code == 302
    request = ApprovalRequest.objects.get()
    assert request.program is None and request.organization == personas.organization
    assert request.lines.get().program == personas.program_a


def test_researcher_and_finance_get_403_on_a_split_they_can_see(client, personas):
    for persona in (personas.researcher, personas.finance):
        client.force_login(persona)
        response = client.get(split_url(personas, personas.program_a))
        assert response.status_code == 403
        assert "You may not do this" in response.content.decode()
        response = client.post(split_url(personas, personas.program_a), vision_post(personas))
        assert response.status_code == 403


def test_split_of_an_invisible_node_is_404(client, personas):
    client.force_login(personas.program_manager)
    assert client.get(split_url(personas, personas.program_b)).status_code == 404
    client.force_login(personas.outsider)
    assert client.get(split_url(personas, personas.program_a)).status_code == 404


def test_split_of_a_project_or_unknown_cluster_is_404(manager, personas):
    project_url = reverse("split", args=[personas.cluster.pk, "project", personas.project_a1.pk])
    assert manager.get(project_url).status_code == 404
    unknown = reverse("split", args=[999999, "program", personas.program_a.pk])
    assert manager.get(unknown).status_code == 404


def test_posted_field_of_a_child_not_shown_is_ignored(client, personas):
    """A PI who forges a field for a sibling project changes nothing about that sibling."""
    client.force_login(personas.pi)
    client.post(
        split_url(personas, personas.program_a),
        {
            f"percent_{personas.project_a1.pk}": "55",
            f"percent_{personas.project_a2.pk}": "0",
            "reason": "Trying.",
        },
    )
    request = ApprovalRequest.objects.get()
    assert [line.node for line in request.lines.all()] == [personas.project_a1]


def schedule(personas, node, percent, *, days, until_days=None, reason="Scheduled."):
    """Store a share of ``node`` starting ``days`` from today (ending ``until_days`` from it)."""
    today = timezone.localdate()
    start = start_of_day(today + timedelta(days=days)) if days else None
    end = start_of_day(today + timedelta(days=until_days)) if until_days else None
    parent = node.program if isinstance(node, Project) else node.organization
    allocation_split(
        actor=personas.program_manager if isinstance(node, Project) else personas.org_admin,
        parent=parent,
        cluster=personas.cluster,
        percents={node: Decimal(percent)},
        reason=reason,
        valid_from=start,
        valid_to=end,
    )


def shown(page) -> dict[str, Decimal]:
    return {item["row"].node.name: item["row"].current for item in page.context["table"]}


def test_the_editor_for_a_future_day_shows_the_shares_in_force_that_day(manager, personas):
    # Segmentation is already scheduled to drop to 20 % in 3 days; a split starting in 7 days is
    # made against that, not against today's 30 %.
    schedule(personas, personas.project_a2, "20", days=3)
    day = timezone.localdate() + timedelta(days=7)
    url = split_url(personas, personas.program_a)

    today_page = manager.get(url)
    future_page = manager.get(url, {"valid_from": day.isoformat()})

    assert shown(today_page)["Segmentation"] == Decimal("30.00")
    assert shown(future_page)["Segmentation"] == Decimal("20.00")
    assert future_page.context["form"]["valid_from"].value() == day
    body = future_page.content.decode()
    assert f'name="shown_for" value="{day.isoformat()}"' in body
    assert f"those in force on <strong>{day.isoformat()}</strong>" in body


def test_a_future_split_leaves_the_tree_exactly_as_the_editor_showed_it(manager, personas):
    schedule(personas, personas.project_a2, "20", days=3)
    day = timezone.localdate() + timedelta(days=7)
    url = split_url(personas, personas.program_a)
    editor = shown(manager.get(url, {"valid_from": day.isoformat()}))

    response = manager.post(
        url,
        vision_post(
            personas, a1="60", a2=str(editor["Segmentation"]),
            valid_from=day.isoformat(), shown_for=day.isoformat(),
        ),
    )  # fmt: skip

    assert response.status_code == 302
    after = start_of_day(day + timedelta(days=1))
    tree = {
        node.name: share_at(node=node, cluster=personas.cluster, at=after)
        for node in (personas.project_a1, personas.project_a2)
    }
    assert tree == {**editor, "Detection": 60}
    assert editor["Segmentation"] == 20


def test_moving_the_start_day_after_editing_shows_that_days_shares_and_saves_nothing(
    manager, personas
):
    schedule(personas, personas.project_a2, "20", days=3)
    day = timezone.localdate() + timedelta(days=7)
    before = Allocation.objects.count()

    # Edited on today's shares (shown_for empty), then the start moved to next week.
    response = manager.post(
        split_url(personas, personas.program_a),
        vision_post(personas, a1="60", a2="30", valid_from=day.isoformat(), shown_for=""),
    )

    assert response.status_code == 200
    assert Allocation.objects.count() == before
    body = response.content.decode()
    assert f"now those in force on {day.isoformat()}" in body
    assert shown(response)["Segmentation"] == Decimal("20.00")
    assert f'name="shown_for" value="{day.isoformat()}"' in body
    # What was typed is kept for the second look.
    assert response.context["form"][f"percent_{personas.project_a1.pk}"].value() == "60"


def test_extending_a_temporary_split_with_the_same_values_works(manager, personas):
    schedule(personas, personas.project_a1, "60", days=0, until_days=10)
    until = timezone.localdate() + timedelta(days=20)
    url = split_url(personas, personas.program_a)
    assert shown(manager.get(url))["Detection"] == Decimal("60.00")

    response = manager.post(
        url, vision_post(personas, a1="60", a2="30", valid_to=until.isoformat(),
                         reason="Deadline moved.")
    )  # fmt: skip

    assert response.status_code == 302
    day_15 = start_of_day(timezone.localdate() + timedelta(days=15))
    day_25 = start_of_day(timezone.localdate() + timedelta(days=25))
    assert share_at(node=personas.project_a1, cluster=personas.cluster, at=day_15) == 60
    assert share_at(node=personas.project_a2, cluster=personas.cluster, at=day_15) == 30
    # After the extension the earlier shares come back.
    assert share_at(node=personas.project_a1, cluster=personas.cluster, at=day_25) == 50
    page = manager.get(response["Location"])
    assert "Detection kept at 60.00 %" in page.content.decode()
