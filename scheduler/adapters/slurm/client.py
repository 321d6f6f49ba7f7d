"""Runs Slurm's client commands for one ``SlurmConnection`` and parses their parsable output.

Every command runs with ``SLURM_CONF`` (when the connection sets one), ``TZ=UTC`` (``sacct``
prints times in the caller's zone, without an offset) and a fixed ISO time format, under a
timeout. A command that cannot start, times out or exits non-zero raises ``SlurmError`` with
the command and Slurm's own message.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from scheduler.adapters.slurm.plan import Account, Current, Qos, parse_duration

TIMEOUT_SECONDS = 60


class SlurmError(RuntimeError):
    """A Slurm command failed: Slurm unreachable, a change refused, a program missing."""


@dataclass(frozen=True)
class SlurmClient:
    """How to run ``sacctmgr``/``sacct`` for one Slurm cluster."""

    cluster: str
    bin_dir: str = ""
    slurm_conf: str = ""
    timeout: float = TIMEOUT_SECONDS

    @classmethod
    def for_connection(cls, connection) -> SlurmClient:
        """The client of a ``scheduler.models.SlurmConnection``."""
        return cls(
            cluster=connection.slurm_cluster,
            bin_dir=connection.bin_dir,
            slurm_conf=connection.slurm_conf,
        )

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "TZ": "UTC", "SLURM_TIME_FORMAT": "%Y-%m-%dT%H:%M:%S"}
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    def run(self, program: str, *args: str) -> str:
        """Run ``program args`` and return its stdout; ``SlurmError`` when it fails."""
        executable = str(Path(self.bin_dir) / program) if self.bin_dir else program
        command = [executable, *args]
        shown = " ".join([program, *args])
        try:
            done = subprocess.run(
                command, env=self._env(), capture_output=True, text=True, timeout=self.timeout
            )
        except FileNotFoundError as exc:
            where = self.bin_dir or "PATH"
            raise SlurmError(
                f"{program} not found in {where}: install Slurm's client commands "
                "(Debian: apt-get install -y slurm-client) or set the connection's bin_dir."
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(
                f"`{shown}` did not answer within {self.timeout:.0f} s: is slurmdbd reachable?"
            ) from exc
        if done.returncode != 0:
            message = " ".join((done.stderr or done.stdout).split()) or "no message"
            raise SlurmError(f"`{shown}` failed (exit {done.returncode}): {message}")
        return done.stdout

    def sacctmgr(self, *args: str) -> str:
        """``sacctmgr -i`` (commit immediately, never prompt) with ``args``."""
        return self.run("sacctmgr", "-i", *args)

    def show(self, *args: str) -> list[list[str]]:
        """``sacctmgr -P -n show …`` as rows of fields."""
        out = self.run("sacctmgr", "-P", "-n", "show", *args)
        return [line.split("|") for line in out.splitlines() if line.strip()]

    def read_current(self) -> Current:
        """The associations, users and QOS Slurm holds now for this cluster."""
        # Three independent reads of slurmdbd: run them side by side (each takes a while).
        with ThreadPoolExecutor(max_workers=3) as pool:
            assoc_rows = pool.submit(
                self.show,
                "assoc",
                f"cluster={self.cluster}",
                "format=Account,User,ParentName,Fairshare,QOS,DefaultQOS",
            )
            user_rows = pool.submit(
                self.show, "user", "withassoc", f"cluster={self.cluster}",
                "format=User,DefaultAccount,Account,Cluster",
            )  # fmt: skip
            qos_rows_future = pool.submit(
                self.show, "qos", "format=Name,UsageFactor,PreemptExemptTime,Preempt"
            )
        accounts: dict[str, Account] = {}
        users: set[tuple[str, str]] = set()
        for account, user, parent, fairshare, qos, default_qos in assoc_rows.result():
            if user:
                users.add((user, account))
                continue
            try:
                shares = int(fairshare)
            except ValueError:
                shares = None  # "parent" or empty
            accounts[account] = Account(
                name=account,
                parent=parent,
                fairshare=shares,
                qos=frozenset(q for q in qos.split(",") if q),
                default_qos=default_qos or None,
            )
        defaults = {}
        for user, default, _account, cluster in user_rows.result():
            if cluster == self.cluster and default:
                defaults[user] = default
        qos_rows = {}
        for name, usage_factor, exempt, preempt in qos_rows_future.result():
            try:
                factor = Decimal(usage_factor or "1")
            except InvalidOperation:
                factor = Decimal(1)
            qos_rows[name] = Qos(
                name=name,
                usage_factor=factor,
                preempt_exempt_seconds=parse_duration(exempt),
                preempt=tuple(sorted(p for p in preempt.split(",") if p)),
            )
        return Current(accounts=accounts, users=users, default_accounts=defaults, qos=qos_rows)

    def sacct(self, *, start: str, end: str) -> list[dict[str, str]]:
        """Job allocations (every run of a requeued job) that overlap ``[start, end]``.

        ``-X``: one row per allocation, whose ``AllocTRES`` holds the GPUs the job held;
        steps run inside it and hold no GPUs of their own. ``--duplicates``: a job requeued
        after preemption shows each of its runs.
        """
        fields = [
            "JobIDRaw", "JobID", "Cluster", "Account", "User", "QOS", "State",
            "Submit", "Start", "End", "ElapsedRaw", "AllocTRES", "ReqTRES",
        ]  # fmt: skip
        out = self.run(
            "sacct", "-P", "-n", "-X", "--duplicates", "--allusers",
            f"--clusters={self.cluster}", f"--starttime={start}", f"--endtime={end}",
            f"--format={','.join(fields)}",
        )  # fmt: skip
        rows = []
        for line in out.splitlines():
            if not line.strip():
                continue
            values = line.split("|")
            if len(values) != len(fields):
                raise SlurmError(f"sacct: unexpected line (expected {len(fields)} fields): {line}")
            rows.append(dict(zip(fields, values, strict=True)))
        return rows
