"""``manage.py load_demo``: the Philly demo organization, its shares, approvals and accounts.

Built only from files bundled with the product (``scheduler/traces``): the budget tree of
``philly_budgets.json`` — organization "Philly Research", programs vision/language/speech, the
11 sized Philly VCs as projects — on one H100 cluster of 32 nodes x 8 GPUs. One demo account
per persona; the accounts and their passwords are printed at the end.

Idempotent: each piece is created only when missing, so a second run changes nothing (and
never resets a password someone changed). ``--reset`` deletes the demo organization and the
demo accounts first and builds them again.
"""

from __future__ import annotations

import csv
import json
import logging
import time
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone

from governance.choices import Role
from governance.models import (
    Allocation,
    ApprovalRequest,
    Cluster,
    Organization,
    Program,
    Project,
    RoleAssignment,
)
from governance.selectors.tree import ShareRow, node_key
from governance.services.approvals import (
    approval_approve,
    approval_reject,
    approval_request_create,
)
from governance.services.audit import audit_events_purge, audit_share_change
from governance.services.shares import check_siblings_fit, lock_parent
from scheduler.traces import PHILLY_BUDGETS, PHILLY_VCS

ORGANIZATION = {"slug": "philly", "name": "Philly Research"}
CLUSTER = {"slug": "h100", "name": "h100", "gpu_type": "h100", "nodes": 32, "gpus_per_node": 8}
# The PI's project and its program, where the demo approval requests live.
PI_PROJECT = "6214e9"
PI_PROGRAM = "vision"
# The PI's project starts below its size-proportional share; the applied request brings it
# there, so today's shares equal the JSON and the history tells how.
PI_PROJECT_START = Decimal("40.00")
# Shares start before today so pages and reports over the last weeks have budgets to show.
SHARES_SINCE = timedelta(days=30)

# username, password, what the account is. Passwords pass Django's validators (checked).
DEMO_ACCOUNTS = [
    ("admin", "budget-admin-h100", "Org admin of Philly Research; Django admin"),
    ("manager", "vision-manager-h100", "Program manager of Vision"),
    ("pi", "project-lead-6214", "PI of VC 6214e9"),
    ("researcher", "researcher-6214-gpu", "Researcher in VC 6214e9"),
    ("finance", "finance-reports-h100", "Finance: reads the whole organization"),
    ("outsider", "outsider-sees-nothing", "No role: sees nothing"),
]


def load_budget_tree() -> dict:
    """The bundled budget tree, checked against the bundled VC list."""
    tree = json.loads(PHILLY_BUDGETS.read_text())
    with open(PHILLY_VCS, newline="") as f:
        known_vcs = {row["vc"] for row in csv.DictReader(f)}
    for program in tree["children"]:
        for project in program["children"]:
            if project["name"] not in known_vcs:
                raise CommandError(f"{PHILLY_BUDGETS.name}: unknown VC {project['name']}")
    return tree


