"""``slurm_import_usage`` against a real Slurm the session starts: jobs charged as ``sacct``
reports them (requeued runs each, running jobs up to now), owed demand, refusals and bad
input.

Each test syncs the personas' tree under its own account prefix (the ``site`` fixture).
Expected values come from Slurm's own commands (``sacct``) read here, never from the code
under test.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError
from django.db.models import Sum

from governance.selectors.reports import usage_report
from governance.selectors.visibility import user_visibility
from scheduler.models import EntitlementRecord, Node, UsageHour, UsageRecord
from tests.adapters.slurm.daemons import import_window_start, submit, wait_state
from tests.adapters.slurm.readings import (
    DONE,
    associations,
    ledger,
    requeue_after_a_first_run,
    run,
    runs_of,
    sacct_gpu_seconds,
)

pytestmark = pytest.mark.django_db(transaction=False)


def test_jobs_are_charged_as_sacct_reports_and_a_reimport_adds_nothing(site, slurm):
    tree, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    since = import_window_start(slurm)
    jobs = [
        submit(slurm, account=n["detection"], gpus=2, seconds=2),
        submit(slurm, account=n["detection"], gpus=3, seconds=1),
        submit(slurm, account=n["detection"], gpus=1, seconds=2, qos=n["free"]),
    ]
    for job in jobs:
        wait_state(slurm, job, DONE)
    out = run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert "3 charged" in out
    expected = sacct_gpu_seconds(slurm, jobs)
    assert all(expected[job] > 0 for job in jobs)
    for job in jobs:
        assert ledger(slurm, job) == expected[job]
    # Charged to Detection; the free-QOS job in the free lane.
    rows = UsageRecord.objects.filter(source="slurm")
    assert set(rows.values_list("project_id", flat=True)) == {tree.project_a1.id}
    free = rows.filter(charge="free").aggregate(s=Sum("gpu_seconds"))["s"]
    assert free == expected[jobs[2]]
    # The hourly rollup every dashboard and report reads holds the same GPU-seconds.
    hours = UsageHour.objects.filter(project=tree.project_a1).aggregate(
        b=Sum("budgeted_gpu_seconds"), u=Sum("burst_gpu_seconds"), f=Sum("free_gpu_seconds")
    )
    assert hours["b"] + hours["u"] + hours["f"] == sum(expected.values())
    # The finance report (what finance downloads) shows the Slurm jobs on Detection.
    today = datetime.now(UTC).date()
    report = usage_report(
        visibility=user_visibility(user=tree.finance), start=today.replace(day=1), end=today
    )
    detection = [r for r in report.rows if r.node_id == tree.project_a1.id]
    charged = sum(r.budgeted_gpu_seconds + r.burst_gpu_seconds + r.free_gpu_seconds
                  for r in detection)  # fmt: skip
    assert charged == sum(expected.values())
    # Owed: demand = GPUs asked for x (end - submit) of each job, as sacct reports them.
    asked = slurm.run(
        "sacct", "-X", "-n", "-P", "-j", ",".join(jobs), "--format=Submit,End,ReqTRES"
    )
    expected_demand = 0
    for line in asked.splitlines():
        submitted, ended, tres = line.split("|")
        seconds = (datetime.fromisoformat(ended) - datetime.fromisoformat(submitted)).seconds
        expected_demand += seconds * int(re.search(r"gres/gpu=(\d+)", tres).group(1))
    demand = EntitlementRecord.objects.filter(project=tree.project_a1).aggregate(
        d=Sum("demand_gpu_seconds"), e=Sum("entitled_gpu_seconds")
    )
    assert demand["d"] == expected_demand
    assert demand["e"] > 0  # Detection holds 60 % x 50 % of the cluster

    count = UsageRecord.objects.count()
    again = run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert "0 charged" in again
    assert UsageRecord.objects.count() == count


def test_a_running_job_is_charged_to_now_and_completed_later(site, slurm):
    _, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    since = import_window_start(slurm)
    # Long enough for slurmdbd to record it (a few seconds) while it still runs.
    job = submit(slurm, account=n["detection"], gpus=2, seconds=9)
    wait_state(slurm, job, {"RUNNING"})
    start_text = slurm.run("sacct", "-X", "-n", "-P", "-j", job, "--format=Start").strip()
    start = datetime.fromisoformat(start_text).replace(tzinfo=UTC)
    until = datetime.now(UTC).replace(microsecond=0)
    while until <= start:  # at least one second of running
        until = datetime.now(UTC).replace(microsecond=0)
    run("slurm_import_usage", "--cluster", slurm.name, "--since", since, "--until",
        until.isoformat())  # fmt: skip
    assert ledger(slurm, job) == 2 * int((until - start).total_seconds())
    wait_state(slurm, job, DONE)
    run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert ledger(slurm, job) == sacct_gpu_seconds(slurm, [job])[job]


def test_unknown_account_is_reported_kept_and_its_jobs_not_charged(site, slurm):
    _, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    stray = f"{n['org']}_stray"
    slurm.run("sacctmgr", "-i", "add", "account", stray, f"parent={n['org']}",
              f"cluster={slurm.name}")  # fmt: skip
    slurm.run("sacctmgr", "-i", "add", "user", "root", f"account={stray}",
              f"cluster={slurm.name}")  # fmt: skip
    since = import_window_start(slurm)
    job = submit(slurm, account=stray, gpus=1, seconds=1)
    out = run("slurm_sync", "--cluster", slurm.name)
    assert f"unknown account {stray}" in out
    assert (stray, "") in associations(slurm)  # kept without --remove-unknown
    wait_state(slurm, job, DONE)
    imported = run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert f"job {job} account {stray}" in imported
    assert ledger(slurm, job) == 0
    run("slurm_sync", "--cluster", slurm.name, "--remove-unknown")
    assert (stray, "") not in associations(slurm)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "nowhere"], "--cluster: no Slurm connection"),
        (["--since", "yesterday"], "--since: 'yesterday' is not an ISO date-time"),
        (["--since", "2026-01-01T00:00:00"], "--since: .* has no timezone"),
        (["--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z"], "since: "),
    ],
)
def test_import_bad_input_names_the_option(site, slurm, args, message):
    base = {"--cluster": slurm.name, "--since": "2026-01-01T00:00:00Z"}
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = [x for k, v in (base | given).items() for x in (k, v)]
    with pytest.raises(CommandError, match=message):
        run("slurm_import_usage", *argv)
    assert not UsageRecord.objects.exists()


def test_import_refuses_a_cluster_the_live_loop_drives(site, slurm):
    tree, _, _ = site
    Node.objects.create(cluster=tree.cluster, name="n1", gpus=8)
    with pytest.raises(CommandError, match=r"--cluster: .* nodes driven by this product"):
        run("slurm_import_usage", "--cluster", slurm.name, "--since", "2026-01-01T00:00:00Z")


def test_a_requeued_job_is_charged_for_each_of_its_runs(site, slurm):
    _, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    since = import_window_start(slurm)
    job = submit(slurm, account=n["detection"], gpus=2, seconds=4)
    requeue_after_a_first_run(slurm, job)
    wait_state(slurm, job, DONE, timeout=60)
    runs = runs_of(slurm, job)
    assert [state for state, _ in runs] == ["REQUEUED", "COMPLETED"]
    run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert ledger(slurm, job) == 2 * sum(elapsed for _, elapsed in runs)


def test_an_import_window_takes_no_job_of_the_test_before(site, slurm):
    """The test cluster outlives each test's database; a job of the test before that ended
    in the second this test's window began was imported with its jobs ("3 charged" where 2
    ran). The window now starts after every end sacct recorded."""
    _, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    before = submit(slurm, account=n["detection"], gpus=1, seconds=1)
    wait_state(slurm, before, DONE)
    since = import_window_start(slurm)  # taken at once, as the next test would
    ended = slurm.run("sacct", "-X", "-n", "-P", "-j", before, "--format=End").strip()
    assert datetime.fromisoformat(since) > datetime.fromisoformat(ended).replace(tzinfo=UTC)
    job = submit(slurm, account=n["detection"], gpus=1, seconds=1)
    wait_state(slurm, job, DONE)
    out = run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert "1 charged" in out
    assert ledger(slurm, before) == 0
    assert ledger(slurm, job) == sacct_gpu_seconds(slurm, [job])[job]


def test_a_requeued_job_whose_second_run_fails_is_charged_for_both_runs(site, slurm):
    """A requeued job can fail on its next run (its code, or a launch Slurm refuses): the
    importer charges what each run held, the failed one too, and reads demand once."""
    tree, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    since = import_window_start(slurm)
    # SLURM_RESTART_COUNT is set from the first requeue on: the second run exits 3.
    script = 'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then sleep 1; exit 3; fi; sleep 30'
    job = submit(slurm, account=n["detection"], gpus=2, seconds=0, script=script)
    requeue_after_a_first_run(slurm, job)
    wait_state(slurm, job, {"FAILED"}, timeout=60)
    runs = runs_of(slurm, job)
    assert [state for state, _ in runs] == ["REQUEUED", "FAILED"]
    assert all(elapsed > 0 for _, elapsed in runs)
    out = run("slurm_import_usage", "--cluster", slurm.name, "--since", since)
    assert "2 charged" in out
    assert ledger(slurm, job) == 2 * sum(elapsed for _, elapsed in runs)
    # Demand: each run's record spans its own submit (the requeue time) to its end, so the
    # job is asked for once at every moment, as sacct shows it.
    asked = slurm.run("sacct", "-X", "-n", "-P", "--duplicates", "-j", job, "--format=Submit,End")
    spans = [
        (datetime.fromisoformat(a), datetime.fromisoformat(b))
        for a, b in (line.split("|") for line in asked.splitlines())
    ]
    assert spans[0][1] <= spans[1][0]  # the runs' records do not overlap
    demand = EntitlementRecord.objects.filter(project=tree.project_a1).aggregate(
        d=Sum("demand_gpu_seconds")
    )
    assert demand["d"] == 2 * sum(int((b - a).total_seconds()) for a, b in spans)
