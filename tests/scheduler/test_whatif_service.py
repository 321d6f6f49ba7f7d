"""What-if runs: who may ask, bad proposals refused by field with nothing stored, the same
pair reused, the run's progress and result, and what each viewer is shown of it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from scheduler.choices import WorkloadState
from scheduler.models import SimulationJobState, WhatIfRun
from scheduler.selectors.whatif import TeamEffect, teams_shown
from scheduler.services.whatif import whatif_create, whatif_run
from tests.scheduler.test_ledger_trace import workload

pytestmark = pytest.mark.django_db


def ask(personas, user, percents, **kwargs):
    return whatif_create(
        user=user, cluster=personas.cluster, parent=personas.program_a, percents=percents, **kwargs
    )


def test_a_manager_asks_and_the_run_replays_both_trees(
    personas, django_capture_on_commit_callbacks
):
    # Detection and Segmentation each ran a 4-GPU job for 3 hours yesterday.
    now = timezone.now()

    class World:  # the helper's shape: a project, a cluster and a submitter
        cluster, user = personas.cluster, personas.pi
        projects = {}

    for project in (personas.project_a1, personas.project_a2):
        World.projects["budgeted"] = project
        at = now - timedelta(days=1)
        workload(World, project.slug, WorkloadState.SUCCEEDED, at,
                 runs=[(at, at + timedelta(hours=3))], gpus=4)  # fmt: skip
    with django_capture_on_commit_callbacks(execute=False):
        run = ask(personas, personas.program_manager,
                  {personas.project_a1: "20", personas.project_a2: "80"}, days=3)  # fmt: skip
    assert run.state == SimulationJobState.QUEUED and run.days == 3
    assert run.proposal == {
        f"project-{personas.project_a1.id}": "20.00",
        f"project-{personas.project_a2.id}": "80.00",
    }
    done = whatif_run(job_id=run.pk)
    assert done.state == SimulationJobState.DONE and done.progress == 1.0
    assert whatif_run(job_id=run.pk) is None  # a redelivered task does nothing
    teams = {t["name"]: t for t in done.result["teams"]}
    assert set(teams) == {"Detection", "Segmentation"} and done.result["jobs"] == 2
    assert (
        teams["Segmentation"]["proposed"]["owed_gpu_hours"]
        >= teams["Segmentation"]["today"]["owed_gpu_hours"]
    )


def test_the_same_pair_in_the_same_hour_reuses_the_run(
    personas, django_capture_on_commit_callbacks
):
    percents = {personas.project_a1: "40"}
    with django_capture_on_commit_callbacks(execute=False):
        first = ask(personas, personas.org_admin, percents)
        again = ask(personas, personas.program_manager, {personas.project_a1: "40.00"})
        other = ask(personas, personas.org_admin, {personas.project_a1: "41"})
    assert again.pk == first.pk and other.pk != first.pk
    assert WhatIfRun.objects.count() == 2


def test_bad_proposals_name_every_field_and_store_nothing(personas):
    with pytest.raises(ValidationError) as caught:
        ask(personas, personas.org_admin,
            {personas.project_a1: "101", personas.project_b1: "10"}, days=0)  # fmt: skip
    errors = caught.value.message_dict
    assert set(errors) == {"percent", "shares", "days"}
    assert "must be between 0 and 100" in errors["percent"][0]
    assert "is not a child of Vision" in errors["shares"][0]
    # Detection 50 % today: Segmentation at 60 % would make 110 %.
    with pytest.raises(ValidationError) as caught:
        ask(personas, personas.org_admin, {personas.project_a2: "60"})
    assert "would sum to 110.00 %" in caught.value.message_dict["shares"][0]
    assert not WhatIfRun.objects.exists()


@pytest.mark.parametrize("who", ["researcher", "finance", "outsider"])
def test_who_may_neither_change_nor_request_is_refused(personas, who):
    with pytest.raises(PermissionDenied):
        ask(personas, getattr(personas, who), {personas.project_a1: "40"})
    assert not WhatIfRun.objects.exists()


def test_a_viewer_sees_their_teams_and_the_rest_summed(personas):
    from scheduler.selectors.whatif import TeamFigures

    def figures(owed, delivered, of_owed, p90, preemptions):
        return TeamFigures(owed, delivered, of_owed, None, None, p90, None, None, None, None,
                           preemptions)  # fmt: skip

    teams = [
        TeamEffect("a/x", figures(10, 12, 10, 60, 1), figures(20, 20, 18, 30, 0), 1, "X"),
        TeamEffect("a/y", figures(10, 5, 5, 600, 2), figures(5, 6, 5, 900, 3), 2, "Y"),
        TeamEffect("a/z", figures(0, 4, 0, 0, 0), figures(0, 4, 0, 0, 1), 3, "Z"),
    ]
    assert teams_shown(teams, None) == (teams, None)
    shown, other = teams_shown(teams, {1})
    assert [t.name for t in shown] == ["X"] and other.name == "Other teams (2)"
    # Y and Z summed: owed 10, delivered 9, of owed 5; Y's own min(5, 10) + Z's min(4, 0).
    assert (other.today.owed_gpu_hours, other.today.delivered_gpu_hours) == (10, 9)
    assert other.today.delivery_ratio == 0.5 and other.today.hourly_delivery_ratio == 0.5
    assert other.today.wait_p90 is None  # the waits of teams the viewer may not see
    assert (other.today.preemptions, other.proposed.preemptions) == (2, 4)
