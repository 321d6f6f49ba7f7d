"""Leftovers of an earlier life of the agent: the markers the agent sets in the environment
of every workload process, and ``reap_orphans``, which kills the processes a killed agent
could not stop. Linux only (reads ``/proc``). No Django, no HTTP."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

logger = logging.getLogger(__name__)

# Environment variables the agent sets in every workload process.
ENV_NODE = "GPU_AGENT_NODE"
ENV_KEY = "GPU_AGENT_KEY"
ENV_INSTANCE = "GPU_AGENT_INSTANCE"


def reap_orphans(node: str, *, keep_instance: str) -> list[int]:
    """SIGKILL workload processes left by an earlier life of this node's agent (Linux only).

    An agent killed with SIGKILL cannot stop its children; the server requeues their work when
    the agent's heartbeat expires or when it registers again, so leftovers would run the same
    work twice and hold GPUs. They are recognised by the agent's environment marker.
    """
    killed: list[int] = []
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        return killed
    want_node = f"{ENV_NODE}={node}".encode()
    keep = f"{ENV_INSTANCE}={keep_instance}".encode()
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            want_node in environ
            and keep not in environ
            and any(item.startswith(f"{ENV_INSTANCE}=".encode()) for item in environ)
        ):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    if killed:
        logger.warning("killed %d process(es) left by an earlier agent on %s", len(killed), node)
    return killed
