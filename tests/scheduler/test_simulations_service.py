"""Simulations from the browser: upload validation, the background run, permissions."""

from __future__ import annotations

import gzip

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from scheduler.models import SimulationJob, SimulationJobState
from scheduler.services.simulations import (
    MAX_UPLOAD_BYTES,
    live_budget_tree,
    simulation_job_create,
    simulation_job_run,
)
from tests.conftest import wait_for
from tests.personas import build_personas

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
# Two teams on one 8-GPU node: 'detection' asks for the whole node for 2 h twice,
# 'segmentation' for 4 GPUs for 1 h.
GOOD = HEADER + (
    "a,2026-01-05T00:00:00,7200,8,detection,,\n"
    "b,2026-01-05T00:10:00,3600,4,segmentation,,\n"
    "c,2026-01-05T00:20:00,7200,8,detection,,\n"
)


@pytest.fixture
def personas(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_personas()


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form(**extra) -> dict:
    data = {
        "trace_source": "upload",
        "gpus": "8",
        "gpus_per_node": "8",
        "budgets": "proportional",
        "policies": ["fairshare", "fifo"],
        "start_day": "",
        "days": "",
    }
    data.update(extra)
    return data


def upload(text: str | bytes, name="trace.csv") -> SimpleUploadedFile:
    data = text.encode() if isinstance(text, str) else text
    return SimpleUploadedFile(name, data, content_type="text/csv")


@pytest.mark.django_db
def test_bad_row_is_refused_with_its_line_number_and_nothing_created(personas):
    bad = HEADER + "a,2026-01-05T00:00:00,7200,8,detection,,\nb,2026-01-05T00:10:00,soon,4,x,,\n"
    response = browser(personas.program_manager).post(
        "/simulator/run/", {**form(), "trace_file": upload(bad)}
    )
    assert response.status_code == 400
    assert "trace.csv, line 3" in response.content.decode()
    assert SimulationJob.objects.count() == 0


@pytest.mark.django_db
def test_wrong_header_is_refused_and_nothing_created(personas):
    response = browser(personas.org_admin).post(
        "/simulator/run/",
        {**form(), "trace_file": upload("timestamp,duration,num_gpus\n1,2,3\n")},
    )
    assert response.status_code == 400
    assert "line 1: header lacks column(s) id, submit_time" in response.content.decode()
    assert SimulationJob.objects.count() == 0


@pytest.mark.django_db
def test_too_big_a_file_is_refused_and_nothing_created(personas):
    big = GOOD + "x" * MAX_UPLOAD_BYTES
    response = browser(personas.org_admin).post(
        "/simulator/run/", {**form(), "trace_file": upload(big)}
    )
    assert response.status_code == 400
    assert f"the limit is {MAX_UPLOAD_BYTES:,} bytes" in response.content.decode()
    assert SimulationJob.objects.count() == 0


@pytest.mark.django_db
def test_service_names_the_field_for_bad_cluster_shape_and_policy(personas):
    with pytest.raises(ValidationError) as caught:
        simulation_job_create(
            user=personas.org_admin,
            organization=personas.organization,
            trace_source="upload",
            upload=GOOD.encode(),
            gpus=12,
            gpus_per_node=8,
            policies=["lottery"],
        )
    assert set(caught.value.message_dict) == {"gpus", "policies"}
    assert "12 GPUs is not a whole number of 8-GPU nodes" in caught.value.message_dict["gpus"][0]
    assert SimulationJob.objects.count() == 0


@pytest.mark.django_db
def test_gzipped_upload_runs_in_process_to_done_with_metrics(personas):
    job = simulation_job_create(
        user=personas.program_manager,
        organization=personas.organization,
        trace_source="upload",
        upload=gzip.compress(GOOD.encode()),
        upload_name="trace.csv.gz",
        gpus=8,
        policies=["fifo"],
    )
    done = simulation_job_run(job_id=job.pk)
    assert done.state == SimulationJobState.DONE
    metrics = done.result["metrics"][0]
    assert metrics["policy"] == "fifo"
    assert metrics["jobs"] == 3
    # FIFO on one node: a 00:00-02:00, b 02:00-03:00, c 03:00-05:00 -> waits 0, 110, 160 min.
    assert metrics["queue_wait_seconds"]["all"]["mean"] == pytest.approx((0 + 6600 + 9600) / 3)
    assert done.result["figures"][0]["delivery"]["data"][0]["x"] == ["detection", "segmentation"]
    # A second delivery of the task changes nothing.
    assert simulation_job_run(job_id=job.pk) is None


# Two teams of equal GPU-hours (so equal budgets) on one 8-GPU node: 'vision' runs the whole
# node from 00:00 in two 2-hour halves, both past their 10-minute minimum by 00:16:40, when
# 'speech' sends a 5-minute debug job; an eviction would lose more than the job's minimum
# runtime, so it waits that long (600 s, its patience) before it evicts. Speech's 2-hour
# whole-node run comes long after everything else has ended.
PATIENT = HEADER + (
    "v1,2026-01-05T00:00:00,7200,4,vision,600,\n"
    "v2,2026-01-05T00:00:00,7200,4,vision,600,\n"
    "d1,2026-01-05T00:16:40,300,1,speech,600,\n"
    "late,2026-01-06T00:00:00,7238,8,speech,,\n"
)


@pytest.mark.django_db
def test_the_form_can_ask_the_replay_to_cycle_when_the_engines_timers_are_due(personas):
    client = browser(personas.program_manager)
    for extra in ({}, {"wake_at_timers": "on"}):
        data = {**form(policies=["fairshare"]), "trace_file": upload(PATIENT), **extra}
        assert client.post("/simulator/run/", data).status_code == 302
    plain, timed = SimulationJob.objects.order_by("pk")
    assert [plain.parameters["wake_at_timers"], timed.parameters["wake_at_timers"]] == [False, True]
    runs = [simulation_job_run(job_id=job.pk).result["metrics"][0] for job in (plain, timed)]
    waits = [run["queue_wait_seconds"]["debug"]["p50"] for run in runs]
    # The timed replay cycles when d1's patience ends; the plain one at the first periodic
    # cycle after it (60, 120, 240 and 480 s apart from d1's arrival: 900 s).
    assert waits == [900.0, 600.0]
    timed_page, plain_page = (
        client.get(f"/simulator/{j.pk}/").content.decode() for j in (timed, plain)
    )
    assert "cycles also when a wait the engine keeps ends" in timed_page
    assert "backing off to every 16 minutes" in plain_page


@pytest.mark.django_db
def test_live_tree_becomes_the_simulators_budget_with_project_slugs(personas):
    budget = live_budget_tree(cluster=personas.cluster)
    assert budget.to_dict() == {
        "name": "acme",
        "share": 100.0,
        "children": [
            {
                "name": "language",
                "share": 40.0,
                "children": [
                    {"name": "summaries", "share": 30.0},
                    {"name": "translation", "share": 70.0},
                ],
            },
            {
                "name": "vision",
                "share": 60.0,
                "children": [
                    {"name": "detection", "share": 50.0},
                    {"name": "segmentation", "share": 30.0},
                ],
            },
        ],
    }


@pytest.mark.django_db
def test_researcher_cannot_open_the_simulator_and_outsider_cannot_see_a_job(personas):
    job = simulation_job_create(
        user=personas.program_manager,
        organization=personas.organization,
        trace_source="upload",
        upload=GOOD.encode(),
        gpus=8,
    )
    assert browser(personas.researcher).get("/simulator/").status_code == 403
    assert browser(personas.researcher).post("/simulator/run/", form()).status_code == 403
    assert browser(personas.outsider).get(f"/simulator/{job.pk}/").status_code == 404
    assert browser(personas.researcher).get(f"/simulator/{job.pk}/").status_code == 404
    assert browser(personas.program_manager).get(f"/simulator/{job.pk}/").status_code == 200
    assert browser(personas.org_admin).get(f"/simulator/{job.pk}/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_simulation_runs_on_the_real_celery_worker_to_done(celery_worker, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    p = build_personas()
    response = browser(p.program_manager).post(
        "/simulator/run/",
        {**form(budgets="live", cluster=str(p.cluster.pk)), "trace_file": upload(GOOD)},
    )
    assert response.status_code == 302
    job = SimulationJob.objects.get()
    assert response["Location"] == f"/simulator/{job.pk}/"

    def finished():
        job.refresh_from_db()
        return job.state in (SimulationJobState.DONE, SimulationJobState.FAILED)

    assert wait_for(finished, timeout=90), job.progress_note
    assert job.state == SimulationJobState.DONE, job.error
    assert job.progress == 1.0
    assert [m["policy"] for m in job.result["metrics"]] == ["fairshare", "fifo"]
    # The live tree: detection (Vision 60 % x 50 %) and segmentation (60 % x 30 %).
    assert job.result["budgeted_projects"] == ["detection", "segmentation"]
    page = browser(p.program_manager).get(f"/simulator/{job.pk}/").content.decode()
    assert "hourly delivery (org)" in page
    assert 'data-figure="timeline-2"' in page


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_request_returns_and_the_simulation_runs_in_a_thread(
    settings, monkeypatch
):
    # make run has no broker: tasks run in-process. The simulation must not run inside the
    # request that asked for it (it used to block it for the whole replay).
    import threading

    import scheduler.services.simulations as simulations

    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    release = threading.Event()
    real_run = simulations.simulation_job_run

    def held_run(**kwargs):
        release.wait(60)  # the test looks at the job before letting the run go on
        return real_run(**kwargs)

    monkeypatch.setattr(simulations, "simulation_job_run", held_run)
    p = build_personas()
    response = browser(p.program_manager).post(
        "/simulator/run/", {**form(), "trace_file": upload(GOOD)}
    )
    assert response.status_code == 302
    job = SimulationJob.objects.get()
    assert job.state == SimulationJobState.QUEUED
    page = browser(p.program_manager).get(response["Location"])
    assert page.status_code == 200
    release.set()

    def finished():
        job.refresh_from_db()
        return job.state in (SimulationJobState.DONE, SimulationJobState.FAILED)

    assert wait_for(finished, timeout=90), job.progress_note
    assert job.state == SimulationJobState.DONE, job.error


def test_markup_in_an_uploaded_project_name_is_plain_text_in_every_chart(personas):
    evil = '<a href="https://example.org/x">click</a><b>bold</b>'
    trace = HEADER + (
        f'a,2026-01-05T00:00:00,7200,8,"{evil.replace(chr(34), chr(34) * 2)}",,\n'
        "b,2026-01-05T00:10:00,3600,4,segmentation,,\n"
    )
    job = simulation_job_create(
        user=personas.program_manager, organization=personas.organization,
        trace_source="upload", gpus=8, gpus_per_node=8, policies=["fairshare"],
        upload=trace.encode(), upload_name="evil.csv",
    )  # fmt: skip
    job = simulation_job_run(job_id=job.pk)
    assert job.state == SimulationJobState.DONE, job.error
    texts = []

    def strings(value, key=""):
        if isinstance(value, str) and not key.endswith("template"):
            texts.append(value)
        elif isinstance(value, list):
            for item in value:
                strings(item, key)
        elif isinstance(value, dict):
            for k, v in value.items():
                strings(v, k)

    for per_policy in job.result["figures"]:
        for name in ("delivery", "timeline"):
            strings(per_policy[name]["data"])
    assert any("&lt;a href=" in t for t in texts)
    assert not any("<a" in t or "<b>" in t for t in texts)


def test_a_simulation_on_the_live_tree_names_only_what_its_requester_may_see(personas):
    # The program manager of Vision sees detection and segmentation, not Language's
    # translation; the org admin sees all three.
    trace = GOOD + "d,2026-01-05T00:30:00,3600,4,translation,,\n"

    def run(user):
        job = simulation_job_create(
            user=user, organization=personas.organization, trace_source="upload", gpus=8,
            gpus_per_node=8, budgets="live", cluster=personas.cluster, policies=["fairshare"],
            upload=trace.encode(), upload_name="mix.csv",
        )  # fmt: skip
        job = simulation_job_run(job_id=job.pk)
        assert job.state == SimulationJobState.DONE, job.error
        return job

    managers = run(personas.program_manager)
    text = str(managers.result)
    assert "translation" not in text.lower() and "language" not in text.lower()
    assert any(p.startswith("another project ") for p in managers.result["budgeted_projects"])
    assert {"detection", "segmentation"} <= set(managers.result["budgeted_projects"])
    admins = run(personas.org_admin)
    assert "translation" in admins.result["budgeted_projects"]
