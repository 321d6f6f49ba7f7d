"""CPU seconds used by each component of the run, read from /proc (Linux)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from tests.reliability_load.harness.processes import Supervised
from tests.reliability_load.harness.services import Services


class ProcessCpu(NamedTuple):
    """CPU seconds (user + system) of the live processes, and who is whose parent."""

    by_group: dict[int, float]
    by_pid: dict[int, float]
    parents: dict[int, int]


def cpu_seconds_by_group() -> ProcessCpu:
    """CPU seconds (user + system) of live processes by process group and by pid, and each
    pid's parent, from /proc (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    groups: dict[int, float] = {}
    pids: dict[int, float] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        pids[pid] = seconds
        groups[int(fields[2])] = groups.get(int(fields[2]), 0.0) + seconds
    return ProcessCpu(groups, pids, parents)


def cpu_usage(processes: dict[str, Supervised], services: Services) -> dict[str, float]:
    """CPU seconds used so far by each component's live processes: the web server, the
    loop (worker, beat), PostgreSQL (the postmaster and its children), Redis, agents.

    Taken before and after the run; the difference says where the cores went (a process
    restarted by a fault counts from its restart; a connection that ended is not counted).
    """
    groups, pids, parents = cpu_seconds_by_group()
    usage: dict[str, float] = {}
    for name, process in processes.items():
        if process.proc and process.proc.poll() is None:
            key = "agents" if name.startswith("agent") else name
            usage[key] = usage.get(key, 0.0) + groups.get(process.proc.pid, 0.0)
    pid_file = services.pgdata / "postmaster.pid"
    if pid_file.exists():
        postmaster = int(pid_file.read_text().split()[0])
        usage["postgresql"] = pids.get(postmaster, 0.0) + sum(
            seconds for pid, seconds in pids.items() if parents.get(pid) == postmaster
        )
    redis_pid = services.redis_dir / "redis.pid"
    if redis_pid.exists():
        usage["redis"] = pids.get(int(redis_pid.read_text().strip()), 0.0)
    return usage
