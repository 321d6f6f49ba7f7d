"""The Slurm adapter against a real Slurm (slurmctld, slurmd, slurmdbd, munge) it starts.

Each test syncs the personas' tree under its own account prefix, so tests sharing the one
Slurm of the session never see each other's accounts. Expected values come from the tree's
literal shares and from Slurm's own commands (``sacctmgr``, ``sshare``, ``sacct``) read here,
never from the code under test.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum

from governance.models import RoleAssignment
from governance.selectors.reports import usage_report
from governance.selectors.visibility import user_visibility
from scheduler import tasks
from scheduler.models import EntitlementRecord, Node, SlurmConnection, UsageHour, UsageRecord
from tests.adapters.slurm.daemons import import_window_start, submit, wait_running, wait_state
from tests.factories import ProgramFactory, ProjectFactory, UserFactory, researcher_of

pytestmark = pytest.mark.django_db(transaction=False)
_prefixes = itertools.count(1)
DONE = {"COMPLETED"}


@pytest.fixture
def site(request, personas, slurm):
    """The personas' cluster connected to the test Slurm, with root as a member of A1.

    Account names come from slugs, so tests using the shared prefix ``s`` find the tree
    already in Slurm (a sync then changes nothing: fast). A test marked ``fresh_slurm_tree``
    gets a prefix of its own, so it builds the tree from nothing. Tests that change Slurm by
    hand put it back.
    """
    fresh = request.node.get_closest_marker("fresh_slurm_tree") is not None
    prefix = f"t{next(_prefixes)}" if fresh else "s"
    connection = SlurmConnection.objects.create(
        cluster=personas.cluster,
        slurm_cluster=slurm.name,
        slurm_conf=str(slurm.conf),
        account_prefix=prefix,
    )
    # Jobs are submitted as root (the test process): root is a researcher of Detection.
    researcher_of(personas.project_a1, UserFactory(username="root"))
    names = {
        "org": f"{prefix}acme",
        "vision": f"{prefix}acme_vision",
        "language": f"{prefix}acme_language",
        "detection": f"{prefix}vision_detection",
        "segmentation": f"{prefix}vision_segmentation",
        "translation": f"{prefix}language_translation",
        "summaries": f"{prefix}language_summaries",
        "free": f"{prefix}acme-free",
        "min1h": f"{prefix}acme-min1h",
    }
    return personas, connection, names


def run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out)
    return out.getvalue()


def associations(slurm) -> dict[tuple[str, str], dict[str, str]]:
    """``sacctmgr show assoc`` of the test cluster: (account, user) → fields."""
    out = slurm.run(
        "sacctmgr", "-P", "-n", "show", "assoc", f"cluster={slurm.name}",
        "format=Account,User,ParentName,Fairshare,QOS,DefaultQOS",
    )  # fmt: skip
    rows = {}
    for line in out.splitlines():
        account, user, parent, fairshare, qos, default_qos = line.split("|")
        rows[(account, user)] = {
            "parent": parent, "fairshare": fairshare, "qos": qos, "default_qos": default_qos,
        }  # fmt: skip
    return rows


def sacct_gpu_seconds(slurm, jobs: list[str]) -> dict[str, int]:
    """GPUs x elapsed seconds per job, read from ``sacct`` here (not by the adapter)."""
    out = slurm.run(
        "sacct", "-X", "-n", "-P", "-j", ",".join(jobs), "--format=JobIDRaw,ElapsedRaw,AllocTRES"
    )
    result = {}
    for line in out.splitlines():
        job, elapsed, tres = line.split("|")
        gpus = re.search(r"gres/gpu=(\d+)", tres)
        result[job] = int(elapsed) * (int(gpus.group(1)) if gpus else 0)
    return result


def ledger(slurm, job: str) -> Decimal:
    total = UsageRecord.objects.filter(source="slurm", external_id=f"{slurm.name}:{job}")
    return total.aggregate(s=Sum("gpu_seconds"))["s"] or Decimal(0)


@pytest.mark.fresh_slurm_tree
def test_sync_builds_the_tree_in_slurm_and_a_second_sync_changes_nothing(site, slurm):
    _, _, n = site
    out = run("slurm_sync", "--cluster", slurm.name)
    assert "change(s)" in out
    assoc = associations(slurm)
    # Parents as in the tree; Fairshare = share in hundredths of a percent (60 % → 6000).
    expected = {
        n["org"]: ("root", None),
        n["vision"]: (n["org"], "6000"),
        n["language"]: (n["org"], "4000"),
        n["detection"]: (n["vision"], "5000"),
        n["segmentation"]: (n["vision"], "3000"),
        n["translation"]: (n["language"], "7000"),
        n["summaries"]: (n["language"], "3000"),
    }
    for account, (parent, fairshare) in expected.items():
        row = assoc[(account, "")]
        assert row["parent"] == parent, account
        if fairshare is not None:
            assert row["fairshare"] == fairshare, account
    # QOS: held by the organization (children inherit), default the shortest charged class.
    assert set(assoc[(n["detection"], "")]["qos"].split(",")) >= {n["free"], n["min1h"]}
    assert assoc[(n["org"], "")]["default_qos"] == n["min1h"]
    qos = slurm.run(
        "sacctmgr", "-P", "-n", "show", "qos", f"name={n['free']},{n['min1h']}",
        "format=Name,UsageFactor,PreemptExemptTime,Preempt",
    )  # fmt: skip
    rows = {line.split("|")[0]: line.split("|") for line in qos.splitlines()}
    assert float(rows[n["free"]][1]) == 0.0
    assert rows[n["min1h"]][2] == "01:00:00" and rows[n["min1h"]][3] == n["free"]
    # Project members (PI, researcher) are users of the project's account; managers are not.
    users = {user for (account, user) in assoc if account == n["detection"] and user}
    assert users == {"pi", "researcher", "root"}
    assert not any(user == "program_manager" for (_, user) in assoc)
    # sshare shows the same tree with the same raw shares.
    share_rows = slurm.run("sshare", "-P", "-n", "-a", "-o", "Account,User,RawShares")
    raw = {
        line.split("|")[0].strip(): line.split("|")[2]
        for line in share_rows.splitlines()
        if not line.split("|")[1]
    }
    assert raw[n["vision"]] == "6000" and raw[n["summaries"]] == "3000"
    # Fair Tree compares siblings by normalised shares: Detection 50 / (50 + 30) of Vision.
    norm_rows = slurm.run("sshare", "-P", "-n", "-a", "-o", "Account,User,NormShares")
    norm = {
        line.split("|")[0].strip(): float(line.split("|")[2])
        for line in norm_rows.splitlines()
        if not line.split("|")[1]
    }
    assert norm[n["vision"]] == pytest.approx(0.6, abs=1e-6)
    assert norm[n["detection"]] == pytest.approx(50 / 80, abs=1e-6)
    assert norm[n["translation"]] == pytest.approx(0.7, abs=1e-6)

    again = run("slurm_sync", "--cluster", slurm.name)
    assert "no changes" in again

    # A researcher who leaves the project loses the association at the next sync.
    RoleAssignment.objects.filter(user__username="researcher").delete()
    left = run("slurm_sync", "--cluster", slurm.name)
    assert f"remove user researcher@{n['detection']}" in left
    assert (n["detection"], "researcher") not in associations(slurm)
    assert (n["detection"], "pi") in associations(slurm)


def test_the_demo_tree_syncs_into_slurm_and_a_second_sync_changes_nothing(slurm):
    """The tree `make run` shows (load_demo, from the Philly trace) as Slurm accounts.

    Expected accounts, parents and Fairshare values are read here from the demo's current
    allocation rows (share in hundredths of a percent), not from the adapter.
    """
    from django.db.models import Q
    from django.utils import timezone

    from governance.models import Allocation, Cluster

    call_command("load_demo", stdout=StringIO())
    cluster = Cluster.objects.get(organization__slug="philly", slug="h100")
    SlurmConnection.objects.create(
        cluster=cluster, slurm_cluster=slurm.name, slurm_conf=str(slurm.conf), account_prefix="d"
    )
    now = timezone.now()
    current = Allocation.objects.filter(cluster=cluster, valid_from__lte=now).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=now)
    )
    org = "dphilly"
    expected = {}
    for allocation in current.select_related("program", "project__program"):
        if allocation.program_id:
            account, parent = f"{org}_{allocation.program.slug}", org
        else:
            program = allocation.project.program
            account = f"d{program.slug}_{allocation.project.slug}"
            parent = f"{org}_{program.slug}"
        expected[account] = (parent, str(int(allocation.percent * 100)))
    assert len(expected) >= 10  # programs and projects of the demo

    first = run("slurm_sync", "--cluster", slurm.name)
    assert "change(s)" in first
    assoc = associations(slurm)
    assert assoc[(org, "")]["parent"] == "root"
    for account, (parent, fairshare) in expected.items():
        assert assoc[(account, "")]["parent"] == parent, account
        assert assoc[(account, "")]["fairshare"] == fairshare, account
    # sshare shows every account of the tree.
    shown = {
        line.split("|")[0].strip()
        for line in slurm.run("sshare", "-P", "-n", "-a", "-o", "Account,User").splitlines()
    }
    assert set(expected) | {org} <= shown

    assert "no changes" in run("slurm_sync", "--cluster", slurm.name)


def test_a_hand_made_drift_is_reported_then_repaired(site, slurm):
    _, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    slurm.run(
        "sacctmgr", "-i", "modify", "account", f"name={n['vision']}", f"cluster={slurm.name}",
        "set", "fairshare=1",
    )  # fmt: skip
    slurm.run("sacctmgr", "-i", "modify", "qos", f"name={n['free']}", "set", "UsageFactor=1")
    assert associations(slurm)[(n["vision"], "")]["fairshare"] == "1"
    noop = run("slurm_sync", "--cluster", slurm.name, "--noop")
    assert f"modify account {n['vision']}: Fairshare 1 → 6000" in noop
    assert f"modify qos {n['free']}: UsageFactor 1" in noop
    assert associations(slurm)[(n["vision"], "")]["fairshare"] == "1"  # --noop changed nothing
    run("slurm_sync", "--cluster", slurm.name)
    assert associations(slurm)[(n["vision"], "")]["fairshare"] == "6000"
    factor = slurm.run(
        "sacctmgr", "-P", "-n", "show", "qos", f"name={n['free']}", "format=UsageFactor"
    )
    assert float(factor) == 0.0
    assert "no changes" in run("slurm_sync", "--cluster", slurm.name)


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


def test_a_refused_change_stops_the_sync_and_reports_what_was_and_was_not_applied(site, slurm):
    _, _, n = site
    run("slurm_sync", "--cluster", slurm.name)
    stray = f"{n['org']}_busy"
    slurm.run("sacctmgr", "-i", "add", "account", stray, f"parent={n['org']}",
              f"cluster={slurm.name}")  # fmt: skip
    slurm.run("sacctmgr", "-i", "add", "user", "root", f"account={stray}",
              f"cluster={slurm.name}")  # fmt: skip
    job = submit(slurm, account=stray, gpus=1, seconds=20)
    wait_state(slurm, job, {"RUNNING"})
    slurm.run("sacctmgr", "-i", "modify", "account", f"name={n['language']}",
              f"cluster={slurm.name}", "set", "fairshare=7")  # fmt: skip
    # Slurm refuses to remove an account with a running job; the fairshare repair comes first.
    with pytest.raises(CommandError, match=r"stopped after \d+ of \d+ change"):
        run("slurm_sync", "--cluster", slurm.name, "--remove-unknown")
    assoc = associations(slurm)
    assert assoc[(n["language"], "")]["fairshare"] == "4000"  # applied
    assert (stray, "") in assoc  # refused, still there
    summary = SlurmConnection.objects.get(slurm_cluster=slurm.name).last_sync_summary
    assert f"refused: remove account {stray}" in summary
    assert "active" in summary.lower()  # Slurm's own reason is passed on
    slurm.run("scancel", job)
    wait_state(slurm, job, {"CANCELLED"})
    run("slurm_sync", "--cluster", slurm.name, "--remove-unknown")  # put Slurm back


@pytest.mark.fresh_slurm_tree
def test_unreachable_slurm_is_a_clear_error_and_changes_nothing(site, slurm, tmp_path):
    _, connection, n = site
    closed_port = tmp_path / "slurm.conf"
    conf = slurm.conf.read_text()
    conf = re.sub(r"AccountingStoragePort=\d+", "AccountingStoragePort=1", conf)
    closed_port.write_text(conf)
    connection.slurm_conf = str(closed_port)
    connection.save()
    with pytest.raises(CommandError, match=r"Slurm: .*nothing was changed"):
        run("slurm_sync", "--cluster", slurm.name)
    assert (n["org"], "") not in associations(slurm)
    with pytest.raises(CommandError, match=r"Slurm: .*nothing was charged"):
        run("slurm_import_usage", "--cluster", slurm.name, "--since", "2026-01-01T00:00:00Z")
    assert not UsageRecord.objects.exists()


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


def test_scheduled_tasks_sync_and_import_each_enabled_connection(site, slurm):
    _, connection, _ = site
    assert tasks.slurm_sync.run(connection.id) == "ok"
    assert tasks.slurm_import_usage.run(connection.id) == "ok"
    connection.refresh_from_db()
    assert connection.last_sync_at and connection.last_import_at
    assert connection.usage_imported_until is not None
    SlurmConnection.objects.filter(pk=connection.pk).update(enabled=False)
    assert tasks.slurm_sync.run(connection.id) == "disabled"
    # The beat entries enqueue nothing when no connection is enabled.
    assert tasks.slurm_sync_all.run() == 0
    assert tasks.slurm_import_usage_all.run() == 0


@pytest.mark.fresh_slurm_tree
def test_tree_names_that_collide_in_slurm_are_refused_before_any_change(site, slurm):
    tree, _, n = site
    # Program "vision" + project "a_b" and program "vision_a" + project "b" → one name.
    program = ProgramFactory(organization=tree.organization, name="Vision A", slug="vision_a")
    ProjectFactory(program=program, name="B", slug="b")
    ProjectFactory(program=tree.program_a, name="A B", slug="a_b")
    with pytest.raises(CommandError, match=r"would share one Slurm name .*vision_a_b"):
        run("slurm_sync", "--cluster", slurm.name)
    assert (n["org"], "") not in associations(slurm)


def runs_of(slurm, job: str) -> list[tuple[str, int]]:
    """Every run of a job as ``sacct --duplicates`` records it: (state, elapsed seconds)."""
    out = slurm.run(
        "sacct", "-X", "-n", "-P", "--duplicates", "-j", job, "--format=State,ElapsedRaw"
    )
    return [(line.split("|")[0], int(line.split("|")[1])) for line in out.splitlines()]


def requeue_after_a_first_run(slurm, job: str) -> None:
    """Requeue a job once it has run for a second, as a preemption with PreemptMode=REQUEUE
    does; Slurm starts it again itself once its requeue hold (BeginTime) has passed."""
    wait_running(slurm, job, ran=1)
    slurm.run("scontrol", "requeue", job)


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
