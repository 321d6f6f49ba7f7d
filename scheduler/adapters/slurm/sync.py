"""``slurm_sync``: reconcile one cluster's budget tree into its Slurm (read → plan → apply).

The tree → Slurm mapping (docs/slurm.md):
- one account for the organization (under the connection's ``parent_account``), one per
  program (under the organization) and one per project (under its program), every program
  and project of the organization — a project with no share still runs, unbudgeted;
- ``Fairshare`` = the node's share of its parent on this cluster in hundredths of a percent
  (33.33 % → 3333; no share → 0). Fair Tree ranks siblings by usage share ÷ normalised
  shares, the same order as our engine's usage share ÷ share;
- project members — users holding a project role (PI, researcher) on the project — get a user
  association under the project's account. Managers and finance govern; they do not run jobs;
- QOS: ``…-free`` (``UsageFactor=0``: the free lane, minimum runtime 0) and one
  ``…-min<N>h`` per minimum-runtime class with ``PreemptExemptTime=N h`` that may preempt
  free-lane jobs. The organization account holds them all (children inherit); the default
  is the shortest charged class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.utils import timezone

from governance.choices import PROJECT_ROLES
from governance.models import Program, Project, RoleAssignment
from governance.selectors.tree import shares_at
from scheduler.adapters.slurm.client import SlurmClient, SlurmError
from scheduler.adapters.slurm.names import slurm_safe_name, unique_names
from scheduler.adapters.slurm.plan import Account, Change, Desired, Plan, Qos, plan_sync
from scheduler.services.locks import locked_transaction

# Minimum-runtime classes (hours) that get a QOS of their own; 0 is the free QOS.
MIN_RUNTIME_CLASSES_HOURS = (1, 2, 4, 8)
# Advisory lock key (beside scheduler.services.locks' 7301/7302); the second key is the cluster.
SLURM_SYNC_LOCK = 7310
_LOGIN = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


@dataclass
class AccountMap:
    """Account names of one connection's tree: project id → name and name → project id."""

    organization: str
    programs: dict[int, str]
    projects: dict[int, str]

    @property
    def project_by_account(self) -> dict[str, int]:
        """The project charged for a job run under each project account."""
        return {name: project_id for project_id, name in self.projects.items()}


def qos_names(connection) -> tuple[str, dict[int, str]]:
    """The free QOS name and ``{hours: QOS name}`` of the charged classes."""
    base = f"{connection.account_prefix}{connection.cluster.organization.slug}"
    free = slurm_safe_name(f"{base}-free")
    return free, {h: slurm_safe_name(f"{base}-min{h}h") for h in MIN_RUNTIME_CLASSES_HOURS}


def slurm_account_map(*, connection) -> AccountMap:
    """The Slurm account name of every node of the connection's organization.

    Raises ``SlurmNameError`` when two nodes would share a name (or take the parent's).
    """
    organization = connection.cluster.organization
    prefix = connection.account_prefix
    programs = list(Program.objects.filter(organization=organization).order_by("id"))
    projects = list(
        Project.objects.filter(program__organization=organization)
        .select_related("program")
        .order_by("id")
    )
    raw = {("organization", organization.id): f"{prefix}{organization.slug}"}
    raw |= {("program", p.id): f"{prefix}{organization.slug}_{p.slug}" for p in programs}
    raw |= {("project", p.id): f"{prefix}{p.program.slug}_{p.slug}" for p in projects}
    reserved = {connection.parent_account: "the parent account"}
    names = unique_names(raw, reserved=reserved)
    return AccountMap(
        organization=names[("organization", organization.id)],
        programs={p.id: names[("program", p.id)] for p in programs},
        projects={p.id: names[("project", p.id)] for p in projects},
    )


def _fairshare(percent: Decimal | None) -> int:
    """A share in percent as Slurm's integer ``Fairshare`` (hundredths of a percent)."""
    return int((percent or Decimal(0)) * 100)


