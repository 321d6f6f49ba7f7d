"""``manage.py slurm_import_usage``: charge Slurm jobs (sacct) to the usage ledger."""

from __future__ import annotations

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from scheduler.adapters.slurm.client import SlurmError
from scheduler.adapters.slurm.connections import ConnectionNotFound, slurm_connection_lookup
from scheduler.adapters.slurm.usage import slurm_usage_import


def _instant(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        parsed = None
    if parsed is None:
        raise CommandError(f"{option}: {value!r} is not an ISO date-time (2026-03-01T00:00Z)")
    if parsed.tzinfo is None:
        raise CommandError(f"{option}: {value!r} has no timezone; add Z or +00:00")
    return parsed


class Command(BaseCommand):
    help = (
        "Read the jobs of a Slurm cluster (sacct) that ran since --since and charge their "
        "GPU-seconds (gres/gpu of AllocTRES x elapsed) to the projects of their accounts. "
        "Safe to re-run. See docs/slurm.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--cluster", required=True, help="Slurm cluster name or <org>/<cluster> slug."
        )
        parser.add_argument(
            "--since", help="ISO date-time with zone; default: the last import (or a day ago)."
        )
        parser.add_argument("--until", help="ISO date-time with zone; default: now.")

    def handle(self, *args, cluster: str, since: str | None, until: str | None, **options):
        start, end = _instant(since, "--since"), _instant(until, "--until")
        try:
            connection = slurm_connection_lookup(name=cluster)
            report = slurm_usage_import(connection=connection, since=start, until=end)
        except ConnectionNotFound as exc:
            raise CommandError(str(exc)) from exc
        except ValueError as exc:
            raise CommandError(f"--{exc}") from exc
        except SlurmError as exc:
            raise CommandError(f"Slurm: {exc} — nothing was charged.") from exc
        for line in report.lines():
            self.stdout.write(line)
