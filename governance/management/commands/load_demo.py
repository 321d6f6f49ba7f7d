"""``manage.py load_demo``: the Philly demo organization, its shares, approvals and accounts.

The pieces live in ``governance.management.demo``. Built only from files bundled with the product (``scheduler/traces``): the budget tree of
``philly_budgets.json`` — organization "Philly Research", programs vision/language/speech, the
11 sized Philly VCs as projects — on one H100 cluster of 32 nodes x 8 GPUs. One demo account
per persona; the accounts and their passwords are printed at the end.

Idempotent: each piece is created only when missing, so a second run changes nothing (and
never resets a password someone changed). ``--reset`` deletes the demo organization and the
demo accounts first and builds them again.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import ProtectedError

from governance.management.demo.accounts import (
    DEMO_ACCOUNTS,
    demo_accounts_ensure,
    demo_accounts_table,
    demo_roles_ensure,
)
from governance.management.demo.requests import demo_requests_create
from governance.management.demo.tree import (
    CLUSTER,
    ORGANIZATION,
    demo_tree_ensure,
    initial_shares_write,
    load_budget_tree,
)
from governance.models import (
    Allocation,
    ApprovalRequest,
    Cluster,
    Organization,
    Project,
    RoleAssignment,
)
from governance.services.audit import audit_events_purge

# The browser tests read the demo accounts from here.
__all__ = ["DEMO_ACCOUNTS", "Command"]


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

    def _load(self, spec: dict) -> list[str]:
        """Make whatever of the demo is missing; return what was made, in words."""
        created: list[str] = []
        tree = demo_tree_ensure(spec, created)
        users = demo_accounts_ensure(created)
        demo_roles_ensure(tree, users, created)
        if not Allocation.objects.filter(cluster=tree.cluster).exists():
            initial_shares_write(spec, tree, users["admin"])
            created.append("shares")
        if not ApprovalRequest.objects.filter(organization=tree.organization).exists():
            demo_requests_create(tree, users)
            created.append("approval requests")
        return created

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
        for line in demo_accounts_table():
            self.stdout.write(line)
