"""``manage.py trace_openb``: convert Alibaba's openb GPU pod list into a canonical trace.

Thin wrapper around ``scheduler.simulator.openb``; the rules are in its docstring and in
``docs/simulation.md``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.simulator.openb import openb_trace
from scheduler.simulator.synthetic import write_canonical
from scheduler.simulator.traces import TraceError


class Command(BaseCommand):
    """Read an openb pod list, write a canonical CSV with teams dealt by a hash."""

    help = (
        "Convert Alibaba's cluster-trace-gpu-v2023 pod list (openb_pod_list_default.csv) into "
        "a canonical trace (docs/simulation.md, 'A second real trace')."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--pods", required=True, help="openb_pod_list_*.csv")
        parser.add_argument("--teams", default="8", help="teams to deal the pods to (8)")
        parser.add_argument("--out", required=True, help="canonical CSV to write")

    def handle(self, *args, **options) -> None:
        teams = int(options["teams"]) if options["teams"].isdecimal() else 0
        if teams < 1:
            raise CommandError(f"--teams: {options['teams']!r} is not a whole number ≥ 1")
        try:
            with open(options["pods"], encoding="utf-8", newline="") as stream:
                made = openb_trace(stream, teams=teams, source=options["pods"])
        except OSError as exc:
            raise CommandError(f"--pods: cannot read: {exc.strerror or exc}") from None
        except (TraceError, UnicodeDecodeError) as exc:
            raise CommandError(f"--pods: {exc}") from None
        path = write_canonical(made.trace, options["out"])
        self.stdout.write(
            f"{path}: {len(made.trace.jobs):,} jobs of {len(made.trace.projects)} teams; "
            f"dropped {made.cpu_only:,} CPU-only and {made.never_scheduled:,} never-scheduled "
            f"pods; {made.shared_gpu:,} pods sharing a GPU counted as one GPU each"
        )
