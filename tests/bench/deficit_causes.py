"""When a team runs below its entitlement with work waiting, what stands in its way, on a replay.

Run: ``.venv/bin/python -m tests.bench.deficit_causes --trace var/sim/philly-variant-2027.csv
team1 fairshare:512`` — ``--trace PATH`` (optional: Philly otherwise) and the team first,
then ``policy:gpus[:first N jobs]`` arguments. The engine's state after each cycle is counted
at every 15-minute instant of the submit window until the next cycle (as
``tests.bench.idle_breakdown`` counts it). Printed per argument, as means over the instants
at which the team had charged work pending while it held fewer charged GPUs than its
entitlement:

- the deficit (entitlement minus the GPUs it held);
- idle GPUs on held nodes, by whom the hold is for: the team itself; another team whose
  holder would take it past its entitlement (``crosses``), would not (``within``), or that
  already holds its entitlement (``above``); and of each kind of another team's hold, the part
  on nodes where the team had a pending single-node workload that fit in the free GPUs;
- the GPUs other teams held above their entitlements.
"""

from __future__ import annotations

import sys
from collections import Counter

from scheduler.engine import Scheduler, make_policy
from scheduler.simulator import replay
from tests.bench.trace_source import RunSpec, first_jobs, from_args, loaded, run_spec

SAMPLE_SECONDS = 900.0
HOLDERS = ("own", "crosses", "within", "above")


class _Sampled:
    """A scheduler that counts, on a fixed grid of simulated time, why ``team`` is below its
    entitlement (the state the last cycle left)."""

    def __init__(self, sched: Scheduler, team: str, entitled: dict[str, float], window):
        self._sched = sched
        self._team = team
        self._entitled = entitled
        self._next, self._last = window
        self._state: Counter[str] | None = None
        self.totals: Counter[str] = Counter()

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        while self._next < now and self._next <= self._last:
            if self._state is not None:
                self.totals.update(self._state)
            self._next += SAMPLE_SECONDS
        result = self._sched.cycle(now, usage, explain)
        self._state = self._measure()
        return result

    def _pending_shapes(self) -> list[tuple[int, ...]]:
        """The (GPUs, nodes) shapes of the team's pending charged workloads."""
        s = self._sched
        shapes = []
        for shape, heap in s._queues[0].get(self._team, {}).items():
            if any(s._pending.get(wid) is not None and s._pending[wid].seq == seq
                   for _, seq, wid in heap):  # fmt: skip
                shapes.append(shape)
        return shapes

    def _measure(self) -> Counter[str]:
        s, team, entitled = self._sched, self._team, self._entitled
        held_by = s._charged_alloc
        state: Counter[str] = Counter(instants=1)
        shapes = self._pending_shapes()
        if not shapes:
            return state
        state["pending"] = 1
        own = entitled.get(team, 0.0)
        if held_by.get(team, 0) >= own:
            return state
        state["below"] = 1
        state["deficit"] = own - held_by.get(team, 0)
        for idx, holder_id in s._last_reserved.items():
            free = s.capacity.nodes[idx].free
            holder = s._pending.get(holder_id)
            if free <= 0 or holder is None:
                continue
            if holder.project == team:
                kind = "own"
            else:
                has, owed = held_by.get(holder.project, 0), entitled.get(holder.project, 0.0)
                kind = (
                    "above" if has >= owed else "crosses" if has + holder.gpus > owed else "within"
                )
            state[f"held {kind}"] += free
            if kind != "own" and any(n == 1 and g <= free for g, n in shapes):
                state[f"fits {kind}"] += free
        state["others above"] = sum(
            has - entitled.get(p, 0.0)
            for p, has in held_by.items()
            if p != team and has > entitled.get(p, 0.0)
        )
        return state


def causes(team: str, policy: str, gpus: int, trace, budgets) -> Counter[str]:
    """The counts ``_Sampled`` gathers over the submit window of one replay."""
    submits = [job.submit_time for job in trace.jobs]
    entitled = {name: gpus * share for name, share in budgets.effective_shares().items()}
    if team not in entitled:
        raise SystemExit(f"{team!r} has no budget; budgeted teams: {', '.join(sorted(entitled))}")
    wrappers: list[_Sampled] = []

    def factory(nodes, budget_root, policy_name, params):
        sched = Scheduler(nodes, budget_root, policy=make_policy(policy_name), params=params)
        wrappers.append(_Sampled(sched, team, entitled, (min(submits), max(submits))))
        return wrappers[-1]

    replay(trace, budgets, RunSpec(policy, gpus, None).config(), scheduler_factory=factory)
    return wrappers[0].totals


def main(argv: list[str]) -> None:
    """Print one line per ``policy:gpus[:jobs]`` argument after ``[--trace PATH] team``."""
    source, args = from_args(argv)
    if len(args) < 2:
        raise SystemExit("usage: [--trace PATH] team policy:gpus[:first N jobs] ...")
    team, specs = args[0], args[1:]
    trace, budgets = loaded(source)
    for arg in specs:
        spec = run_spec(arg)
        totals = causes(team, spec.policy, spec.gpus, first_jobs(trace, spec), budgets)
        below = totals["below"] or 1
        held = ", ".join(f"{k} {totals[f'held {k}'] / below:.1f}" for k in HOLDERS)
        fits = ", ".join(f"{k} {totals[f'fits {k}'] / below:.1f}" for k in HOLDERS[1:])
        print(
            f"{arg}: {team} had work pending at {totals['pending']:,} of {totals['instants']:,} "
            f"instants, below its entitlement at {totals['below']:,}; then, in GPUs: deficit "
            f"{totals['deficit'] / below:.1f}; idle on nodes held for {held}; of those, where "
            f"one of its pending single-node workloads fit: {fits}; other teams above their "
            f"entitlement {totals['others above'] / below:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
