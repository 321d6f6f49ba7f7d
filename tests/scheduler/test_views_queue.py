"""My queue: estimated start, protection end, preemptions and the submit form, per persona."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import dateformat, timezone

from scheduler.choices import WorkloadState
from scheduler.models import Node, Run, Workload
from scheduler.selectors.estimates import estimate_range
from scheduler.services.cycle import scheduling_cycle_run
from scheduler.services.workloads import workload_submit
from tests.personas import build_personas

pytestmark = pytest.mark.django_db


@pytest.fixture
def personas(db, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    p = build_personas()
    Node.objects.create(cluster=p.cluster, name="gpu-1", gpus=8)
    return p


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def submit(p, name, gpus, *, at, duration):
    return workload_submit(
        project=p.project_a1, cluster=p.cluster, name=name, gpus=gpus, min_runtime_seconds=3600,
        launch_spec={"command": ["train"]}, declared_duration_seconds=duration,
        submitted_by=p.researcher, now=at,
    )  # fmt: skip


def test_pending_workload_shows_its_estimated_start_and_the_caveat(personas):
    p = personas
    began = timezone.now() - timedelta(hours=1)
    big = submit(p, "big", 8, at=began, duration=70 * 60)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began)
    waiting = submit(p, "waiting", 4, at=began + timedelta(minutes=5), duration=3600)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began + timedelta(minutes=5))
    run = Run.objects.get(workload=big)
    # big (8 GPUs, declared 70 min) holds the only node until started + 70 min: a short wait,
    # shown as a point.
    expected = timezone.localtime(run.started_at + timedelta(minutes=70))

    page = browser(p.researcher).get(f"/workloads/{waiting.pk}/").content.decode()
    assert (
        f"Expected to start <strong>{dateformat.format(expected, 'D j M, H:i T')}</strong>" in page
    )
    assert "assumes running work ends as declared and no higher-ranked work arrives" in page
    listing = browser(p.researcher).get("/workloads/").content.decode()
    assert dateformat.format(expected, "D H:i") in listing

    # Started an hour ago with a one-hour minimum: its protection has just ended.
    protected = timezone.localtime(run.started_at + timedelta(hours=1))
    running = browser(p.researcher).get(f"/workloads/{big.pk}/").content.decode()
    assert (
        f"Past its minimum runtime since <strong>{dateformat.format(protected, 'D j M, H:i')}"
        in (running)
    )


def test_a_run_past_its_protection_reads_preemptible_not_protected_until_a_past_time(personas):
    """Found on a fresh demo: runs started days ago read "protected until Mon 02:10" on a
    Wednesday, a past moment shown as if it were still ahead."""
    p = personas
    began = timezone.now() - timedelta(hours=3)
    old = submit(p, "old", 2, at=began, duration=10 * 3600)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began)
    fresh = submit(p, "fresh", 2, at=timezone.now(), duration=10 * 3600)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=timezone.now())
    ended = timezone.localtime(Run.objects.get(workload=old).protected_until)
    ahead = timezone.localtime(Run.objects.get(workload=fresh).protected_until)

    listing = browser(p.researcher).get("/workloads/?state=running").content.decode()
    assert "past its minimum runtime: preemptible" in listing
    assert f"protected until {dateformat.format(ended, 'D H:i')}" not in listing
    assert f"protected until {dateformat.format(ahead, 'D H:i')}" in listing
    page = browser(p.researcher).get(f"/workloads/{old.pk}/").content.decode()
    assert (
        f"Past its minimum runtime since <strong>{dateformat.format(ended, 'D j M, H:i')}" in page
    )
    assert "Protected from preemption until" not in page


def test_free_lane_work_is_named_under_its_name_where_narrow_screens_see_it(personas):
    """Found on a fresh demo at 390 px: a free-lane run preempted 186 times read like a churn
    bug, because the column that says "free lane: preemptible" is hidden on a phone."""
    p = personas
    free = workload_submit(
        project=p.project_a1, cluster=p.cluster, name="spare-cycles", gpus=1,
        min_runtime_seconds=0, launch_spec={"command": ["train"]}, submitted_by=p.researcher,
        now=timezone.now(),
    )  # fmt: skip
    charged = submit(p, "charged", 1, at=timezone.now(), duration=3600)

    listing = browser(p.researcher).get("/workloads/").content.decode()
    rows = {
        w.pk: listing.split(f'data-testid="workload-{w.pk}"')[1].split("</tr>")[0]
        for w in (free, charged)
    }
    assert 'data-testid="free-lane">free lane<' in rows[free.pk]
    assert "free lane" not in rows[charged.pk]


def test_a_long_estimated_wait_is_shown_as_a_range(personas):
    p = personas
    began = timezone.now() - timedelta(hours=1)
    big = submit(p, "big", 8, at=began, duration=4 * 3600)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began)
    waiting = submit(p, "waiting", 4, at=began + timedelta(minutes=5), duration=3600)
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began + timedelta(minutes=5))
    run = Run.objects.get(workload=big)
    expected = run.started_at + timedelta(hours=4)  # about 3 h from now

    page = browser(p.researcher).get(f"/workloads/{waiting.pk}/")
    low, high = page.context["workload"].estimate_range
    assert low < expected < high
    assert "Expected to start between <strong>" in page.content.decode()
    listing = browser(p.researcher).get("/workloads/").content.decode()
    assert "between " + dateformat.format(timezone.localtime(low), "D H:i") in listing


def test_the_range_is_the_wait_times_the_measured_ratios():
    now = timezone.now()
    assert estimate_range(now=now, estimate=now + timedelta(minutes=29)) is None
    assert estimate_range(now=now, estimate=None) is None
    low, high = estimate_range(now=now, estimate=now + timedelta(hours=10))
    assert (low - now, high - now) == (timedelta(hours=9), timedelta(hours=34))


def test_researcher_submits_through_the_form_and_bad_input_names_the_field(personas):
    p = personas
    client = browser(p.researcher)
    form = {
        "project": p.project_a1.pk, "cluster": p.cluster.pk, "name": "sweep", "gpus": 12,
        "nodes": 1, "min_runtime_minutes": 30, "command": "python sweep.py",
    }  # fmt: skip
    refused = client.post("/workloads/submit/", form)
    assert refused.status_code == 400
    assert "12 GPUs do not fit on one node of 8" in refused.content.decode()
    assert not Workload.objects.exists()

    accepted = client.post("/workloads/submit/", {**form, "gpus": 2})
    workload = Workload.objects.get()
    assert accepted["Location"] == f"/workloads/{workload.pk}/"
    assert (workload.gpus, workload.min_runtime_seconds, workload.state) == (
        2, 1800, WorkloadState.PENDING,
    )  # fmt: skip
    assert workload.launch_spec == {"command": ["python", "sweep.py"]}


def _sweep_file(items) -> SimpleUploadedFile:
    return SimpleUploadedFile("sweep.json", json.dumps(items).encode(), "application/json")


def test_a_sweep_uploaded_on_the_submit_page_is_queued_all_or_none(personas):
    p = personas
    client = browser(p.researcher)
    items = [
        {"project": p.project_a1.pk, "gpus": 1, "min_runtime_seconds": 900, "name": f"lr-{i}",
         "launch_spec": {"command": ["python", "train.py"]}}
        for i in range(3)
    ]  # fmt: skip
    bad = [*items, {**items[0], "project": p.project_b1.pk}, {**items[0], "gpus": 0}]
    refused = client.post("/workloads/submit/", {"form": "sweep", "sweep_file": _sweep_file(bad)})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert "Nothing was queued." in page
    assert "workloads[3].project" in page and "workloads[4].gpus" in page
    assert not Workload.objects.exists()

    for junk, words in [(b"{not json", "not JSON"), (b"[" * 5000 + b"]" * 5000, "nested")]:
        upload = SimpleUploadedFile("junk.json", junk, "application/json")
        response = client.post("/workloads/submit/", {"form": "sweep", "sweep_file": upload})
        assert response.status_code == 400 and words in response.content.decode()
    assert not Workload.objects.exists()

    accepted = client.post(
        "/workloads/submit/", {"form": "sweep", "sweep_file": _sweep_file({"workloads": items})}
    )
    assert accepted.status_code == 302
    assert accepted["Location"] == "/workloads/?state=pending&mine=1"
    assert sorted(Workload.objects.values_list("name", flat=True)) == ["lr-0", "lr-1", "lr-2"]
    queue = client.get(accepted["Location"], follow=True).content.decode()
    assert "3 workloads are queued" in queue


def test_finance_has_no_submit_form_and_is_refused(personas):
    p = personas
    assert "Submit a workload" not in browser(p.finance).get("/workloads/").content.decode()
    assert "Submit a workload" in browser(p.researcher).get("/workloads/").content.decode()
    response = browser(p.finance).post("/workloads/submit/", {"name": "x"})
    assert response.status_code == 403


def test_waiting_work_comes_before_newer_finished_work(personas):
    p = personas
    began = timezone.now() - timedelta(hours=2)
    waiting = submit(p, "waiting", 4, at=began, duration=3600)
    done = submit(p, "done", 1, at=began + timedelta(hours=1), duration=60)
    Workload.objects.filter(pk=done.pk).update(state=WorkloadState.SUCCEEDED)

    names = [w.name for w in browser(p.researcher).get("/workloads/").context["workloads"]]
    assert names.index("waiting") < names.index("done")
    assert waiting.state == WorkloadState.PENDING


def test_waiting_work_is_listed_in_its_place_in_the_queue_then_running_work(personas):
    """The default list answers "when does mine start?": waiting work from place 1 down,
    whatever order it was submitted in, then running work, then ended work."""
    p = personas
    began = timezone.now() - timedelta(hours=2)
    for i in range(8):
        # Two teams, submitted alternately: the fair-share order is not submission order.
        project = p.project_a1 if i % 2 else p.project_b1
        workload_submit(
            project=project, cluster=p.cluster, name=f"w{i}", gpus=4, min_runtime_seconds=600,
            launch_spec={"command": ["x"]}, declared_duration_seconds=3600,
            submitted_by=p.org_admin, now=began + timedelta(minutes=i),
        )  # fmt: skip
    scheduling_cycle_run(cluster_id=p.cluster.id, now=began + timedelta(minutes=10))
    ended = submit(p, "ended", 1, at=began + timedelta(minutes=20), duration=60)
    Workload.objects.filter(pk=ended.pk).update(state=WorkloadState.SUCCEEDED)

    rows = browser(p.org_admin).get("/workloads/").context["workloads"]
    states = [w.state for w in rows]
    assert states == sorted(
        states,
        key=[WorkloadState.PENDING, WorkloadState.RUNNING, WorkloadState.SUCCEEDED].index,
    )
    assert states.count(WorkloadState.RUNNING) == 2
    places = [w.queue_position for w in rows if w.state == WorkloadState.PENDING]
    assert places == list(range(1, 7))
    # The two teams alternate in the fair-share order, so the list is not newest first.
    submitted = [w.submitted_at for w in rows if w.state == WorkloadState.PENDING]
    assert submitted != sorted(submitted, reverse=True)


def _many(p, count, *, project=None, user=None, start=None):
    """``count`` pending workloads submitted a minute apart, oldest first."""
    start = start or timezone.now() - timedelta(days=1)
    return [
        workload_submit(
            project=project or p.project_a1,
            cluster=p.cluster,
            name=f"job-{i:03d}",
            gpus=1 + i % 4,
            min_runtime_seconds=600,
            launch_spec={"command": ["x"]},
            submitted_by=user or p.researcher,
            now=start + timedelta(minutes=i),
        )
        for i in range(count)
    ]


def test_the_queue_pages_fifty_at_a_time_and_its_links_keep_the_filters(personas):
    p = personas
    _many(p, 120)
    client = browser(p.researcher)
    first = client.get("/workloads/", {"state": "pending"})
    assert first.status_code == 200
    assert [w.name for w in first.context["workloads"]] == [
        f"job-{i:03d}" for i in range(119, 69, -1)
    ]
    html = first.content.decode()
    assert "1\u201350 of 120 · page 1 of 3" in html
    assert 'href="?state=pending&amp;page=2"' in html
    last = client.get("/workloads/", {"state": "pending", "page": 3})
    assert [w.name for w in last.context["workloads"]] == [
        f"job-{i:03d}" for i in range(19, -1, -1)
    ]
    assert 'href="?state=pending&amp;page=2" rel="prev"' in last.content.decode()


def test_the_queue_filters_by_project_cluster_and_submitter_and_sorts(personas):
    p = personas
    mine = _many(p, 3, user=p.org_admin)
    _many(p, 2, project=p.project_b1)
    client = browser(p.org_admin)

    def names(**params):
        response = client.get("/workloads/", params)
        assert response.status_code == 200, response.content.decode()[:500]
        return [w.name for w in response.context["workloads"]]

    assert names(project=p.project_b1.pk) == ["job-001", "job-000"]
    assert names(mine="on") == [w.name for w in reversed(mine)]
    assert names(cluster=p.cluster.pk, sort="oldest") == [
        "job-000", "job-000", "job-001", "job-001", "job-002"
    ]  # fmt: skip
    by_gpus = client.get("/workloads/", {"sort": "gpus"}).context["workloads"]
    assert [w.gpus for w in by_gpus] == sorted((w.gpus for w in by_gpus), reverse=True)
    # The state counts follow the other filters.
    response = client.get("/workloads/", {"project": p.project_b1.pk})
    assert response.context["counts"]["pending"] == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"page": "x"}, "page"),
        ({"page": "0"}, "page"),
        ({"page": "99"}, "page"),
        ({"sort": "fastest"}, "sort"),
        ({"state": "sleeping"}, "state"),
        ({"project": "not-a-number"}, "project"),
        ({"project": "999999"}, "project"),
        ({"cluster": "999999"}, "cluster"),
    ],
)
def test_a_parameter_the_queue_cannot_read_is_a_400_naming_it(personas, params, field):
    p = personas
    _many(p, 2)
    response = browser(p.researcher).get("/workloads/", params)
    assert response.status_code == 400
    assert f"The parameter <code>{field}</code> is not valid" in response.content.decode()


def test_a_project_the_user_does_not_see_is_refused_like_one_that_does_not_exist(personas):
    p = personas
    _many(p, 1, project=p.project_b1, user=p.org_admin)
    response = browser(p.researcher).get("/workloads/", {"project": p.project_b1.pk})
    assert response.status_code == 400
    assert "job-000" not in response.content.decode()


def test_the_submit_form_has_its_own_page_linked_from_the_top_of_the_queue(personas):
    p = personas
    queue = browser(p.researcher).get("/workloads/").content.decode()
    assert 'href="/workloads/submit/" data-testid="submit-link"' in queue
    assert 'name="command"' not in queue
    page = browser(p.researcher).get("/workloads/submit/")
    assert page.status_code == 200
    assert 'name="command"' in page.content.decode()
    assert browser(p.finance).get("/workloads/submit/").status_code == 403


def test_cancel_asks_to_confirm_before_it_cancels(personas):
    p = personas
    [workload] = _many(p, 1)
    client = browser(p.researcher)
    detail = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert f'href="/workloads/{workload.pk}/cancel/"' in detail
    ask = client.get(f"/workloads/{workload.pk}/cancel/")
    assert ask.status_code == 200
    assert "cancelling takes it out of the queue" in ask.content.decode()
    workload.refresh_from_db()
    assert workload.state == WorkloadState.PENDING
    done = client.post(f"/workloads/{workload.pk}/cancel/")
    assert done.status_code == 302
    workload.refresh_from_db()
    assert workload.state == WorkloadState.CANCELLED
