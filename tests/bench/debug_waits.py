"""How long the Philly replay's debug-class jobs wait for their first start, and why.

Run: ``.venv/bin/python -m tests.bench.debug_waits fairshare:512 quota:512`` — each argument
is ``policy:gpus[:first N jobs]``; ``--trace var/sim/philly-variant.csv`` before them replays
a canonical trace instead, with budgets proportional to each team's GPU-hours. Printed once
for the trace: how many jobs the replay's contract calls debug-class and their share of
GPU-hours; then per argument: the share of
debug-class jobs submitted in the submit window that waited more than 10 minutes, and the
p50 / p90 wait of those in a burst (at least ``BURST`` debug-class jobs of the same project
submitted within ``BURST_SECONDS`` around them, itself included) and of the rest; then what
the same jobs would wait if each team's debug-class jobs had its whole entitlement to
themselves and nothing else ran on it, and on twice it (``_on_own_entitlement``): a policy
that keeps every other team's guarantee beats the first only with GPUs nobody is owed at
that moment, and a team's own training then gives up all of its GPUs.

The last line printed per argument counts every GPU a guarantee-keeping policy could give
them (``_on_spare_capacity``): each team's debug-class jobs alone on every GPU the other
teams are not owed at that moment, where another team is owed its entitlement or, when it
asks for less, what it asks for: first the least it can be asking for in any schedule (its
jobs between submission and submission plus run time), then what it asked for in this
replay (each hour's mean).
"""

from __future__ import annotations

import bisect
import heapq
import sys
from collections import defaultdict

from scheduler.engine.fairtree import BudgetTree
from scheduler.simulator import load_budgets, load_trace, replay
from scheduler.simulator.metrics import oversubscribed_spans
from scheduler.simulator.replay_loop import to_engine_budget
from tests.bench.trace_source import first_jobs, from_args, run_spec

BURST = 20
BURST_SECONDS = 600.0
LONG_WAIT = 600.0


