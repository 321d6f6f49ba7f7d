"""``python -m scheduler.agent``: the node agent without Django (HTTP to the server only).

Same options as ``python manage.py run_agent``; the token comes from ``--token`` or the
``GPU_AGENT_TOKEN`` environment variable (prefer the variable: command lines are visible to
every user of the machine).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from scheduler.agent.launch_spec import parse_gpu_indices
from scheduler.agent.loop import run_agent

DEFAULT_SERVER = "http://127.0.0.1:8000"


def add_agent_arguments(parser: argparse.ArgumentParser) -> None:
    """The agent's options, shared with ``manage.py run_agent``."""
    parser.add_argument("--node", required=True, help="Node name, as the cluster knows it.")
    parser.add_argument(
        "--gpus",
        required=True,
        help="GPU indices this agent hands out, e.g. 0,1,2,3 or 0-7.",
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("GPU_AGENT_SERVER", DEFAULT_SERVER),
        help=f"Server base URL (default $GPU_AGENT_SERVER or {DEFAULT_SERVER}).",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get("GPU_AGENT_TOKEN", ""),
        help="Agent token (default $GPU_AGENT_TOKEN).",
    )
    parser.add_argument("--poll-seconds", type=float, default=2.0)
    parser.add_argument("--heartbeat-seconds", type=float, default=10.0)
    parser.add_argument(
        "--grace-seconds",
        type=float,
        default=30.0,
        help="Time between SIGTERM and SIGKILL when stopping a workload (an order may override).",
    )
    parser.add_argument(
        "--log-dir", default=None, help="Where each run's output goes (default: discarded)."
    )
    parser.add_argument(
        "--utilization-seconds",
        type=float,
        default=60.0,
        help="How often the GPUs' use per run is sent to the server (default 60; they are "
        "sampled every 5 s, or as often when this is shorter).",
    )
    parser.add_argument(
        "--no-gpu-telemetry",
        action="store_true",
        help="Do not sample the GPUs (NVML or nvidia-smi) nor report their use per run.",
    )


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run the agent until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m scheduler.agent", description=__doc__)
    add_agent_arguments(parser)
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        gpus = parse_gpu_indices(options.gpus)
    except ValueError as exc:
        parser.error(f"--gpus: {exc}")
    if not options.token:
        parser.error("--token (or GPU_AGENT_TOKEN) is required")
    if not 1 <= options.utilization_seconds <= 3600:
        parser.error("--utilization-seconds: from 1 to 3600")
    return run_agent(
        server=options.server,
        token=options.token,
        node=options.node,
        gpus=gpus,
        poll_seconds=options.poll_seconds,
        heartbeat_seconds=options.heartbeat_seconds,
        grace_seconds=options.grace_seconds,
        log_dir=options.log_dir,
        gpu_telemetry=not options.no_gpu_telemetry,
        utilization_seconds=options.utilization_seconds,
    )


if __name__ == "__main__":
    sys.exit(main())
