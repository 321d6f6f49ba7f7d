"""``manage.py rebuild_usage``: rebuild the hourly usage rollup from the ledgers."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from governance.models import Cluster
from scheduler.services.usage import usage_rebuild


class Command(BaseCommand):
    help = (
        "Rebuild the hourly usage rollup (UsageHour) from the usage and entitlement ledgers. "
        "The rollup is a cache: the result equals what incremental accounting produced."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", help="Slug of one cluster (default: every cluster).")

    def handle(self, *args, **options) -> None:
        clusters = Cluster.objects.order_by("id")
        if options["cluster"]:
            clusters = clusters.filter(slug=options["cluster"])
            if not clusters.exists():
                raise CommandError(f"No cluster with slug {options['cluster']!r}.")
        for cluster in clusters:
            rows = usage_rebuild(cluster=cluster)
            self.stdout.write(f"{cluster.slug}: {rows} hourly rows rebuilt from the ledger")