def nearest_rank(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _in_burst(jobs) -> set[str]:
    """Ids of debug-class jobs with at least BURST of their project's within BURST_SECONDS."""
    by_project: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        by_project[job.project].append(job.submit)
    for times in by_project.values():
        times.sort()
    burst = set()
    for job in jobs:
        times = by_project[job.project]
        lo = bisect.bisect_left(times, job.submit - BURST_SECONDS / 2)
        hi = bisect.bisect_right(times, job.submit + BURST_SECONDS / 2)
        if hi - lo >= BURST:
            burst.add(job.id)
    return burst


def _queue_waits(jobs, capacity: int, shortest_first: bool) -> dict[str, float]:
    """Waits of ``jobs`` run without preemption on ``capacity`` GPUs of their own.

    Those waiting go in submit order (first come, first served) or shortest first; the
    head starts as soon as its GPUs are free, and nobody passes a head that does not fit.
    """
    return _queue_waits_on(jobs, [(float("-inf"), capacity)], shortest_first)


def _on_own_entitlement(
    debug,
    window_ids: set[str],
    budgets,
    gpus: int,
    multiple: int = 1,
    stretches: list[tuple[float, float]] | None = None,
) -> tuple[float, int]:
    """p90 wait of the window's debug-class jobs if each team ran them alone on ``multiple``
    times its entitlement, in the better of submit order and shortest first, and how many
    jobs belong to a team with no entitlement (left out: they are owed nothing).

    With ``stretches`` (over-demanded hours, ``oversubscribed_spans``), only jobs submitted
    inside one queue there, each stretch afresh on an empty entitlement; a job still
    waiting when its stretch ends starts then, and jobs outside every stretch wait nothing
    (as if every GPU were free for them): a bound for a policy that never takes a GPU
    another team is owed and wants.
    """
    shares = budgets.effective_shares() if budgets is not None else {}
    starts = [start for start, _ in stretches] if stretches is not None else []
    queues: dict[tuple[str, int], list] = defaultdict(list)
    best: list[float] = []
    for job in debug:
        if stretches is None:
            queues[(job.project, 0)].append(job)
            continue
        at = bisect.bisect_right(starts, job.submit) - 1
        if at >= 0 and job.submit < stretches[at][1]:
            queues[(job.project, at)].append(job)
        elif job.id in window_ids:
            best.append(0.0)
    unowed = 0
    for (project, at), jobs in queues.items():
        capacity = int(shares.get(project, 0.0) * gpus * multiple)
        if capacity < max(j.gpus for j in jobs):
            unowed += sum(1 for j in jobs if j.id in window_ids)
            continue
        end = stretches[at][1] if stretches is not None else float("inf")
        in_window = [j for j in jobs if j.id in window_ids]
        choices = []
        for shortest_first in (False, True):
            waits = _queue_waits(jobs, capacity, shortest_first)
            choices.append([min(waits[j.id], end - j.submit) for j in in_window])
        # The better order for this team's p90 (a per-team choice only lowers the bound).
        best.extend(min(choices, key=lambda w: nearest_rank(w, 0.9)))
    return nearest_rank(best, 0.9), unowed


def _queue_waits_on(jobs, steps: list[tuple[float, int]], shortest_first: bool) -> dict[str, float]:
    """``_queue_waits`` on a capacity that changes: ``steps`` are (from time, GPUs), sorted.

    Nothing running is stopped when the capacity falls (generous to the jobs: a real
    policy would wait out their minimum runtime, then evict); the head starts once what
    runs leaves room for it under the capacity of that moment.
    """
    ordered = sorted(jobs, key=lambda j: j.submit)
    running: list[tuple[float, int]] = []
    waiting: list[tuple[float, int, object]] = []
    waits: dict[str, float] = {}
    used = 0
    step = 0
    now = ordered[0].submit if ordered else 0.0
    arrived = 0
    while arrived < len(ordered) or waiting:
        while arrived < len(ordered) and ordered[arrived].submit <= now:
            job = ordered[arrived]
            key = job.duration if shortest_first else job.submit
            heapq.heappush(waiting, (key, arrived, job))
            arrived += 1
        while running and running[0][0] <= now:
            used -= heapq.heappop(running)[1]
        while step + 1 < len(steps) and steps[step + 1][0] <= now:
            step += 1
        capacity = steps[step][1] if steps and steps[0][0] <= now else 0
        while waiting and used + waiting[0][2].gpus <= capacity:
            job = heapq.heappop(waiting)[2]
            waits[job.id] = now - job.submit
            used += job.gpus
            heapq.heappush(running, (now + job.duration, job.gpus))
        next_end = running[0][0] if running else float("inf")
        next_submit = ordered[arrived].submit if arrived < len(ordered) else float("inf")
        next_step = steps[step + 1][0] if step + 1 < len(steps) else float("inf")
        now = min(next_end, next_submit, next_step)
        if now == float("inf"):
            break  # the capacity never grows enough for what still waits
    return waits


def _on_spare_capacity(
    result, debug, window_ids: set[str], budgets, gpus: int, as_replayed: bool = False
) -> float:
    """p90 wait of the window's debug-class jobs if each team ran them alone on every GPU
    the other teams are not owed at each moment, in the better of submit order and
    shortest first per team.

    Another team is owed its entitlement (the engine's whole GPUs) or, when it asks for
    less, what it asks for; what it asks for is at least the GPUs of its charged jobs
    between their submission and their submission plus run time, in any schedule (a job
    cannot end before it has run). So this is the most capacity any policy that keeps
    every other team's guarantee could give a team's debug-class work, its own training
    and the rest of its entitlement included. A job that never starts on it counts as
    waiting until the replay's end.

    ``as_replayed``: what the other teams asked for is instead their demand in the replay,
    each hour's mean (the ledger's), rounded down: not a bound for every schedule, but
    what the guarantee owed them in this one.
    """
    tree = BudgetTree(to_engine_budget(budgets))  # no budgets: nobody is owed anything
    entitled = tree.entitled_gpus(gpus)
    changes: list[tuple[float, str, int]] = []
    if as_replayed:
        ledger = result.ledger
        for i, project in enumerate(ledger.projects):
            before = 0
            for h, seconds in enumerate(ledger.demand[i]):
                now = int(seconds / 3600)
                if now != before:
                    changes.append((ledger.hour_start(h), project, now - before))
                    before = now
    else:
        for job in result.jobs:
            if job.min_runtime > 0:
                changes.append((job.submit, job.project, job.gpus))
                changes.append((job.submit + job.duration, job.project, -job.gpus))
    changes.sort(key=lambda c: c[0])
    asking: dict[str, int] = defaultdict(int)
    owed_total = 0  # sum over teams of min(asking, entitled)
    # per team: (from time, GPUs the others leave it), one step per time; nobody asks
    # for anything before the first change
    others: dict[str, list[tuple[float, int]]] = {
        p: [(float("-inf"), gpus)] for p in {j.project for j in debug}
    }
    i = 0
    while i < len(changes):
        t = changes[i][0]
        while i < len(changes) and changes[i][0] == t:
            _, project, delta = changes[i]
            ent = entitled.get(project, 0)
            owed_total -= min(asking[project], ent)
            asking[project] += delta
            owed_total += min(asking[project], ent)
            i += 1
        for project, steps in others.items():
            spare = gpus - (owed_total - min(asking[project], entitled.get(project, 0)))
            if steps[-1][1] != spare:
                steps.append((t, spare))
    by_team: dict[str, list] = defaultdict(list)
    for job in debug:
        by_team[job.project].append(job)
    best: list[float] = []
    for project, jobs in by_team.items():
        in_window = [j for j in jobs if j.id in window_ids]
        choices = []
        for shortest_first in (False, True):
            waits = _queue_waits_on(jobs, others[project], shortest_first)
            choices.append([waits.get(j.id, result.end_time - j.submit) for j in in_window])
        best.extend(min(choices, key=lambda w: nearest_rank(w, 0.9)))
    return nearest_rank(best, 0.9)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main(args: list[str]) -> None:
    source, args = from_args(args)
    trace = load_trace(source.path, source.format)
    printed_trace = False
    for arg in args:
        spec = run_spec(arg)
        run_trace = first_jobs(trace, spec)
        budgets = load_budgets(source.budgets, run_trace.jobs)
        result = replay(
            run_trace,
            budgets,
            spec.config(),
        )
        debug = [j for j in result.jobs if j.debug]
        if not printed_trace:
            every = sum(j.gpus * j.duration for j in result.jobs)
            small = sum(j.gpus * j.duration for j in debug)
            print(
                f"debug-class jobs: {len(debug):,} of {len(result.jobs):,}; "
                f"{small / 3600:,.0f} of {every / 3600:,.0f} GPU-hours ({small / every:.1%})"
            )
            printed_trace = True
        window = [j for j in debug if j.submit <= result.last_submit and j.wait is not None]
        burst = _in_burst(window)
        waits_burst = [j.wait for j in window if j.id in burst]
        waits_alone = [j.wait for j in window if j.id not in burst]
        long = sum(1 for j in window if j.wait > LONG_WAIT)
        print(
            f"{arg}: {long / len(window):.0%} of {len(window):,} wait > 10 min; "
            f"in a burst ({len(waits_burst):,}): p50 {_minutes(nearest_rank(waits_burst, 0.5))}, "
            f"p90 {_minutes(nearest_rank(waits_burst, 0.9))}; "
            f"alone ({len(waits_alone):,}): p50 {_minutes(nearest_rank(waits_alone, 0.5))}, "
            f"p90 {_minutes(nearest_rank(waits_alone, 0.9))}"
        )
        window_ids = {j.id for j in window}
        bound, unowed = _on_own_entitlement(debug, window_ids, budgets, spec.gpus)
        twice, _ = _on_own_entitlement(debug, window_ids, budgets, spec.gpus, multiple=2)
        stretches = oversubscribed_spans(result, result.last_submit)
        busy, _ = _on_own_entitlement(debug, window_ids, budgets, spec.gpus, stretches=stretches)
        crowded = sum(1 for j in window if any(a <= j.submit < b for a, b in stretches))
        print(
            f"{arg}: alone on each team's entitlement: p90 {_minutes(bound)} "
            f"(on twice it: {_minutes(twice)}); {crowded:,} of {len(window):,} arrive in "
            f"over-demanded hours: queued there only, every GPU free otherwise: "
            f"p90 {_minutes(busy)} ({unowed:,} jobs of teams owed no GPUs left out)"
        )
        spare = _on_spare_capacity(result, debug, window_ids, budgets, spec.gpus)
        replayed = _on_spare_capacity(
            result, debug, window_ids, budgets, spec.gpus, as_replayed=True
        )
        print(
            f"{arg}: alone on every GPU the other teams are not owed (each its entitlement, "
            f"or less when it asks for less): asking the least any schedule leaves them, "
            f"p90 {_minutes(spare)}; asking what they asked in this replay, "
            f"p90 {_minutes(replayed)}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
