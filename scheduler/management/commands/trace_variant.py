"""``manage.py trace_variant``: write a synthetic variant of a trace (a second opinion).

Thin wrapper around ``scheduler.simulator.synthetic.variant``; the rules are in its docstring
and in ``docs/simulation.md``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.simulator.synthetic import VariantRules, copies, write_canonical
from scheduler.simulator.traces import FORMATS, TraceError, load_trace


class Command(BaseCommand):
    """Read a trace, apply the variant rules, write a canonical CSV."""

    help = (
        "Write a synthetic variant of a trace: other team sizes, more gangs, daily bursts of "
        "debug jobs (docs/simulation.md, 'A second trace')."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--trace", required=True, help="trace CSV file (.csv or .csv.gz)")
        parser.add_argument("--format", default="canonical", help="canonical or philly")
        parser.add_argument("--seed", default="2026", help="random seed (2026)")
        parser.add_argument(
            "--copies",
            default="1",
            help="variants laid back to back in time, seeds seed, seed+1, ... (1); "
            "11 copies of Philly make just over a million jobs",
        )
        parser.add_argument("--out", required=True, help="canonical CSV to write")

    def handle(self, *args, **options) -> None:
        if options["format"] not in FORMATS:
            raise CommandError(f"--format: {options['format']!r} is not one of {FORMATS}")
        try:
            seed = int(options["seed"])
        except ValueError:
            raise CommandError(f"--seed: {options['seed']!r} is not a whole number") from None
        try:
            count = int(options["copies"])
        except ValueError:
            count = 0
        if count < 1:
            raise CommandError(f"--copies: {options['copies']!r} is not a whole number ≥ 1")
        try:
            trace = load_trace(options["trace"], options["format"])
        except (OSError, TraceError) as error:
            raise CommandError(f"--trace: {error}") from None
        made = copies(trace, count, VariantRules(seed=seed))
        path = write_canonical(made, options["out"])
        self.stdout.write(
            f"{path}: {len(made.jobs):,} jobs of {len(made.projects)} teams "
            f"(from {len(trace.jobs):,} jobs of {trace.source})"
        )
