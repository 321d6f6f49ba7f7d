"""What a replay is given and what it produces: its configuration, one record per job, the
runs and preemptions it applied, and the result ``metrics`` turns into figures.

Compiled with the replay loop (``scheduler.native_build``): the loop reads and writes these
records on every event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduler.simulator.contract import ContractRule
from scheduler.simulator.ledger import UsageLedger
from scheduler.simulator.traces import TraceJob

# The product's idle rule (the live loop's, from telemetry): GPUs below 5 % busy for
# 30 minutes while past the minimum runtime. The replay applies it to a job's mean
# utilization from the trace.
IDLE_UTILIZATION = 0.05
IDLE_AFTER = 1800.0


def checkpointed_seconds(ran: float, left: float, checkpoint_interval: float) -> float:
    """The work a resumable run keeps when preempted after running ``ran`` seconds with
    ``left`` seconds of work at its start: up to its last checkpoint, never more than it had
    left. The replay and the queue page's forward estimate both apply it."""
    return min(math.floor(ran / checkpoint_interval) * checkpoint_interval, left)


class ConfigError(ValueError):
    """Replay parameters that make no sense (named in the message)."""


@dataclass(frozen=True)
class ReplayConfig:
    """Cluster shape, policy and the knobs of the replay (times in seconds)."""

    gpus: int
    gpus_per_node: int = 8
    policy: str = "fairshare"
    window_seconds: float = 7 * 86400.0
    contract: ContractRule = field(default_factory=ContractRule)
    checkpoint_interval: float = 1800.0
    restart_overhead: float = 300.0
    cycle_interval: float = 60.0
    max_cycle_interval: float = 960.0  # back-off bound for fruitless periodic cycles
    wake_at_min_runtime: bool = True  # run a cycle the moment a run becomes preemptible
    # Also run a cycle when a wait the engine keeps ends (``Scheduler.next_wait_timer``: a
    # patience ending, a wait reaching the hold bound), as the live loop's cycles every few
    # seconds do; otherwise such a decision waits for the next event or periodic cycle. A
    # failed search's memo running out is left to those cycles: when it runs out depends
    # on how often the search was repeated, which the engine's reference path does more
    # often than the incremental one, and the two must wake at the same moments.
    wake_at_timers: bool = False
    record_runs: bool = True
    # False: the engine recomputes every cycle what it otherwise keeps between cycles (the
    # reference its shortcuts are checked against: same decisions, about twice as slow).
    incremental: bool = True
    # Stop at this virtual time (None: when every job has finished): the result is the state
    # as of then — running jobs keep ``run_start``, pending ones ``first_start`` None or an
    # open requeue — as a history that a live cluster continues from needs it.
    until: float | None = None

    def validate(self) -> None:
        """Raise ``ConfigError`` naming the first bad value."""
        if self.gpus_per_node < 1:
            raise ConfigError(f"GPUs per node must be at least 1, not {self.gpus_per_node}")
        if self.gpus < 1:
            raise ConfigError(f"the cluster needs at least 1 GPU, not {self.gpus}")
        if self.gpus % self.gpus_per_node:
            raise ConfigError(
                f"{self.gpus} GPUs is not a whole number of {self.gpus_per_node}-GPU nodes"
            )
        for name in ("window_seconds", "checkpoint_interval", "cycle_interval"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if self.max_cycle_interval < self.cycle_interval:
            raise ConfigError("max_cycle_interval must be at least cycle_interval")
        if self.restart_overhead < 0:
            raise ConfigError(f"restart_overhead must be ≥ 0, not {self.restart_overhead}")
        if self.contract.max_min_runtime < 0:
            raise ConfigError("the minimum-runtime cap must be ≥ 0")

    @property
    def nodes(self) -> int:
        """Number of nodes in the simulated cluster."""
        return self.gpus // self.gpus_per_node


@dataclass(slots=True)
class JobRecord:
    """One replayed job: its contract, and what happened to it."""

    id: str
    project: str
    gpus: int
    nodes: int
    submit: float
    duration: float
    min_runtime: float
    resumable: bool
    debug: bool
    remaining: float = 0.0  # work left, including restart overhead owed
    first_start: float | None = None
    end: float | None = None
    preemptions: int = 0
    lost_gpu_seconds: float = 0.0
    # Every wait after a preemption: (requeued at, started again at or None while waiting).
    requeues: list[tuple[float, float | None]] = field(default_factory=list)
    # The current run, if any.
    run_start: float | None = None
    run_protected_until: float = 0.0  # as the engine set it (churn budget included)
    run_gpus: int = 0
    run_rows: tuple[int, ...] = ()
    gen: int = 0  # bumped on preemption so the old run's pending events are ignored
    utilization: float | None = None  # mean GPU busy fraction from the trace (None: unknown)
    # When the current run became idle (the module's idle rule), or None while it is busy.
    run_idle_from: float | None = None
    # Charged GPU time held idle, one (from, to, GPUs) per run that became idle and ended.
    idle_spans: list[tuple[float, float, int]] = field(default_factory=list)

    @property
    def idle_prone(self) -> bool:
        """True when the trace says this job keeps its GPUs below the idle threshold."""
        return self.utilization is not None and self.utilization < IDLE_UTILIZATION

    @property
    def wait(self) -> float | None:
        """Seconds from submission to first start (None if it never started)."""
        return None if self.first_start is None else self.first_start - self.submit


@dataclass(slots=True)
class Run:
    """One stretch of a job on GPUs: for the timeline and the conservation check."""

    job: int  # index into ReplayResult.jobs
    start: float
    end: float
    protected_until: float  # start + minimum runtime: preemptible after this
    preempted: bool
    gpus: int
    rows: tuple[int, ...]  # GPU rows (node index x GPUs per node + slot)


@dataclass(slots=True)
class PreemptionEvent:
    """A preemption as the replay applied it."""

    time: float
    job: int
    kind: str
    by: str | None
    lost_gpu_seconds: float


@dataclass
class ReplayResult:
    """Everything a replay produced; ``metrics.compute_metrics`` turns it into figures."""

    config: ReplayConfig
    policy: str
    shares: dict[str, float]  # project -> effective share (fraction of the cluster)
    jobs: list[JobRecord]
    skipped: list[TraceJob]  # asked for more GPUs than the cluster has
    runs: list[Run]
    preemptions: list[PreemptionEvent]
    ledger: UsageLedger
    start_time: float
    last_submit: float
    end_time: float
    wall_seconds: float = 0.0
    cycles: int = 0
    tick_cycles: int = 0  # cycles run only because time passed (no event)
    duplicates: int = 0

    @property
    def projects(self) -> list[str]:
        """Every project of the trace (budgeted or not), sorted."""
        return self.ledger.projects
