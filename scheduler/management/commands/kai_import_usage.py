"""``manage.py kai_import_usage``: GPUs KAI Scheduler allocated per queue → the usage ledger."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from scheduler.adapters.kai.prometheus import PrometheusError
from scheduler.adapters.kai.usage import DEFAULT_METRIC, kai_usage_import
from scheduler.management.commands.kai_queues import cluster_lookup

_AGO = re.compile(r"^(\d+)([hd])$")


def parse_instant(text: str, option: str, now: datetime) -> datetime:
    """``2026-03-01T00:00Z`` (UTC if no offset), or ``6h`` / ``2d`` before now."""
    ago = _AGO.match(text.strip())
    if ago:
        amount, unit = int(ago.group(1)), ago.group(2)
        return now - timedelta(hours=amount if unit == "h" else amount * 24)
    try:
        value = parse_datetime(text.strip())
    except ValueError:
        value = None
    if value is None:
        raise CommandError(f"{option}: {text!r} is neither an ISO date-time nor like 6h or 2d")
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Read the GPUs KAI Scheduler allocated to each project's queue from Prometheus "
        f"({DEFAULT_METRIC}) and charge them, per queue and whole hour, to the usage ledger. "
        "Re-running over the same hours charges nothing twice. See docs/kubernetes.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", required=True, help="Cluster slug (or <org>/<slug>).")
        parser.add_argument(
            "--prometheus", required=True, help="Base URL, e.g. http://prometheus:9090"
        )
        parser.add_argument(
            "--since", required=True, help="Start: ISO date-time, or 6h / 2d before now."
        )
        parser.add_argument(
            "--until", help="End (default: the last whole hour closed 5 minutes ago)."
        )
        parser.add_argument(
            "--step", type=int, default=60, help="Sample spacing in seconds (divides 3600)."
        )
        parser.add_argument("--prefix", help="The --prefix given to kai_queues (default: slug).")
        parser.add_argument(
            "--metric", default=DEFAULT_METRIC, help="Metric name (KAI's metrics namespace)."
        )
        parser.add_argument(
            "--demand-query",
            help="PromQL giving GPUs requested per queue_name (pending + running); with it, "
            "entitlement and demand are recorded too, so owed and delivery work.",
        )

    def handle(self, *args, **options) -> None:
        cluster = cluster_lookup(options["cluster"])
        now = timezone.now()
        since = parse_instant(options["since"], "--since", now)
        until = parse_instant(options["until"], "--until", now) if options["until"] else None
        try:
            result = kai_usage_import(
                cluster=cluster,
                prometheus_url=options["prometheus"],
                since=since,
                until=until,
                step_seconds=options["step"],
                prefix=options["prefix"],
                metric=options["metric"],
                demand_query=options["demand_query"],
                now=now,
            )
        except PrometheusError as exc:
            raise CommandError(f"--prometheus: {exc}. Nothing was charged.") from exc
        except ValueError as exc:
            raise CommandError(f"--{exc}") from exc
        hours = int((result.until - result.since) / timedelta(hours=1))
        self.stdout.write(
            f"{cluster.slug}: {hours} hours from {result.since:%Y-%m-%d %H:%M} to "
            f"{result.until:%Y-%m-%d %H:%M} UTC; {result.total_gpu_seconds / 3600:.3f} GPU-hours "
            f"charged in {result.rows} ledger rows; {result.already} pieces already charged"
        )
        if options["demand_query"]:
            self.stdout.write(f"  entitlement and demand: {result.entitlement_rows} rows")
        for queue, amount in sorted(result.charged.items()):
            self.stdout.write(f"  {queue}: {amount / 3600:.3f} GPU-hours")
        for queue, amount in sorted(result.unknown.items()):
            self.stdout.write(
                f"  not charged: queue {queue!r} is not a project of this cluster's tree "
                f"({amount / 3600:.3f} GPU-hours seen)"
            )
