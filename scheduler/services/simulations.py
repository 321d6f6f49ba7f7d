"""Simulations asked for in the browser: validate, queue, and run a trace replay in the background.

The replay is the simulator's own (``scheduler.simulator``: trace loaders with line-numbered
errors, ``run_comparison``, ``compute_metrics``, the timeline and delivery figure builders);
this module only turns a form into its inputs and a ``SimulationJob`` row into a result.

- ``simulation_job_create`` validates everything first (an uploaded trace is parsed in full;
  a bad row is refused with its line number) and creates nothing on bad input; the job runs
  once the transaction commits (``simulation_run`` task; in-process without a broker).
- ``simulation_job_run`` claims a queued job by compare-and-set (a redelivered task does not
  run it twice), replays each policy, records progress after each, and stores the metrics,
  the comparison table and the figures — or the error.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import logging
import zlib
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from governance.figures import figure_json
from governance.models import Cluster, Organization
from governance.selectors.visibility import user_visibility
from scheduler.engine import POLICIES
from scheduler.models import SimulationJob, SimulationJobState
from scheduler.selectors.budget import cluster_budget
from scheduler.services.background import run_in_background
from scheduler.simulator import Budget, ReplayConfig, Trace, TraceError, load_trace, read_trace
from scheduler.simulator.budgets import BudgetError, proportional_budgets
from scheduler.simulator.replay import ConfigError
from scheduler.simulator.report import comparison_rows, run_comparison
from scheduler.simulator.timeline import (
    choose_window,
    delivery_figure,
    team_colors,
    timeline_figure,
)
from scheduler.traces import PHILLY_JOBS

logger = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 2_000_000  # ~40,000 canonical rows; the bundled trace has no such limit
MAX_GPUS = 4096
DAY = 86400.0
TIMELINE_SPAN_SECONDS = 2 * DAY  # the timeline figure's window: keeps the page light
BUDGET_MODES = ("live", "proportional")
# The trace is nearly empty for its first 20 days; two busy weeks from there by default.
PHILLY_DEFAULTS = {"gpus": 512, "gpus_per_node": 8, "start_day": 20, "days": 14}


def trace_upload_read(*, data: bytes, name: str = "upload") -> tuple[str, Trace]:
    """Check an uploaded canonical trace: size, encoding, header and every row.

    Returns the text (kept in the job row) and the parsed trace. Raises ``ValidationError``
    on ``trace_file`` with the reason (``name, line N: reason`` for a bad row).
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise ValidationError(
            {
                "trace_file": [
                    f"The file is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,} bytes."
                ]
            }
        )
    if data[:2] == b"\x1f\x8b":
        # Inflate at most one byte past the limit: a small gzip "bomb" (2 MB of zeros inflate
        # to 2 GB) must not be expanded whole in memory before its size is checked.
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(MAX_UPLOAD_BYTES + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValidationError({"trace_file": [f"{name}: not a readable gzip file."]}) from exc
        if len(data) > MAX_UPLOAD_BYTES:
            raise ValidationError(
                {"trace_file": [f"Unzipped, the file is over {MAX_UPLOAD_BYTES:,} bytes."]}
            )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError({"trace_file": [f"{name}: not a UTF-8 text file."]}) from exc
    try:
        trace = read_trace(text, "canonical", source=name)
    except TraceError as exc:
        raise ValidationError({"trace_file": [str(exc)]}) from exc
    if not trace.jobs:
        raise ValidationError({"trace_file": [f"{name}: the file has a header but no jobs."]})
    return text, trace


def _window(trace: Trace, start_day: float | None, days: float | None) -> Trace:
    """The jobs submitted in ``[first submit + start_day, + days)`` (the whole trace if unset)."""
    if start_day is None and days is None:
        return trace
    lo = trace.start + (start_day or 0) * DAY
    hi = lo + days * DAY if days else float("inf")
    jobs = [j for j in trace.jobs if lo <= j.submit_time < hi]
    return Trace(
        jobs=jobs,
        format=trace.format,
        source=trace.source,
        duplicates=trace.duplicates,
        projects=sorted({j.project for j in jobs}),
    )


def live_budget_tree(*, cluster: Cluster, at: datetime | None = None) -> Budget:
    """The cluster's live budget tree as the simulator's ``Budget``; leaves are project slugs.

    Children in name order. Trace projects are matched by slug (the demo's Philly projects are the VC names); a
    project slug shared by two programs keeps the engine's ``program/project`` name.
    """
    root = cluster_budget(cluster=cluster, at=at or timezone.now()).root
    slugs = [leaf.name.split("/")[-1] for program in root.children for leaf in program.children]

    def name_of(node) -> str:
        short = node.name.split("/")[-1]
        return short if slugs.count(short) == 1 else node.name

    return Budget(
        name=root.name,
        share=100.0,
        children=[
            Budget(
                name=program.name,
                share=program.share,
                children=[
                    Budget(name=name_of(p), share=p.share)
                    for p in sorted(program.children, key=lambda n: name_of(n))
                ],
            )
            for program in sorted(root.children, key=lambda n: n.name)
        ],
    )


def simulation_job_create(
    *,
    user,
    organization: Organization,
    trace_source: str,
    gpus: int,
    gpus_per_node: int = 8,
    budgets: str = "proportional",
    cluster: Cluster | None = None,
    policies: list[str] | None = None,
    start_day: float | None = None,
    days: float | None = None,
    wake_at_timers: bool = False,
    upload: bytes | None = None,
    upload_name: str = "upload.csv",
    now: datetime | None = None,
) -> SimulationJob:
    """Validate a simulation request, create the job and run it once this commits.

    Raises ``ValidationError`` naming the field; nothing is created then. Whether ``user``
    may simulate for ``organization`` (a manager in it) is the caller's check.
    ``wake_at_timers``: the replay also cycles when a wait the engine keeps ends
    (``ReplayConfig.wake_at_timers``).
    """
    policies = list(policies or ["fairshare"])
    errors = _setting_errors(gpus, gpus_per_node, policies, start_day, days)
    if budgets not in BUDGET_MODES:
        errors["budgets"] = ["Choose the live tree of a cluster or proportional budgets."]
    elif budgets == "live" and (cluster is None or cluster.organization_id != organization.id):
        errors["cluster"] = ["Choose the cluster whose live budget tree to use."]
    text = ""
    name = "Philly (bundled)"
    if trace_source == "upload":
        if upload is None:
            errors["trace_file"] = ["Choose a CSV file to upload."]
        else:
            try:
                text, trace = trace_upload_read(data=upload, name=upload_name)
                name = upload_name
                if not _window(trace, start_day, days).jobs:
                    errors["days"] = ["No job of the trace is submitted inside this window."]
            except ValidationError as exc:
                errors.update(exc.message_dict)
    elif trace_source != "philly":
        errors["trace_source"] = ["Choose the bundled Philly trace or upload a CSV."]
    if errors:
        raise ValidationError(errors)
    now = now or timezone.now()
    with transaction.atomic():
        job = SimulationJob.objects.create(
            created_by=user,
            organization=organization,
            cluster=cluster if budgets == "live" else None,
            trace_source=trace_source,
            trace_name=name[:200],
            trace_csv=text,
            parameters={
                "gpus": gpus,
                "gpus_per_node": gpus_per_node,
                "budgets": budgets,
                "policies": policies,
                "start_day": start_day,
                "days": days,
                "wake_at_timers": bool(wake_at_timers),
            },
            created_at=now,
            progress_note="Waiting for a worker.",
        )
        transaction.on_commit(lambda: _enqueue(job.pk), robust=True)
    return job


def _setting_errors(
    gpus: int, gpus_per_node: int, policies: list[str], start_day, days
) -> dict[str, list[str]]:
    """What is wrong with the cluster's shape, the policies and the window, by field."""
    errors: dict[str, list[str]] = {}
    if not policies or any(p not in POLICIES for p in policies):
        errors["policies"] = [f"Choose among {', '.join(POLICIES)}."]
    try:
        ReplayConfig(gpus=gpus, gpus_per_node=gpus_per_node).validate()
    except ConfigError as exc:
        errors["gpus"] = [f"{str(exc)[0].upper()}{str(exc)[1:]}."]
    if gpus > MAX_GPUS:
        errors["gpus"] = [f"At most {MAX_GPUS:,} GPUs in a browser simulation."]
    if start_day is not None and start_day < 0:
        errors["start_day"] = ["Must be 0 or more days."]
    if days is not None and days <= 0:
        errors["days"] = ["Must be more than 0 days."]
    return errors


def _enqueue(job_id: int) -> None:
    """Hand the job to a worker, or to a thread of its own without a broker."""
    from scheduler.tasks import simulation_run

    run_in_background(simulation_run, simulation_job_run, job_id, "simulation")


def _figure(fig) -> dict:
    """A figure as plain JSON data (what ``json_script`` and ``Plotly.newPlot`` take), its
    texts plain text (project names come from the uploaded trace)."""
    return figure_json(fig)


def _load(job: SimulationJob) -> tuple[Trace, Budget]:
    params = job.parameters
    if job.trace_source == "philly":
        trace = load_trace(PHILLY_JOBS, "philly")
    else:
        trace = read_trace(job.trace_csv, "canonical", source=job.trace_name)
    trace = _window(trace, params.get("start_day"), params.get("days"))
    if not trace.jobs:
        raise TraceError("no job is submitted inside the chosen window", source=job.trace_name)
    if params["budgets"] == "live" and job.cluster is not None:
        budget = live_budget_tree(cluster=job.cluster)
        trace, budget = _hide_unseen(trace, budget, user_visibility(user=job.created_by))
    else:
        budget = proportional_budgets(trace.jobs)
    return trace, budget


def _hide_unseen(trace: Trace, budget: Budget, vis) -> tuple[Trace, Budget]:
    """The live tree's programs and projects the requester may not see, renamed "another
    program 1", "another project 1", … in the tree and the trace alike: the replay needs the
    whole tree (every share counts), its results must not name what the requester cannot."""
    seen = set(vis.programs().values_list("slug", flat=True)) | set(
        vis.projects().values_list("slug", flat=True)
    )
    names: dict[str, str] = {}

    def rename(node: Budget, depth: int) -> Budget:
        short = node.name.split("/")[-1]
        name = node.name
        if depth > 0 and short not in seen:
            word = "program" if node.children else "project"
            count = sum(1 for v in names.values() if v.startswith(f"another {word} ")) + 1
            name = names.setdefault(node.name, f"another {word} {count}")
        return Budget(name, node.share, [rename(c, depth + 1) for c in node.children])

    renamed = rename(budget, 0)
    if not names:
        return trace, budget
    jobs = [dataclasses.replace(j, project=names.get(j.project, j.project)) for j in trace.jobs]
    return (
        Trace(
            jobs=jobs,
            format=trace.format,
            source=trace.source,
            duplicates=trace.duplicates,
            projects=sorted({j.project for j in jobs}),
        ),
        renamed,
    )


def simulation_job_run(*, job_id: int, now: datetime | None = None) -> SimulationJob | None:
    """Run a queued simulation job to ``done`` (or ``failed``); None if it was not queued.

    Compare-and-set claim (queued → running), so a redelivered task is a no-op. Progress is
    written after each policy. Bad data found only now (the bundled trace missing, an empty
    window) ends the job ``failed`` with the reason; unexpected errors too, logged.
    """
    now = now or timezone.now()
    claimed = SimulationJob.objects.filter(pk=job_id, state=SimulationJobState.QUEUED).update(
        state=SimulationJobState.RUNNING, started_at=now, progress_note="Loading the trace."
    )
    if claimed != 1:
        return None
    job = SimulationJob.objects.select_related("cluster").get(pk=job_id)
    params = job.parameters
    policies = params["policies"]
    try:
        trace, budget = _load(job)
        config = ReplayConfig(
            gpus=params["gpus"],
            gpus_per_node=params["gpus_per_node"],
            # Jobs queued before the option existed have no such key: they ran without it.
            wake_at_timers=params.get("wake_at_timers", False),
        )
        SimulationJob.objects.filter(pk=job_id).update(
            progress_note=f"Replaying {len(trace.jobs):,} jobs under "
            f"{', '.join(policies)}, one policy after another."
        )

        def done(result, _metrics) -> None:
            finished = policies.index(result.policy) + 1
            SimulationJob.objects.filter(pk=job_id).update(
                progress=finished / len(policies),
                progress_note=f"{finished} of {len(policies)} policies replayed "
                f"(last: {result.policy}, {result.wall_seconds:.0f} s).",
            )

        runs = run_comparison(trace, budget, config, policies, on_done=done)
        job.result = _result(trace, budget, runs)
    except (TraceError, BudgetError, ConfigError) as exc:
        return _fail(job, str(exc))
    except Exception as exc:  # the job must end, and say why
        logger.exception("simulation %s failed", job_id)
        return _fail(job, f"The simulation stopped on an unexpected error: {exc}")
    job.state = SimulationJobState.DONE
    job.progress = 1.0
    job.progress_note = "Done."
    job.finished_at = timezone.now()
    job.save(update_fields=["result", "state", "progress", "progress_note", "finished_at"])
    return job


def _fail(job: SimulationJob, message: str) -> SimulationJob:
    job.state = SimulationJobState.FAILED
    job.error = message
    job.progress_note = "Failed."
    job.finished_at = timezone.now()
    job.save(update_fields=["state", "error", "progress_note", "finished_at"])
    return job


def _result(trace: Trace, budget: Budget, runs: list) -> dict:
    """What the job page shows: metrics per policy, the table, and the figures."""
    metrics = [m for _, m in runs]
    first = runs[0][0]
    window = choose_window(first, TIMELINE_SPAN_SECONDS)
    colors = team_colors(first.projects)
    budgeted = {leaf.name for leaf in budget.leaves()}
    return {
        "jobs": len(trace.jobs),
        "projects": trace.projects,
        "budgeted_projects": sorted(budgeted & set(trace.projects)),
        "unbudgeted_projects": sorted(set(trace.projects) - budgeted),
        "budget": budget.to_dict(),
        "metrics": metrics,
        "table": [[label, cells] for label, cells in comparison_rows(metrics)],
        "timeline_window": [window.start, window.end, window.why],
        "figures": [
            {
                "policy": result.policy,
                "delivery": _figure(delivery_figure(m, "whole")),
                "timeline": _figure(timeline_figure(result, window, colors)),
            }
            for result, m in runs
        ],
    }
