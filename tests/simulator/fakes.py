"""A tiny stand-in for the engine's ``Scheduler``, so the simulator's bookkeeping can be tested
on its own: first come first served, first fit, optional scripted preemptions."""

from __future__ import annotations

from scheduler.engine import CycleResult, Preemption, RunningWorkload, Start


class ScriptedScheduler:
    """FIFO by submit time; single-node work on the first node with room, gangs on whole free
    nodes. ``preempt_at`` maps a cycle time to workload ids to preempt then (requeued)."""

    def __init__(self, nodes, budget_root, policy, params, preempt_at=None):
        self.nodes = {n.name: n.gpus for n in nodes}
        self.used = dict.fromkeys(self.nodes, 0)
        self.running: dict[str, RunningWorkload] = {}
        self.pending: dict = {}
        self.preempt_at = {t: list(ids) for t, ids in (preempt_at or {}).items()}
        self.cycles: list[float] = []

    def submit(self, workload) -> None:
        self.pending[workload.id] = workload

    def finish(self, workload_id: str) -> None:
        rec = self.running.pop(workload_id)
        for name, gpus in rec.placement.items():
            self.used[name] -= gpus

    def pending_count(self) -> int:
        return len(self.pending)

    def cycle(self, now, usage, explain=False) -> CycleResult:
        self.cycles.append(now)
        result = CycleResult()
        for wid in self.preempt_at.pop(now, []):
            if wid in self.running:
                rec = self.running.pop(wid)
                for name, gpus in rec.placement.items():
                    self.used[name] -= gpus
                self.pending[wid] = rec.workload
                result.preemptions.append(Preemption(wid, "scripted", None))
        queue = list(self.pending.values())
        if result.preemptions:  # requeued work goes back to its submit-time place
            queue.sort(key=lambda w: w.submit_time)
        for w in queue:
            placement = self._place(w)
            if placement is None:
                break  # strict FIFO: nothing passes a blocked head
            del self.pending[w.id]
            for name, gpus in placement.items():
                self.used[name] += gpus
            self.running[w.id] = RunningWorkload(w, placement, now)
            result.starts.append(Start(w.id, placement, "fits"))
        return result

    def _place(self, w):
        if w.nodes > 1:
            free = [n for n, g in self.nodes.items() if self.used[n] == 0]
            if len(free) < w.nodes:
                return None
            return {n: w.gpus // w.nodes for n in free[: w.nodes]}
        for name, gpus in self.nodes.items():
            if gpus - self.used[name] >= w.gpus:
                return {name: w.gpus}
        return None


def scripted(preempt_at=None):
    """A scheduler factory for ``replay(..., scheduler_factory=...)``."""

    def factory(nodes, budget_root, policy, params):
        return ScriptedScheduler(nodes, budget_root, policy, params, preempt_at)

    return factory
