"""``manage.py estimate_error``: how close the queue page's estimated start comes, on a trace.

Thin wrapper around ``scheduler.simulator.estimate_error``; figures in ``docs/dashboards.md``.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.simulator.budgets import BudgetError, load_budgets
from scheduler.simulator.estimate_error import estimate_errors
from scheduler.simulator.replay import ConfigError, ReplayConfig
from scheduler.simulator.traces import FORMATS, TraceError, load_trace

LONG_WAIT = 1800.0  # estimated waits from here on are shown as a range on the page


def _quantile(values: list[float], q: float) -> float | None:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def _hours(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds / 3600:.2f} h"


class Command(BaseCommand):
    """Replay a trace, estimate sampled jobs' starts as the page would, print the errors."""

    help = (
        "Replay a trace and compare the estimated start the queue page would have shown each "
        "sampled job at its submission with its real start (docs/dashboards.md)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--trace", required=True, help="trace CSV file (.csv or .csv.gz)")
        parser.add_argument("--format", default="canonical", help="canonical or philly")
        parser.add_argument("--budgets", default=None, help="budget tree JSON (none: no shares)")
        parser.add_argument("--gpus", type=int, required=True, help="cluster GPUs")
        parser.add_argument("--samples", type=int, default=400, help="jobs to sample (400)")
        parser.add_argument(
            "--wake-at-timers",
            action="store_true",
            help="the replay also cycles when a wait the engine keeps ends, as the live "
            "loop's 5-second cycles do (the starts the estimate is compared with)",
        )

    def handle(self, *args, **options) -> None:
        if options["format"] not in FORMATS:
            raise CommandError(f"--format: {options['format']!r} is not one of {FORMATS}")
        if options["samples"] < 1:
            raise CommandError("--samples: at least 1")
        try:
            trace = load_trace(options["trace"], options["format"])
            budgets = load_budgets(options["budgets"], trace.jobs) if options["budgets"] else None
            config = ReplayConfig(
                gpus=options["gpus"],
                record_runs=False,
                wake_at_timers=options["wake_at_timers"],
            )
            config.validate()
        except (OSError, TraceError, BudgetError, ConfigError) as error:
            raise CommandError(str(error)) from None
        samples, _ = estimate_errors(trace, budgets, config, samples=options["samples"])
        both = [s for s in samples if s.error is not None]
        errors = [s.error for s in both]
        waits = [s.actual - s.submit for s in both]
        relative = [s.error / max(60.0, s.actual - s.submit) for s in both]
        long = [s for s in both if s.estimate - s.submit >= LONG_WAIT]
        ratio = [(s.actual - s.submit) / (s.estimate - s.submit) for s in long]
        short = [s.error for s in both if s.estimate - s.submit < LONG_WAIT]
        out = self.stdout.write
        out(
            f"{trace.source} on {options['gpus']} GPUs: {len(samples)} sampled jobs waited past "
            f"their first cycle; {sum(s.estimate is None for s in samples)} had no estimate "
            f"(not within 7 days), {sum(s.actual is None for s in samples)} never started."
        )
        out(
            f"|estimated - actual start|: p50 {_hours(_quantile(errors, 0.5))}, "
            f"p90 {_hours(_quantile(errors, 0.9))} (waits p50 {_hours(_quantile(waits, 0.5))}, "
            f"p90 {_hours(_quantile(waits, 0.9))}); relative to the wait: "
            f"p50 {_quantile(relative, 0.5) or 0:.1%}, p90 {_quantile(relative, 0.9) or 0:.1%}."
        )
        out(
            f"estimated waits under 30 min ({len(short)}): p90 error "
            f"{(_quantile(short, 0.9) or 0) / 60:.1f} min; from 30 min ({len(long)}): actual "
            f"÷ estimated wait p10 {_quantile(ratio, 0.1) or 0:.2f}, p50 "
            f"{_quantile(ratio, 0.5) or 0:.2f}, p90 {_quantile(ratio, 0.9) or 0:.2f}."
        )
