"""``manage.py generate_usage_history``: a budget tree with a year of hourly usage, for benchmarks.

Builds one organization ("Usage history <seed>") with programs of 20 projects, clusters of
32 x 8 GPUs, allocations, cost rates, a finance user and an org admin, then one
``UsageHour`` row per (cluster, project, hour) and — unless ``--no-ledger`` — the matching
ledger rows (``UsageRecord``: budgeted, burst and free pieces of each hour;
``EntitlementRecord``: one per hour), so that ``rebuild_usage`` gives the same rollup and
reports can be checked against the ledger. The clusters' accounting cursor is set to the end
and the closed days are rolled into the daily cache (``UsageDay``).

The hourly rows are made by PostgreSQL itself (``INSERT … SELECT`` over ``generate_series``
with a seeded hash for the noise), in hour order like the live loop writes them: 300
projects x 2 clusters x 365 days (5.3 M rollup rows, about as many ledger rows of each kind)
take a few minutes on two cores. PostgreSQL only.

Usage shape: each project has a base appetite; demand follows the time of day with noise;
a project gets 50-100 % of what it asks for; its first *entitled* GPU-seconds are budgeted
and the rest burst; about 5 % of projects hold no share (all their charged time is burst)
and about a third of the hours carry some free-lane work. The ledger's pieces carry the
rollup's exact amounts; their intervals are those amounts ÷ GPUs, rounded to the microsecond.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection, transaction

from governance.management.usage_history.sql import ENTITLEMENT_SQL, LEDGER_SQL, ROLLUP_SQL
from governance.management.usage_history.tree import GPU_TYPES, HistoryWindow, usage_history_tree
from governance.models import Cluster, Organization
from governance.parsing import calendar_day
from governance.services.reports import usage_days_refresh
from scheduler.models import AccountingCursor

# The planner's statistics of every table written here, as autovacuum would gather later:
# without them it takes a 300-project tree for one row and picks nested loops over the daily
# cache (60 ms instead of 5 for a week's chart).
ANALYZED_AFTER_CACHE = (
    "governance_usageday",
    "governance_organization",
    "governance_program",
    "governance_project",
    "governance_allocation",
    "governance_cluster",
)


class Command(BaseCommand):
    help = (
        "Generate an organization with PROJECTS projects on CLUSTERS clusters and DAYS days of "
        "hourly usage (rollup and ledger), for the report benchmarks. PostgreSQL only."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--projects", type=int, default=300)
        parser.add_argument("--clusters", type=int, default=2)
        parser.add_argument("--days", type=int, default=365)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument(
            "--end",
            help="Last day (exclusive), YYYY-MM-DD in UTC; default: today.",
        )
        parser.add_argument(
            "--until-now",
            action="store_true",
            help="End at the current hour instead of midnight, as a live cluster whose "
            "accounting is current (today's hours so far are in the history).",
        )
        parser.add_argument(
            "--no-ledger",
            action="store_true",
            help="Write the hourly rollup only (faster; rebuild_usage would then empty it).",
        )

    def handle(self, *args, **options) -> None:
        if connection.vendor != "postgresql":
            raise CommandError("generate_usage_history needs PostgreSQL (set DATABASE_URL).")
        window = self._window(options)
        if Organization.objects.filter(slug=window.slug).exists():
            raise CommandError(
                f"Organization {window.slug!r} exists already: use another --seed or a fresh "
                "database."
            )
        began = time.monotonic()
        with transaction.atomic():
            usage_history_tree(window)
            self._write_usage(window, ledger=not options["no_ledger"], began=began)
        with connection.cursor() as cursor:
            for table in ("scheduler_usagehour", "scheduler_usagerecord"):
                cursor.execute(f"ANALYZE {table}")
        self._roll_into_daily_cache(window, began=began)
        with connection.cursor() as cursor:
            for table in ANALYZED_AFTER_CACHE:
                cursor.execute(f"ANALYZE {table}")
        self.stdout.write(
            self.style.SUCCESS(
                f"{window.slug}: {window.projects} projects on {window.clusters} clusters, "
                f"{(window.end - window.start).days} days from {window.start:%Y-%m-%d} to {window.end:%Y-%m-%d} "
                f"in {time.monotonic() - began:.0f} s"
            )
        )

    def _window(self, options) -> HistoryWindow:
        """The history the options ask for; ``CommandError`` on an option out of range."""
        projects, clusters, days = options["projects"], options["clusters"], options["days"]
        if not 1 <= projects <= 100_000:
            raise CommandError("--projects must be between 1 and 100000.")
        if not 1 <= clusters <= len(GPU_TYPES):
            raise CommandError(f"--clusters must be between 1 and {len(GPU_TYPES)}.")
        if not 1 <= days <= 3660:
            raise CommandError("--days must be between 1 and 3660.")
        if options["end"] and options["until_now"]:
            raise CommandError("Give --end or --until-now, not both.")
        if options["until_now"]:
            end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        elif options["end"]:
            day = calendar_day(options["end"])
            if day is None:
                raise CommandError("--end must be a date, YYYY-MM-DD.")
            end = datetime(day.year, day.month, day.day, tzinfo=UTC)
        else:
            end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        seed = options["seed"]
        return HistoryWindow(
            slug=f"usage-history-{seed}",
            seed=seed,
            projects=projects,
            clusters=clusters,
            start=end - timedelta(days=days),
            end=end,
        )

    def _write_usage(self, window: HistoryWindow, *, ledger: bool, began: float) -> None:
        """The hourly rollup and, with ``ledger``, its ledger rows, in the caller's transaction."""
        params = {"start": window.start, "end": window.end, "seed": window.seed}
        with connection.cursor() as cursor:
            self._skip_foreign_key_triggers(cursor)
            cursor.execute(ROLLUP_SQL, params)
            self.stdout.write(
                f"{cursor.rowcount:,} hourly rollup rows ({time.monotonic() - began:.0f} s)"
            )
            if not ledger:
                return
            cursor.execute(LEDGER_SQL, params)
            self.stdout.write(
                f"{cursor.rowcount:,} usage ledger rows ({time.monotonic() - began:.0f} s)"
            )
            cursor.execute(ENTITLEMENT_SQL, params)
            self.stdout.write(
                f"{cursor.rowcount:,} entitlement ledger rows ({time.monotonic() - began:.0f} s)"
            )

    def _roll_into_daily_cache(self, window: HistoryWindow, *, began: float) -> None:
        """The history is accounted up to its end; roll its days into the daily cache (a
        line per cluster says how many it rolled)."""
        for cluster in Cluster.objects.filter(organization__slug=window.slug):
            AccountingCursor.objects.update_or_create(
                cluster=cluster,
                defaults={"accounted_until": window.end, "accounted_from": window.start},
            )
            days = usage_days_refresh(cluster=cluster)
            self.stdout.write(
                f"{cluster.slug}: {days} days in the daily cache ({time.monotonic() - began:.0f} s)"
            )

    def _skip_foreign_key_triggers(self, cursor) -> None:
        """Skip the deferred foreign-key checks of the bulk inserts, when allowed.

        Django's foreign keys are ``DEFERRABLE INITIALLY DEFERRED``: checking ~15 M rows at
        COMMIT takes longer than writing them. Every key written here points at a row this
        transaction just made, so the checks cannot fail; ``session_replication_role =
        replica`` (superuser only, for this transaction only) skips them. Without the
        privilege the checks run and the command is slower.
        """
        try:
            with transaction.atomic():
                cursor.execute("SET LOCAL session_replication_role = replica")
        except DatabaseError:
            self.stdout.write("Not a superuser: foreign keys are checked at commit (slower).")
