"""``manage.py simulate``: replay a workload trace through the scheduling engine.

A thin wrapper: it parses and checks the arguments, then calls ``scheduler.simulator``.
Every bad input ends in a ``CommandError`` (a message and exit status 1, no traceback).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from scheduler.engine import POLICIES
from scheduler.simulator.budgets import Budget, BudgetError, load_budgets
from scheduler.simulator.contract import ContractRule
from scheduler.simulator.durations import parse_duration
from scheduler.simulator.replay import ConfigError, ReplayConfig
from scheduler.simulator.report import (
    format_table,
    run_comparison,
    write_metrics,
    write_timeline,
)
from scheduler.simulator.traces import FORMATS, Trace, TraceError, load_trace


class Command(BaseCommand):
    """Replay a trace under one or several policies; write metrics.json and timeline.html."""

    help = (
        "Replay a workload trace through the scheduling engine in virtual time and compare "
        "policies. Writes DIR/metrics.json (one object per policy) and DIR/timeline.html, and "
        "prints a side-by-side table. See docs/simulation.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--trace", required=True, help="trace CSV file (.csv or .csv.gz)")
        parser.add_argument("--format", default="canonical", help="canonical (default) or philly")
        parser.add_argument("--gpus", required=True, help="GPUs in the simulated cluster")
        parser.add_argument("--gpus-per-node", default="8", help="GPUs per node (default 8)")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--policy", help="one policy (default fairshare)")
        group.add_argument("--compare", help="several policies, comma-separated")
        parser.add_argument(
            "--budgets",
            default="proportional",
            help="budget tree JSON file, or 'proportional' (default: share ∝ GPU-hours)",
        )
        parser.add_argument("--window", default="7d", help="fair-share usage window (7d)")
        parser.add_argument(
            "--max-min-runtime", default="8h", help="cap on any minimum runtime (8h)"
        )
        parser.add_argument(
            "--debug-min-runtime", default="15m", help="default minimum for debug work (15m)"
        )
        parser.add_argument(
            "--other-min-runtime", default="2h", help="default minimum for other work (2h)"
        )
        parser.add_argument(
            "--checkpoint-interval", default="30m", help="resumable work checkpoints (30m)"
        )
        parser.add_argument("--restart-overhead", default="5m", help="cost of a restart (5m)")
        parser.add_argument(
            "--cycle-interval", default="60s", help="periodic cycle while work is pending (60s)"
        )
        parser.add_argument(
            "--wake-at-timers",
            action="store_true",
            help="also cycle when a wait the engine keeps ends (a patience or a hold bound), "
            "as the live loop's 5-second cycles do",
        )
        parser.add_argument(
            "--timeline-span", default="7d", help="length of the timeline's window (7d)"
        )
        parser.add_argument(
            "--timeline-start",
            help="start of the timeline window, ISO date-time (default: busiest span)",
        )
        parser.add_argument(
            "--no-timeline", action="store_true", help="skip timeline.html (faster)"
        )
        parser.add_argument(
            "--limit", help="replay only the first N jobs by submit time (quick looks)"
        )
        parser.add_argument(
            "--reference",
            action="store_true",
            help="recompute everything every cycle (the check of the engine's shortcuts: "
            "the same decisions, about twice as slow)",
        )
        parser.add_argument("--out", default="var/sim", help="output directory (var/sim)")
        parser.add_argument(
            "--table",
            default="text",
            choices=["text", "markdown"],
            help="how to print the comparison (text, or markdown for docs)",
        )

    def handle(self, *args, **options) -> None:
        policies = self._policies(options)
        if options["format"] not in FORMATS:
            raise CommandError(
                f"unknown trace format {options['format']!r}; choose one of {', '.join(FORMATS)}"
            )
        gpus = self._positive_int(options["gpus"], "--gpus")
        gpus_per_node = self._positive_int(options["gpus_per_node"], "--gpus-per-node")
        durations = {
            name: self._duration(options[name], "--" + name.replace("_", "-"))
            for name in (
                "window",
                "max_min_runtime",
                "debug_min_runtime",
                "other_min_runtime",
                "checkpoint_interval",
                "restart_overhead",
                "cycle_interval",
                "timeline_span",
            )
        }
        timeline_start = self._timeline_start(options)
        try:
            config = self._config(options, policies[0], gpus, gpus_per_node, durations)
            config.validate()
            trace = load_trace(options["trace"], options["format"])
            if options["limit"]:
                trace = trace.head(self._positive_int(options["limit"], "--limit"))
            if not trace.jobs:
                raise CommandError(f"{options['trace']}: the trace has no jobs")
            budgets = load_budgets(options["budgets"], trace.jobs)
        except (TraceError, BudgetError, ConfigError) as exc:
            raise CommandError(str(exc)) from None

        self._describe_inputs(trace, budgets, config, options["budgets"])

        def progress(result, metrics) -> None:
            self.stdout.write(
                f"  {result.policy}: {metrics['jobs']:,} jobs in {metrics['wall_seconds']:.1f} s "
                f"({metrics['jobs_per_second']:,.0f} jobs/s, {metrics['cycles']:,} cycles)"
            )

        runs = run_comparison(trace, budgets, config, policies, on_done=progress)
        metrics = [m for _, m in runs]
        self._warn_unplaced(metrics, gpus)
        out = Path(options["out"])
        path = write_metrics(out / "metrics.json", metrics)
        self.stdout.write("")
        self.stdout.write(format_table(metrics, markdown=options["table"] == "markdown"))
        self.stdout.write("")
        self.stdout.write(f"wrote {path}")
        if not options["no_timeline"]:
            page = write_timeline(
                out / "timeline.html",
                runs,
                span=durations["timeline_span"],
                start=timeline_start,
            )
            self.stdout.write(f"wrote {page}")

    @staticmethod
    def _timeline_start(options) -> float | None:
        """``--timeline-start`` as a time, or None (the busiest span) when not given."""
        if not options["timeline_start"]:
            return None
        from scheduler.simulator.traces import parse_time

        try:
            return parse_time(options["timeline_start"], "--timeline-start")
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    @staticmethod
    def _config(
        options, policy: str, gpus: int, gpus_per_node: int, durations: dict[str, float]
    ) -> ReplayConfig:
        """The replay's configuration from the parsed arguments (validated by the caller)."""
        return ReplayConfig(
            gpus=gpus,
            gpus_per_node=gpus_per_node,
            policy=policy,
            window_seconds=durations["window"],
            contract=ContractRule(
                debug_min_runtime=durations["debug_min_runtime"],
                other_min_runtime=durations["other_min_runtime"],
                max_min_runtime=durations["max_min_runtime"],
            ),
            checkpoint_interval=durations["checkpoint_interval"],
            restart_overhead=durations["restart_overhead"],
            cycle_interval=durations["cycle_interval"],
            wake_at_timers=options["wake_at_timers"],
            record_runs=not options["no_timeline"],
            incremental=not options["reference"],
        )

    def _describe_inputs(
        self, trace: Trace, budgets: Budget, config: ReplayConfig, budgets_source: str
    ) -> None:
        """Say what is replayed: jobs, projects, cluster, budgets and unbudgeted projects."""
        self.stdout.write(
            f"{trace.source}: {len(trace.jobs):,} jobs, {len(trace.projects)} projects, "
            f"{trace.duplicates} duplicate rows kept; {config.gpus} GPUs on "
            f"{config.gpus // config.gpus_per_node} nodes; budgets: {budgets_source}"
        )
        unbudgeted = sorted(set(trace.projects) - set(budgets.effective_shares()))
        if unbudgeted:
            self.stdout.write(f"unbudgeted projects: {', '.join(unbudgeted)}")

    def _warn_unplaced(self, metrics: list[dict], gpus: int) -> None:
        """Warn about jobs too large for the cluster and jobs that could never start."""
        skipped = metrics[0]["skipped_jobs"]
        if skipped:
            self.stdout.write(
                self.style.WARNING(
                    f"{skipped} job(s) ask for more than {gpus} GPUs and were skipped "
                    f"(e.g. {', '.join(metrics[0]['skipped_job_ids'][:5])})"
                )
            )
        for m in metrics:
            if m["never_started"]:
                self.stdout.write(
                    self.style.WARNING(
                        f"{m['policy']}: {m['never_started']} job(s) could never start "
                        "(e.g. larger than the project's partition)"
                    )
                )

    @staticmethod
    def _policies(options) -> list[str]:
        if options["compare"]:
            names = [p.strip() for p in options["compare"].split(",") if p.strip()]
        else:
            names = [options["policy"] or "fairshare"]
        if not names:
            raise CommandError("--compare needs at least one policy name")
        unknown = [p for p in names if p not in POLICIES]
        if unknown:
            raise CommandError(
                f"unknown policy {', '.join(map(repr, unknown))}; known policies: "
                f"{', '.join(POLICIES)}"
            )
        if len(set(names)) != len(names):
            raise CommandError("--compare lists a policy twice")
        return names

    @staticmethod
    def _positive_int(text: str, flag: str) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise CommandError(f"{flag} must be a whole number, not {text!r}") from None
        if value < 1:
            raise CommandError(f"{flag} must be at least 1, not {value}")
        return value

    @staticmethod
    def _duration(text: str, flag: str) -> float:
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise CommandError(f"{flag}: {exc}") from None
