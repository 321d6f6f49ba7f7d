"""The what-if pages: "Preview effect" on the split editor and on a request's page, the run's
page while it runs and once done, and who may see it."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.models import Allocation
from governance.services.approvals import approval_request_create
from scheduler.choices import WorkloadState
from scheduler.models import WhatIfRun
from scheduler.services.whatif import whatif_run
from tests.governance.test_views_split import split_url, vision_post
from tests.personas import build_personas
from tests.scheduler.test_ledger_trace import workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def personas(db):
    world = build_personas()
    now = timezone.now()

    class Shape:  # what the history helper needs
        cluster, user, projects = world.cluster, world.pi, {}

    for project in (world.project_a1, world.project_a2, world.project_b1):
        Shape.projects["budgeted"] = project
        at = now - timedelta(days=1)
        workload(Shape, project.slug, WorkloadState.SUCCEEDED, at,
                 runs=[(at, at + timedelta(hours=3))], gpus=8)  # fmt: skip
    return world


def page(client, run) -> str:
    response = client.get(reverse("scheduler:whatif-detail", args=[run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_split_editor_previews_without_saving(
    client, personas, django_capture_on_commit_callbacks
):
    client.force_login(personas.program_manager)
    allocations = Allocation.objects.count()
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            split_url(personas, personas.program_a),
            vision_post(personas, a1="20", a2="60", reason="", preview="1"),
        )
    run = WhatIfRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("scheduler:whatif-detail", args=[run.pk])
    assert Allocation.objects.count() == allocations  # nothing saved
    body = page(client, run)
    assert "Queued" in body and "The proposal" in body and "20.00 %" in body
    whatif_run(job_id=run.pk)
    body = page(client, run)
    assert 'data-testid="summary"' in body and "Detection" in body and "Segmentation" in body
    assert "Past demand is not future demand" in body
    # The program manager sees Vision's projects; Language's team is summed.
    assert "Other teams (1)" in body and "Translation" not in body


def test_a_bad_preview_is_shown_on_the_editor_and_creates_nothing(client, personas):
    client.force_login(personas.program_manager)
    response = client.post(
        split_url(personas, personas.program_a),
        vision_post(personas, a1="80", a2="30", reason="", preview="1"),
    )
    assert response.status_code == 200
    assert "sum to 110.00 %" in response.content.decode()
    assert not WhatIfRun.objects.exists()


def test_a_request_is_previewed_from_its_page_and_decided_after(
    client, personas, django_capture_on_commit_callbacks
):
    asked = approval_request_create(
        actor=personas.pi, parent=personas.program_a, cluster=personas.cluster,
        percents={personas.project_a1: Decimal("55")}, reason="More for Detection.",
    )  # fmt: skip
    client.force_login(personas.program_manager)
    detail = client.get(reverse("approval-detail", args=[asked.pk])).content.decode()
    assert "Preview effect" in detail
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("scheduler:whatif-request", args=[asked.pk]))
    run = WhatIfRun.objects.get()
    assert response["Location"] == reverse("scheduler:whatif-detail", args=[run.pk])
    assert run.approval_request == asked
    whatif_run(job_id=run.pk)
    body = page(client, run)
    assert "Approve or reject the request" in body
    # The PI who asked sees the preview too, but has no decision to make.
    client.force_login(personas.pi)
    assert "Approve or reject the request" not in page(client, run)


def test_strangers_get_404(client, personas, django_capture_on_commit_callbacks):
    client.force_login(personas.program_manager)
    with django_capture_on_commit_callbacks(execute=False):
        client.post(split_url(personas, personas.program_a),
                    vision_post(personas, a1="20", reason="", preview="1"))  # fmt: skip
    run = WhatIfRun.objects.get()
    client.force_login(personas.outsider)
    assert client.get(reverse("scheduler:whatif-detail", args=[run.pk])).status_code == 404
    assert client.post(reverse("scheduler:whatif-request", args=[999999])).status_code == 404
