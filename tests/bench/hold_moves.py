"""How often a hold moves in a replay: the nodes held for a workload, walk after walk.

Run: ``.venv/bin/python -m tests.bench.hold_moves fairshare:256 fairshare:512`` — each
argument is ``policy:gpus[:first N jobs]``; ``--trace PATH`` first replays a canonical trace
(``manage.py trace_variant`` writes one) with budgets proportional to GPU-hours.

The engine chooses a pending workload's hold afresh in every walk (``docs/design.md``,
"Placement and holds"). This counts what that costs in stability. After every cycle it reads
the holds the last walk left (node -> holder) and compares each holder's nodes with the ones
it held the walk before, while the holder is still pending. Printed per argument, for gangs
and for single-node holders apart:
- holders, and the walks in which they held something;
- ``kept``: walks whose held nodes were the ones of the holder's previous walk;
- ``grew`` / ``moved``: walks that only added nodes / that let go of a node it held before
  (a moved hold), and the GPUs that stood free on the nodes let go (capacity the hold had
  kept idle and then gave up);
- ``paused``: walks in which a holder still pending held nothing after holding the walk
  before (its turn did not reach a hold).
"""

from __future__ import annotations

import sys
from collections import Counter

from scheduler.simulator import ReplayConfig, replay
from scheduler.simulator.budgets import Budget
from scheduler.simulator.replay import _engine_scheduler
from scheduler.simulator.traces import Trace
from tests.bench.trace_source import each_run


class _Watched:
    """A scheduler whose holds are compared walk by walk (see the module's docstring)."""

    def __init__(self, sched) -> None:
        self._sched = sched
        self.last: dict[str, frozenset[int]] = {}  # holder -> nodes of its last walk's hold
        self.holders: dict[str, bool] = {}  # holder -> is a gang
        self.counts: Counter[tuple[bool, str]] = Counter()
        self.idle_let_go: Counter[bool] = Counter()  # gang? -> free GPUs on nodes let go
        self._seen_reserved: dict[int, str] | None = None
        self.result = None  # the replay, once it has ended (``watch_holds``)

    def __getattr__(self, name):
        return getattr(self._sched, name)

    def cycle(self, now, usage, explain=False):
        sched = self._sched
        result = sched.cycle(now, usage, explain)
        reserved = sched._last_reserved
        if reserved is self._seen_reserved:
            return result  # no walk: the holds are the last walk's
        self._seen_reserved = reserved
        held: dict[str, set[int]] = {}
        for idx, holder in reserved.items():
            held.setdefault(holder, set()).add(idx)
        pending = sched._pending
        nodes = sched.capacity.nodes
        for holder in list(self.last):
            if holder not in held:
                if holder in pending:
                    self.counts[(self.holders[holder], "paused")] += 1
                del self.last[holder]
        for holder, idxs in held.items():
            job = pending.get(holder)
            if job is None:
                continue
            gang = job.nodes > 1
            self.holders[holder] = gang
            now_held = frozenset(idxs)
            before = self.last.get(holder)
            self.counts[(gang, "walks")] += 1
            if before is not None:
                if now_held == before:
                    self.counts[(gang, "kept")] += 1
                elif before <= now_held:
                    self.counts[(gang, "grew")] += 1
                else:
                    self.counts[(gang, "moved")] += 1
                    self.idle_let_go[gang] += sum(nodes[i].free for i in before - now_held)
            self.last[holder] = now_held
        return result


def watch_holds(trace: Trace, budgets: Budget | None, config: ReplayConfig) -> _Watched:
    """Replay ``trace``; its scheduler's hold counts (``_Watched.counts``, ``idle_let_go``,
    ``holders``) as the module's docstring describes them, and the replay (``result``)."""
    watched: list[_Watched] = []

    def factory(*args):
        watched.append(_Watched(_engine_scheduler(*args)))
        return watched[-1]

    result = replay(trace, budgets, config, scheduler_factory=factory)
    (probe,) = watched
    probe.result = result
    return probe


def main(args: list[str]) -> None:
    for arg, trace, budgets, config in each_run(args):
        probe = watch_holds(trace, budgets, config)
        print(f"{arg}:")
        for gang in (True, False):
            holders = sum(1 for g in probe.holders.values() if g == gang)
            c = {k: probe.counts[(gang, k)] for k in ("walks", "kept", "grew", "moved", "paused")}
            print(
                f"  {'gangs' if gang else 'single-node'}: {holders:,} holders, "
                f"{c['walks']:,} walks holding; kept {c['kept']:,}, grew {c['grew']:,}, "
                f"moved {c['moved']:,} (letting go of {probe.idle_let_go[gang]:,} free GPUs), "
                f"paused {c['paused']:,}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
