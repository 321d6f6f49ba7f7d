"""The agent loop: pull orders, run or stop processes, acknowledge, report exits, heartbeat.

The loop never blocks on the server. Processes are watched every tick whether or not the
server answers; acknowledgements and exit reports wait in memory and are sent again until the
server has them, so a server restart loses nothing (calls back off exponentially meanwhile).
An order seen twice (same idempotency key) is acknowledged again and never applied twice.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from scheduler.agent.client import AgentClient, RequestRefused, TransientError
from scheduler.agent.orphans import reap_orphans
from scheduler.agent.runner import ProcessExit, ProcessRunner
from scheduler.agent.telemetry import NoTelemetry, detect_sampler
from scheduler.agent.utilization import UtilizationReporter

logger = logging.getLogger(__name__)

AGENT_VERSION = "1"
REMEMBERED_ORDERS = 10_000


class AgentFatal(Exception):
    """The agent cannot go on (its token is refused at registration, for example)."""


@dataclass
class _Ack:
    order_id: int | str
    status: str
    message: str = ""


class Agent:
    """One node's executor: the HTTP client and the process runner, tied by a polling loop.

    Protocol rules it keeps (docs/agents.md): a stop is acknowledged only once the process is
    gone (the server keeps charging the run until then, and will not place the workload again
    before); a start whose GPUs are still held by a stopping process waits for them (the
    server hands a preempted run's GPUs to the preemptor in the same cycle).
    """

    def __init__(
        self,
        client: AgentClient,
        runner: ProcessRunner,
        *,
        node: str,
        poll_seconds: float = 2.0,
        heartbeat_seconds: float = 10.0,
        backoff_max_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        utilization: UtilizationReporter | None = None,
    ) -> None:
        self.client = client
        self.utilization = utilization  # None: no GPU telemetry on this node
        self.runner = runner
        self.node = node
        self.poll_seconds = poll_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.clock = clock
        self.registered = False
        # What the server has not heard yet: acknowledgements (by idempotency key) and exits.
        self._acks: OrderedDict[str, _Ack] = OrderedDict()
        self._exits: OrderedDict[str, ProcessExit] = OrderedDict()
        # Orders carried out (by idempotency key), to answer a redelivery without redoing it.
        self._applied: OrderedDict[str, _Ack] = OrderedDict()
        # Starts waiting for GPUs that stopping processes still hold (by run).
        self._deferred: OrderedDict[str, dict] = OrderedDict()
        # Stop orders waiting for their process to end (run -> [(idempotency key, order id)]).
        self._stopping: dict[str, list[tuple[str, int | str]]] = {}
        # Runs stopped before this agent started them. A run started and preempted in two
        # quick cycles reaches the agent as one batch, the stop first: acknowledging that
        # stop ends the run on the server, so its start must not be carried out after it
        # (the process would hold GPUs the server has given to another run, and run work
        # the server has requeued).
        self._stopped_unstarted: OrderedDict[str, None] = OrderedDict()
        self._next_contact = 0.0
        self._next_heartbeat = 0.0
        self._backoff = 0.0

    # --- public --------------------------------------------------------------------------
    def run_forever(self, stop: threading.Event, *, shutdown_grace: float | None = None) -> None:
        """Tick until ``stop`` is set, then stop every process and report their exits."""
        while not stop.is_set():
            self.tick()
            stop.wait(min(0.2, self.poll_seconds))
        self.shutdown(grace_seconds=shutdown_grace)

    def tick(self) -> None:
        """One pass: reap processes, start what can start; when due, talk to the server."""
        self._reap()
        self._start_deferred()
        if self.utilization is not None:
            self.utilization.tick(self.runner.gpus_by_run())
        now = self.clock()
        if now < self._next_contact:
            return
        try:
            self._talk(now)
        except (TransientError, RequestRefused) as exc:
            if isinstance(exc, RequestRefused) and exc.status == 409:
                # The server does not know this agent as registered (its node was removed or
                # re-created): register again on the next contact.
                self.registered = False
            self._backoff = min(max(self._backoff * 2, 1.0), self.backoff_max_seconds)
            self._next_contact = self.clock() + self._backoff
            logger.warning("server call failed (%s); retrying in %.0fs", exc, self._backoff)
        else:
            self._backoff = 0.0
            self._next_contact = self.clock() + self.poll_seconds

    def shutdown(self, *, grace_seconds: float | None = None, report_timeout: float = 10.0) -> None:
        """Stop every process (SIGTERM, grace, SIGKILL) and try to report their exits.

        They are reported ``preempted``: the work was interrupted, and the server requeues it.
        """
        self._deferred.clear()
        self.runner.stop_all(grace_seconds=grace_seconds)
        grace = self.runner.grace_seconds if grace_seconds is None else grace_seconds
        self.runner.wait_all(timeout=grace + 5)
        self._reap()
        deadline = time.monotonic() + report_timeout
        while (self._exits or self._acks) and time.monotonic() < deadline:
            try:
                self._flush()
            except TransientError:
                time.sleep(1)
        if self._exits or self._acks:
            logger.warning(
                "%d exit report(s) and %d acknowledgement(s) could not be delivered",
                len(self._exits),
                len(self._acks),
            )

    # --- processes -----------------------------------------------------------------------
    def _reap(self) -> None:
        for ended in self.runner.poll():
            self._exits[ended.key] = ended
            for idem, order_id in self._stopping.pop(ended.key, []):
                self._acks[idem] = self._remember(idem, _Ack(order_id, "stopped", ended.message))

    def _start_deferred(self) -> None:
        for run_key, order in list(self._deferred.items()):
            if int(order["gpus"]) <= len(self.runner.free_gpus()):
                del self._deferred[run_key]
                self._start(order)

    def _start(self, order: dict) -> None:
        run_key = str(order["run"])
        idem = _idem(order)
        env = {
            "GOVERNANCE_WORKLOAD_ID": str(order.get("workload", "")),
            "GOVERNANCE_RUN_ID": run_key,
        }
        started = self.runner.start(
            run_key, order.get("launch_spec") or {}, gpus=int(order["gpus"]), env=env
        )
        if started:
            ack = _Ack(order["id"], "started", f"pid {self.runner.pid(run_key)}")
        else:
            ack = _Ack(order["id"], "rejected", "could not start; see the exit report")
        self._acks[idem] = self._remember(idem, ack)

    # --- talking to the server -------------------------------------------------------------
    def _talk(self, now: float) -> None:
        if not self.registered:
            self._register()
        self._flush()
        if now >= self._next_heartbeat:
            self._heartbeat()
            self._next_heartbeat = now + self.heartbeat_seconds
        for order in self.client.fetch_orders():
            self._apply(order)
        self._start_deferred()
        self._flush()
        if self.utilization is not None:
            self.utilization.flush(self.client.report_utilization, RequestRefused)

    def _register(self) -> None:
        try:
            answer = self.client.register(
                node=self.node,
                gpus=len(self.runner.gpus),
                gpu_indices=self.runner.gpus,
                version=AGENT_VERSION,
            )
        except RequestRefused as exc:
            raise AgentFatal(f"registration refused: {exc}") from exc
        self.registered = True
        # The server says how often it wants a heartbeat; more often is fine.
        asked = float(answer.get("heartbeat_seconds") or self.heartbeat_seconds)
        self.heartbeat_seconds = min(asked, self.heartbeat_seconds)
        # Runs the server believes are on this node but that no process of ours carries (an
        # earlier life of this agent died with them): report them interrupted, so the server
        # ends them and requeues their workloads instead of charging them forever.
        now = self.clock()
        for run in answer.get("open_runs", []):
            key = str(run)
            if not self.runner.is_running(key) and key not in self._deferred:
                self._exits[key] = _lost(key, now)
        logger.info(
            "registered %s (%d GPUs) as %s", self.node, len(self.runner.gpus), answer.get("state")
        )

    def _heartbeat(self) -> None:
        answer = self.client.heartbeat(running=self.runner.running_keys())
        # Processes the server no longer expects here (their runs ended while this agent was
        # unreachable and its node was declared down) would run the same work twice.
        for key in answer.get("stop_runs", []):
            if self.runner.stop(str(key), grace_seconds=0):
                logger.warning("stopping run %s: the server has ended it", key)

    def _apply(self, order: dict) -> None:
        idem = _idem(order)
        run_key = str(order["run"])
        seen = self._applied.get(idem)
        if seen is not None:
            # The same order delivered twice: acknowledge again, apply nothing.
            self._acks[idem] = seen
            return
        if order["kind"] == "start":
            if any(_idem(o) == idem for o in self._deferred.values()):
                return  # still waiting for GPUs
            if run_key in self._stopped_unstarted:
                logger.info("run %s was stopped before it started: not starting it", run_key)
                self._acks[idem] = self._remember(
                    idem, _Ack(order["id"], "rejected", "stopped before start")
                )
                return
            if self.runner.is_running(run_key):
                self._acks[idem] = self._remember(idem, _Ack(order["id"], "started", "running"))
            elif int(order["gpus"]) <= len(self.runner.free_gpus()):
                self._start(order)
            elif int(order["gpus"]) <= len(self.runner.free_gpus()) + self._stopping_gpus():
                logger.info("run %s waits for GPUs held by stopping processes", run_key)
                self._deferred[run_key] = order
            else:
                self._start(order)  # cannot fit at all: the runner reports the failure
        elif order["kind"] == "stop":
            if any(key == idem for key, _ in self._stopping.get(run_key, [])):
                return  # already stopping under this order; acknowledged when it ends
            deferred = self._deferred.pop(run_key, None)
            if deferred is not None:
                # Stopped before it could start: consume the start, report it interrupted.
                self._acks[_idem(deferred)] = self._remember(
                    _idem(deferred), _Ack(deferred["id"], "rejected", "stopped before start")
                )
                self._exits[run_key] = _not_started(run_key, self.clock())
            grace = order.get("grace_seconds")
            grace = None if grace is None else float(grace)
            if self.runner.stop(run_key, grace_seconds=grace):
                self._stopping.setdefault(run_key, []).append((idem, order["id"]))
            else:
                self._stopped_unstarted[run_key] = None
                while len(self._stopped_unstarted) > REMEMBERED_ORDERS:
                    self._stopped_unstarted.popitem(last=False)
                self._acks[idem] = self._remember(
                    idem, _Ack(order["id"], "stopped", "was not running")
                )
        else:
            self._acks[idem] = self._remember(
                idem, _Ack(order["id"], "rejected", f"unknown order kind {order['kind']!r}")
            )

    def _stopping_gpus(self) -> int:
        return sum(self.runner.gpus_of(key) for key in self._stopping)

    def _remember(self, idem: str, ack: _Ack) -> _Ack:
        self._applied[idem] = ack
        while len(self._applied) > REMEMBERED_ORDERS:
            self._applied.popitem(last=False)
        return ack

    def _flush(self) -> None:
        """Send waiting acknowledgements, then exit reports; keep what the server missed."""
        for idem, ack in list(self._acks.items()):
            try:
                self.client.acknowledge(ack.order_id, status=ack.status, message=ack.message)
            except RequestRefused as exc:
                logger.warning("acknowledgement of order %s refused: %s", ack.order_id, exc)
            self._acks.pop(idem, None)
        for key, ended in list(self._exits.items()):
            try:
                self.client.report_exit(
                    key,
                    outcome=ended.outcome,
                    exit_code=ended.returncode,
                    message=ended.message,
                )
            except RequestRefused as exc:
                logger.warning("exit report of run %s refused: %s", key, exc)
            self._exits.pop(key, None)


def _idem(order: dict) -> str:
    return str(order.get("idempotency_key") or f"{order['kind']}:{order['id']}")


def _not_started(run_key: str, now: float, error: str = "stopped before it started") -> ProcessExit:
    return ProcessExit(
        key=run_key,
        returncode=None,
        stopped=True,
        killed_after_grace=False,
        started_at=now,
        ended_at=now,
        gpus=[],
        error=error,
    )


def _lost(run_key: str, now: float) -> ProcessExit:
    return _not_started(run_key, now, "lost: the agent restarted while it ran")


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT ask the loop to stop gracefully (processes are stopped first)."""

    def handler(signum, frame):
        logger.info("received %s: stopping workloads and exiting", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def run_agent(
    *,
    server: str,
    token: str,
    node: str,
    gpus: list[str],
    poll_seconds: float = 2.0,
    heartbeat_seconds: float = 10.0,
    grace_seconds: float = 30.0,
    log_dir: str | None = None,
    stop: threading.Event | None = None,
    gpu_telemetry: bool = True,
    utilization_seconds: float = 60.0,
) -> int:
    """Run the agent until SIGTERM/SIGINT (or ``stop``); return a process exit status.

    Processes left by an earlier life of this node's agent are killed first: the server has
    requeued (or will requeue) their work, so they must not go on holding GPUs.
    """
    # Processes are marked with the node *and* the server, so that two agents for nodes of
    # the same name on one machine (two test sessions, two clusters) never reap each other's.
    identity = f"{node}@{server}"
    runner = ProcessRunner(gpus=gpus, node=identity, log_dir=log_dir, grace_seconds=grace_seconds)
    reap_orphans(identity, keep_instance=runner.instance)
    sampler, telemetry = detect_sampler() if gpu_telemetry else (NoTelemetry(), "turned off")
    logger.info("GPU telemetry: %s", telemetry)
    agent = Agent(
        AgentClient(server, token),
        runner,
        node=node,
        poll_seconds=poll_seconds,
        heartbeat_seconds=heartbeat_seconds,
        utilization=None
        if isinstance(sampler, NoTelemetry)
        else UtilizationReporter(
            sampler,
            sample_seconds=min(5.0, utilization_seconds),
            report_seconds=utilization_seconds,
        ),
    )
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        install_signal_handlers(stop)
    logger.info("agent for %s on %s with GPUs [%s]", node, server, ",".join(gpus))
    try:
        agent.run_forever(stop)
    except AgentFatal as exc:
        logger.error("%s", exc)
        runner.stop_all(grace_seconds=grace_seconds)
        runner.wait_all(timeout=grace_seconds + 5)
        return 2
    return 0