class Command(BaseCommand):
    help = "Load the Philly demo organization, shares, approval requests and demo accounts."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the demo organization and demo accounts first, then load them again.",
        )
        parser.add_argument(
            "--history-days",
            type=int,
            default=0,
            help="Also give the demo cluster this many days of past, replayed from the Philly "
            "trace by the engine into the ledger (0, the default: none; make run: 28). Only "
            "on a cluster that has run nothing yet.",
        )

    def handle(self, *args, reset: bool = False, history_days: int = 0, **options) -> None:
        if not 0 <= history_days <= 90:
            raise CommandError(f"--history-days: 0 to 90, not {history_days}.")
        tree = load_budget_tree()
        if reset:
            self._reset()
        with transaction.atomic():
            created = self._load(tree)
        if created:
            self.stdout.write(self.style.SUCCESS("Demo data loaded: " + ", ".join(created) + "."))
        else:
            self.stdout.write("Demo data already loaded; nothing changed.")
        if history_days:
            self._history(history_days)
        self._print_accounts()

    def _operator_moments(self, cluster: Cluster, now) -> None:
        """What an operator did as the history ended, through the real services (so the
        audit, the nodes page and the workload's runs show it): one node drained for a
        repair, one running workload preempted by hand."""
        from scheduler.choices import WorkloadState
        from scheduler.models import Node, Workload
        from scheduler.services.nodes import node_drain
        from scheduler.services.preemptions import workload_preempt_force

        admin = get_user_model().objects.get(username="admin")
        node = Node.objects.filter(cluster=cluster).order_by("-name").first()
        node_drain(
            node=node, actor=admin, reason="Fan replacement booked with the vendor.", now=now
        )
        running = (
            Workload.objects.filter(cluster=cluster, state=WorkloadState.RUNNING)
            .exclude(runs__run_nodes__node=node)
            .order_by("-state_changed_at", "-id")
            .first()
        )
        if running is not None:
            workload_preempt_force(
                workload=running,
                actor=admin,
                reason="Its owner reports it hung in a collective; stopped to free the GPUs.",
                now=now,
            )

    def _history(self, days: int) -> None:
        from scheduler.executors.demo_history import demo_history_build

        cluster = Cluster.objects.get(organization__slug=ORGANIZATION["slug"], slug=CLUSTER["slug"])
        # The node registrations run scheduling cycles in-process: no line per task here.
        logging.getLogger("celery.app.trace").setLevel(logging.WARNING)
        started = time.perf_counter()
        report = demo_history_build(
            cluster=cluster, days=days, progress=lambda text: self.stdout.write(f"  {text} …")
        )
        if report is None:
            self.stdout.write("The demo cluster already has a past; its history is kept.")
            return
        self._operator_moments(cluster, report.end)
        self.stdout.write(
            self.style.SUCCESS(
                f"History: {days} days from {report.start:%Y-%m-%d %H:%M} UTC, "
                f"{report.workloads:,} workloads, {report.runs:,} runs "
                f"({report.preemptions:,} preempted), {report.ledger_rows:,} ledger rows; "
                f"{report.running} running and {report.pending} pending now "
                f"({time.perf_counter() - started:.0f} s: "
                + ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items())
                + ")."
            )
        )

    # -- building ---------------------------------------------------------------------------

    def _load(self, tree: dict) -> list[str]:
        created: list[str] = []
        organization, new = Organization.objects.get_or_create(
            slug=ORGANIZATION["slug"], defaults={"name": ORGANIZATION["name"]}
        )
        if new:
            created.append("organization")
        cluster, new = Cluster.objects.get_or_create(
            organization=organization,
            slug=CLUSTER["slug"],
            defaults={k: v for k, v in CLUSTER.items() if k != "slug"},
        )
        if new:
            created.append("cluster")

        programs: dict[str, Program] = {}
        projects: dict[str, Project] = {}
        for program_spec in tree["children"]:
            program, new = Program.objects.get_or_create(
                organization=organization,
                slug=program_spec["name"],
                defaults={"name": program_spec["name"].capitalize()},
            )
            programs[program.slug] = program
            for project_spec in program_spec["children"]:
                vc = project_spec["name"]
                project, new_project = Project.objects.get_or_create(
                    program=program,
                    slug=vc,
                    defaults={"name": f"VC {vc}", "cost_centre": f"CC-{vc[:4].upper()}"},
                )
                projects[vc] = project
                new = new or new_project
            if new:
                created.append(f"program {program.slug}")

        users = self._accounts(created)
        roles = [
            (users["admin"], Role.ORG_ADMIN, {"organization": organization}),
            (users["finance"], Role.FINANCE, {"organization": organization}),
            (users["manager"], Role.PROGRAM_MANAGER, {"program": programs[PI_PROGRAM]}),
            (users["pi"], Role.PI, {"project": projects[PI_PROJECT]}),
            (users["researcher"], Role.RESEARCHER, {"project": projects[PI_PROJECT]}),
        ]
        for user, role, scope in roles:
            _, new = RoleAssignment.objects.get_or_create(user=user, role=role, **scope)
            if new:
                created.append(f"role {role} for {user.username}")

        if not Allocation.objects.filter(cluster=cluster).exists():
            self._initial_shares(tree, organization, cluster, programs, projects, users["admin"])
            created.append("shares")
        if not ApprovalRequest.objects.filter(organization=organization).exists():
            self._approval_requests(cluster, programs, projects, users)
            created.append("approval requests")
        return created

    def _accounts(self, created: list[str]) -> dict:
        User = get_user_model()
        users = {}
        for username, password, _ in DEMO_ACCOUNTS:
            user, new = User.objects.get_or_create(
                username=username, defaults={"email": f"{username}@philly.example.org"}
            )
            if new:
                validate_password(password, user)
                user.set_password(password)
                if username == "admin":
                    user.is_staff = user.is_superuser = True
                user.save()
                self._verified_email(user)
                created.append(f"account {username}")
            users[username] = user
        return users

    @staticmethod
    def _verified_email(user) -> None:
        # Sign-in by e-mail works without a verification round trip for demo accounts.
        from allauth.account.models import EmailAddress

        EmailAddress.objects.get_or_create(
            user=user, email=user.email, defaults={"verified": True, "primary": True}
        )

    def _initial_shares(self, tree, organization, cluster, programs, projects, admin) -> None:
        """The org admin's initial split, written as of ``SHARES_SINCE`` ago.

        Written here rather than through ``allocation_split``, which refuses start dates in
        the past (it never rewrites history); the same parent lock and 100 % check guard it.
        """
        since = timezone.now() - SHARES_SINCE
        reason = "Initial budget: shares proportional to each VC's size in the Philly trace."
        groups = [(organization, [(programs[p["name"]], p["share"]) for p in tree["children"]])]
        for program_spec in tree["children"]:
            shares = []
            for project_spec in program_spec["children"]:
                share = project_spec["share"]
                if project_spec["name"] == PI_PROJECT:
                    share = PI_PROJECT_START
                shares.append((projects[project_spec["name"]], share))
            groups.append((programs[program_spec["name"]], shares))
        for parent, shares in groups:
            lock_parent(parent)
            rows = [
                ShareRow(node_key(node), Decimal(str(share)), since, None, (2, i))
                for i, (node, share) in enumerate(shares)
            ]
            check_siblings_fit(parent=parent, cluster=cluster, new_rows=rows)
            for node, share in shares:
                Allocation.objects.create(
                    cluster=cluster,
                    program=node if isinstance(node, Program) else None,
                    project=node if isinstance(node, Project) else None,
                    percent=Decimal(str(share)),
                    valid_from=since,
                    set_by=admin,
                    reason=reason,
                    created_at=since,
                )
            audit_share_change(
                actor=admin,
                parent=parent,
                cluster=cluster,
                before={},  # no share before the first split
                after={node: Decimal(str(share)) for node, share in shares},
                valid_from=since,
                valid_to=None,
                reason=reason,
                at=since,
            )

    def _approval_requests(self, cluster, programs, projects, users) -> None:
        """A rejected, an applied and a waiting request by the PI, decided by the manager,
        through the real services at the moments they happened in the demo's past: rejected
        three weeks ago, applied nine days ago (the history replay schedules with the share
        it set from then on), one waiting since yesterday."""
        vision, project = programs[PI_PROGRAM], projects[PI_PROJECT]
        pi, manager = users["pi"], users["manager"]
        target = self._json_share(PI_PROJECT)
        now = timezone.now()

        rejected = approval_request_create(
            actor=pi,
            parent=vision,
            cluster=cluster,
            percents={project: Decimal("60.00")},
            reason="Scaling study for the CVPR submission needs 60 % of vision.",
            now=now - timedelta(days=21, hours=3),
        )
        approval_reject(
            actor=manager,
            approval_request=rejected,
            comment="That would take most of b436b2's share while its run is going. "
            "Ask again once it finishes.",
            now=now - timedelta(days=20, hours=22),
        )
        applied = approval_request_create(
            actor=pi,
            parent=vision,
            cluster=cluster,
            percents={project: target},
            reason="Two new students start this month; bring 6214e9 to its size-proportional share.",
            now=now - timedelta(days=10, hours=5),
        )
        approval_approve(
            actor=manager,
            approval_request=applied,
            comment="Agreed: the free 2.1 % is yours.",
            now=now - timedelta(days=9, hours=1),
        )
        today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
        next_monday = today + timedelta(days=7 - today.weekday())
        approval_request_create(
            actor=pi,
            parent=vision,
            cluster=cluster,
            percents={project: Decimal("30.00")},
            reason="Two weeks of paper writing: lending GPU time back to the program.",
            effective_from=next_monday,
            effective_to=next_monday + timedelta(days=14),
            now=now - timedelta(hours=20),
        )

    @staticmethod
    def _json_share(vc: str) -> Decimal:
        for program in load_budget_tree()["children"]:
            for project in program["children"]:
                if project["name"] == vc:
                    return Decimal(str(project["share"]))
        raise CommandError(f"{vc} is not in {PHILLY_BUDGETS.name}")

    # -- reset and output -------------------------------------------------------------------

    def _reset(self) -> None:
        User = get_user_model()
        try:
            with transaction.atomic():
                organization = Organization.objects.filter(slug=ORGANIZATION["slug"]).first()
                if organization:
                    # The audit trail goes with the organization (the only purge it allows).
                    audit_events_purge(organization=organization)
                    Allocation.objects.filter(cluster__organization=organization).delete()
                    ApprovalRequest.objects.filter(organization=organization).delete()
                    RoleAssignment.objects.filter(organization=organization).delete()
                    Project.objects.filter(program__organization=organization).delete()
                    organization.programs.all().delete()
                    organization.clusters.all().delete()
                    organization.delete()
                User.objects.filter(username__in=[a[0] for a in DEMO_ACCOUNTS]).delete()
        except ProtectedError as exc:
            raise CommandError(
                "Cannot reset: other records (workloads, usage, ...) still refer to the demo "
                f"organization: {sorted({str(o) for o in exc.protected_objects})[:5]}"
            ) from exc
        self.stdout.write("Demo organization and accounts deleted.")

    def _print_accounts(self) -> None:
        self.stdout.write("")
        self.stdout.write(f"Demo accounts (sign in at {settings.SITE_URL}/):")
        header = ("Username", "Password", "Role")
        rows = [header, *DEMO_ACCOUNTS]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        line = "  +-" + "-+-".join("-" * w for w in widths) + "-+"
        self.stdout.write(line)
        for i, row in enumerate(rows):
            self.stdout.write(
                "  | " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
            )
            if i == 0:
                self.stdout.write(line)
        self.stdout.write(line)
