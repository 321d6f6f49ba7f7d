"""``slurm_sync`` against a real Slurm (slurmctld, slurmd, slurmdbd, munge) the session starts:
the tree as accounts, QOS and users, drift repaired, refusals and bad connections reported.

Each test syncs the personas' tree under its own account prefix (the ``site`` fixture), so
tests sharing the one Slurm of the session never see each other's accounts. Expected values
come from the tree's literal shares and from Slurm's own commands (``sacctmgr``, ``sshare``)
read here, never from the code under test.
"""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance.models import RoleAssignment
from scheduler import tasks
from scheduler.models import SlurmConnection, UsageRecord
from tests.adapters.slurm.daemons import submit, wait_state
from tests.adapters.slurm.readings import (
    associations,
    run,
)
from tests.factories import ProgramFactory, ProjectFactory

pytestmark = pytest.mark.django_db(transaction=False)


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