def slurm_desired_state(*, connection, at: datetime | None = None) -> tuple[Desired, AccountMap]:
    """What Slurm should hold for ``connection``'s cluster according to the tree at ``at``."""
    at = at or timezone.now()
    cluster = connection.cluster
    names = slurm_account_map(connection=connection)
    shares = shares_at(cluster=cluster, at=at)
    free, charged = qos_names(connection)
    qos = [Qos(name=free, usage_factor=Decimal(0), preempt_exempt_seconds=0)]
    qos += [
        Qos(name=name, preempt_exempt_seconds=hours * 3600, preempt=(free,))
        for hours, name in sorted(charged.items())
    ]
    organization = cluster.organization
    accounts = [
        Account(
            name=names.organization,
            parent=connection.parent_account,
            fairshare=None,
            qos=frozenset(q.name for q in qos),
            default_qos=charged[min(charged)],
            description=organization.name[:60],
        )
    ]
    programs = Program.objects.filter(organization=organization).order_by("id")
    for program in programs:
        accounts.append(
            Account(
                name=names.programs[program.id],
                parent=names.organization,
                fairshare=_fairshare(shares.get(("program", program.id))),
                description=program.name[:60],
            )
        )
    projects = Project.objects.filter(program__organization=organization).order_by("id")
    for project in projects:
        accounts.append(
            Account(
                name=names.projects[project.id],
                parent=names.programs[project.program_id],
                fairshare=_fairshare(shares.get(("project", project.id))),
                description=project.name[:60],
            )
        )
    users: set[tuple[str, str]] = set()
    skipped: list[str] = []
    for username, is_active, project_id in (
        RoleAssignment.objects.filter(
            role__in=PROJECT_ROLES, project__program__organization=organization
        )
        .values_list("user__username", "user__is_active", "project_id")
        .order_by("user__username", "project_id")
    ):
        if not is_active:
            continue
        if not _LOGIN.match(username):
            skipped.append(f"{username}: not a valid login name for Slurm")
            continue
        users.add((username, names.projects[project_id]))
    desired = Desired(
        cluster=connection.slurm_cluster,
        organization_account=names.organization,
        accounts=accounts,
        users=users,
        qos=qos,
        skipped_users=sorted(set(skipped)),
    )
    return desired, names


@dataclass
class SyncReport:
    """What one ``slurm_sync`` did: the plan, what was applied, and where it stopped."""

    plan: Plan
    noop: bool
    applied: list[Change] = field(default_factory=list)
    failed: Change | None = None
    error: str = ""
    remaining: list[Change] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """The plan was applied in full (or nothing was to be applied)."""
        return not self.error

    def lines(self) -> list[str]:
        """The report as lines for a terminal or the connection's last summary."""
        out = []
        if self.plan.empty:
            out.append("Slurm matches the budget tree: no changes.")
        else:
            verb = "would apply" if self.noop else "plan"
            out.append(f"{len(self.plan.changes)} change(s) ({verb}):")
            out += [f"  {c}" for c in self.plan.changes]
        for name in self.plan.unknown_accounts:
            out.append(
                f"unknown account {name}: in Slurm under the organization, not in the tree "
                "(kept; remove with --remove-unknown)"
            )
        out += [f"skipped user {u}" for u in self.plan.skipped_users]
        if self.applied and not self.noop:
            out.append(f"applied {len(self.applied)} change(s).")
        if self.error:
            out.append(f"STOPPED: {self.error}")
            if self.failed:
                out.append(f"  refused: {self.failed}")
            out += [f"  not applied: {c}" for c in self.remaining]
        return out


def slurm_sync(
    *, connection, noop: bool = False, remove_unknown: bool | None = None, client=None
) -> SyncReport:
    """Reconcile ``connection``'s cluster tree into Slurm; returns what was planned and done.

    Refuses a tree whose names Slurm cannot take (``SlurmNameError``) before Slurm is read;
    reads Slurm (unreachable: ``SlurmError`` before anything changes); then applies the plan
    in order unless ``noop``. A refused change stops the apply: the report
    lists what was applied and what was not, and ``ok`` is false. ``remove_unknown`` defaults
    to the connection's setting. Records the outcome on the connection.
    """
    client = client or SlurmClient.for_connection(connection)
    if remove_unknown is None:
        remove_unknown = connection.remove_unknown
    # One sync per cluster at a time (the beat and an operator's command could meet): the
    # second would plan from a state the first is changing. The lock lives for the sync.
    with locked_transaction(SLURM_SYNC_LOCK, connection.cluster_id, wait=False) as held:
        if not held:
            raise SlurmError(
                f"another slurm_sync of {connection.slurm_cluster} is running; try again later"
            )
        return _sync(connection, noop=noop, remove_unknown=remove_unknown, client=client)


def _sync(connection, *, noop: bool, remove_unknown: bool, client) -> SyncReport:
    desired, _ = slurm_desired_state(connection=connection)
    current = client.read_current()
    plan = plan_sync(desired, current, remove_unknown=remove_unknown)
    report = SyncReport(plan=plan, noop=noop)
    if not noop:
        for index, change in enumerate(plan.changes):
            try:
                client.sacctmgr(*change.args)
            except SlurmError as exc:
                report.failed = change
                report.error = str(exc)
                report.remaining = plan.changes[index + 1 :]
                break
            report.applied.append(change)
        if report.ok and plan.changes:
            # Verify: a second plan must be empty, or Slurm silently ignored something.
            again = plan_sync(desired, client.read_current(), remove_unknown=remove_unknown)
            if not again.empty:
                report.error = "Slurm did not take every change: " + "; ".join(
                    str(c) for c in again.changes
                )
                report.remaining = again.changes
        type(connection).objects.filter(pk=connection.pk).update(
            last_sync_at=timezone.now(), last_sync_summary="\n".join(report.lines())[:4000]
        )
    return report
