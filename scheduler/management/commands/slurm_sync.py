"""``manage.py slurm_sync``: reconcile a cluster's budget tree into its Slurm associations."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.adapters.slurm.client import SlurmError
from scheduler.adapters.slurm.connections import ConnectionNotFound, slurm_connection_lookup
from scheduler.adapters.slurm.names import SlurmNameError
from scheduler.adapters.slurm.sync import slurm_sync


class Command(BaseCommand):
    help = (
        "Read Slurm's accounts, associations and QOS (sacctmgr), compare them with the budget "
        "tree of the cluster, print the changes and apply them unless --noop. Unknown accounts "
        "under the organization are reported; removed only with --remove-unknown. "
        "See docs/slurm.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--cluster", required=True, help="Slurm cluster name or <org>/<cluster> slug."
        )
        parser.add_argument("--noop", action="store_true", help="Print the plan, change nothing.")
        parser.add_argument(
            "--remove-unknown",
            action="store_true",
            help="Also remove accounts under the organization that the tree does not hold.",
        )

    def handle(self, *args, cluster: str, noop: bool, remove_unknown: bool, **options) -> None:
        try:
            connection = slurm_connection_lookup(name=cluster)
            report = slurm_sync(
                connection=connection, noop=noop, remove_unknown=remove_unknown or None
            )
        except (ConnectionNotFound, SlurmNameError) as exc:
            raise CommandError(str(exc)) from exc
        except SlurmError as exc:
            raise CommandError(f"Slurm: {exc} — nothing was changed.") from exc
        for line in report.lines():
            self.stdout.write(line)
        if not report.ok:
            raise CommandError(
                f"stopped after {len(report.applied)} of {len(report.plan.changes)} change(s): "
                f"{report.error}"
            )
