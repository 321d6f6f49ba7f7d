"""The trace simulator: replays a workload trace through the scheduling engine in virtual time.

Pure Python (no Django), so the ``simulate`` command and a browser page can share it.
Modules: ``traces`` (load and validate traces), ``budgets`` (budget trees), ``contract``
(default minimum runtime and resumability), ``ledger`` (hourly accounting and the usage
window), ``replay`` (a replay from trace to result: ``replay_loop`` the event loop,
``replay_records`` the configuration, job records and result), ``metrics`` (owed,
delivered, waits…), ``timeline`` (Plotly figures), ``report`` (comparison runs,
metrics.json, the table), ``durations``.
The replay's hot modules load from the native build when there is one (``scheduler.engine.native``).
"""

from scheduler.engine.native import extend_path

__path__ = extend_path(__path__, __name__)


from scheduler.simulator.budgets import Budget, BudgetError, load_budgets, parse_budgets
from scheduler.simulator.contract import ContractRule
from scheduler.simulator.durations import parse_duration
from scheduler.simulator.metrics import compute_metrics
from scheduler.simulator.replay import ConfigError, ReplayConfig, ReplayResult, replay
from scheduler.simulator.traces import Trace, TraceError, TraceJob, load_trace, read_trace

__all__ = [
    "Budget",
    "BudgetError",
    "ConfigError",
    "ContractRule",
    "ReplayConfig",
    "ReplayResult",
    "Trace",
    "TraceError",
    "TraceJob",
    "compute_metrics",
    "load_budgets",
    "load_trace",
    "parse_budgets",
    "parse_duration",
    "read_trace",
    "replay",
]
