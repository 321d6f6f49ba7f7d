"""A real, throw-away Slurm for the adapter's tests: munged, slurmdbd, slurmctld, slurmd.

Everything lives in one temporary directory (configs, munge key and socket, state, logs);
the accounting database is a fresh MariaDB database of its own; ports are picked free. One
node (this host) with 16 CPUs and 8 GPUs declared as a generic resource without devices.
``SlurmTestCluster.start()`` returns when ``sinfo`` shows the node idle; ``stop()`` ends the
daemons it started (by their pids) and drops the database.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.waiting import wait_until

SBIN = Path("/usr/sbin")
DAEMONS = ("munged", "slurmdbd", "slurmctld", "slurmd")
CLIENTS = ("sacctmgr", "sacct", "sbatch", "sinfo", "sshare", "squeue", "scontrol")
INSTALL_HINT = "apt-get install -y slurm-wlm slurmdbd munge"
MARIADB_START = "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd"
NODE_GPUS = 8
# Slurm holds a requeued job back for the credential lifetime + 1 s, so that the node has
# forgotten the credential it revoked when it killed the previous run: a run started sooner is
# refused by slurmd ("already killed") and Slurm records it as FAILED. The default lifetime
# (120 s) would make a requeue test wait two minutes; 10 s keeps Slurm's own safeguard and
# still leaves a launch on a loaded machine ample time to present its credential.
CRED_EXPIRE_SECONDS = 10


def missing_binaries() -> list[str]:
    """Names of the Slurm/munge programs this host lacks (empty when all are there)."""
    missing = [name for name in DAEMONS if not (SBIN / name).exists()]
    missing += [name for name in CLIENTS if shutil.which(name) is None]
    if shutil.which("mariadb") is None and shutil.which("mysql") is None:
        missing.append("mariadb (client)")
    return missing


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mysql(sql: str) -> subprocess.CompletedProcess:
    client = shutil.which("mariadb") or shutil.which("mysql")
    return subprocess.run(
        [client, "-h127.0.0.1", "-P3306", "-uroot", "-e", sql],
        capture_output=True,
        text=True,
        timeout=20,
    )


def _reaped(pid: int) -> bool:
    """Has our child ``pid`` ended (and been reaped)? Also True when it is no child of ours."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return bool(done)


@dataclass
class SlurmTestCluster:
    """One temporary Slurm cluster (see the module docstring)."""

    root: Path
    name: str = field(default_factory=lambda: f"gt{uuid.uuid4().hex[:6]}")
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def database(self) -> str:
        return f"slurm_acct_{self.name}"

    @property
    def env(self) -> dict[str, str]:
        """The environment Slurm's client commands need to reach this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf), "TZ": "UTC"}

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> str:
        """Run a Slurm client command against this cluster; its stdout."""
        done = subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def _write_configs(self) -> None:
        r = self.root
        r.chmod(0o755)  # munged wants its socket's directories searchable by all
        for sub in ("state", "spool", "munge", "log"):
            (r / sub).mkdir(mode=0o755)
        host = socket.gethostname()
        self.ctld_port, self.slurmd_port, self.dbd_port = (_free_port() for _ in range(3))
        self.munge_socket = r / "munge" / "munge.socket"
        self._write_slurm_conf(host)
        self._write_gpu_devices(host)
        self._write_slurmdbd_conf()
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)

    def _write_slurm_conf(self, host: str) -> None:
        """slurm.conf: one node of ``NODE_GPUS`` GPUs, QOS preemption by requeue, slurmdbd."""
        r = self.root
        self.conf.write_text(
            f"""ClusterName={self.name}
SlurmctldHost={host}
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire={CRED_EXPIRE_SECONDS},socket={self.munge_socket}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
PriorityType=priority/multifactor
PriorityCalcPeriod=1
PreemptType=preempt/qos
PreemptMode=REQUEUE
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={self.dbd_port}
AccountingStoragePass={self.munge_socket}
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
MinJobAge=2
InactiveLimit=0
KillWait=2
Waittime=0
NodeName={host} NodeAddr=127.0.0.1 CPUs=16 RealMemory=4000 Gres=gpu:{NODE_GPUS} State=UNKNOWN
PartitionName=gpu Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
        )

    def _write_gpu_devices(self, host: str) -> None:
        """gres.conf and the GPU "devices" it names, and a cgroup.conf that uses no cgroups."""
        r = self.root
        # Slurm 22.05 drops file-less GPUs from a node, so each GPU gets a "device": a link
        # to /dev/null (a character device; nothing opens it without cgroup confinement).
        (r / "dev").mkdir()
        for index in range(NODE_GPUS):
            (r / "dev" / f"gpu{index}").symlink_to("/dev/null")
        (r / "gres.conf").write_text(
            f"NodeName={host} Name=gpu File={r}/dev/gpu[0-{NODE_GPUS - 1}]\n"
        )
        (r / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n")

    def _write_slurmdbd_conf(self) -> None:
        """slurmdbd.conf: accounting in this cluster's own MariaDB database."""
        r = self.root
        auth = f"AuthType=auth/munge\nAuthInfo=socket={self.munge_socket}\n"
        dbd = r / "slurmdbd.conf"
        dbd.write_text(
            f"""{auth}DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={self.dbd_port}
SlurmUser=root
PidFile={r}/slurmdbd.pid
LogFile={r}/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3306
StorageUser=root
StorageLoc={self.database}
"""
        )
        dbd.chmod(0o600)

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.root / "log" / f"{name}.out", "ab")  # noqa: SIM115 - kept by the child
        proc = subprocess.Popen(
            args, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.pids[name] = proc.pid

    def _wait(self, what: str, predicate, timeout: float) -> None:
        if wait_until(predicate, timeout, 0.25):
            return
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
            for p in sorted((self.root / "log").glob("*"))
        )
        raise RuntimeError(f"Slurm test cluster: {what} not ready after {timeout}s\n{logs}")

    def _ok(self, *args: str) -> bool:
        try:
            done = subprocess.run(list(args), env=self.env, capture_output=True, timeout=5)
        except subprocess.TimeoutExpired:
            return False
        return done.returncode == 0

    def start(self) -> SlurmTestCluster:
        """Write the configs, start the four daemons, wait for an idle node."""
        if _mysql("SELECT 1").returncode != 0:
            subprocess.run(MARIADB_START.split(), capture_output=True, timeout=20)
            self._wait("MariaDB at 127.0.0.1:3306", lambda: _mysql("SELECT 1").returncode == 0, 30)
        self._write_configs()
        r = self.root
        self._spawn(
            "munged",
            [
                str(SBIN / "munged"),
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={r}/munge/munge.key",
                f"--pid-file={r}/munge/munged.pid",
                f"--log-file={r}/log/munged.log",
                f"--seed-file={r}/munge/munge.seed",
            ],
        )
        self._wait("munged", self.munge_socket.exists, 10)
        # slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
        self._spawn("slurmdbd", [str(SBIN / "slurmdbd"), "-D"])
        self._wait("slurmdbd", lambda: self._port_open(self.dbd_port), 30)
        # The cluster must exist in the accounting database before slurmctld registers.
        self.run("sacctmgr", "-i", "add", "cluster", self.name)
        self._spawn("slurmctld", [str(SBIN / "slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait("slurmctld", lambda: self._ok("scontrol", "ping"), 30)
        self._spawn("slurmd", [str(SBIN / "slurmd"), "-D", "-f", str(self.conf)])
        self._wait("the node (sinfo idle)", self._node_idle, 40)
        return self

    @staticmethod
    def _port_open(port: int) -> bool:
        with socket.socket() as s:
            s.settimeout(0.5)
            return s.connect_ex(("127.0.0.1", port)) == 0

    def _node_idle(self) -> bool:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], env=self.env, capture_output=True, text=True, timeout=5
        ).stdout.split()
        return out == ["idle"]

    def stop(self) -> None:
        """Stop the daemons this object started (by pid) and drop its accounting database."""
        for name in reversed(DAEMONS):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            if not wait_until(lambda pid=pid: _reaped(pid), 10, 0.1):
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
        # Job processes slurmd started (sleep …) end with their session.
        _mysql(f"DROP DATABASE IF EXISTS `{self.database}`")


def submit(
    cluster: SlurmTestCluster,
    *,
    account: str,
    gpus: int,
    seconds: int,
    qos: str = "",
    script: str = "",
) -> str:
    """``sbatch --gres=gpu:N --account=… --wrap 'sleep S'`` (or ``script``); the job id."""
    args = [
        "sbatch", "--parsable", f"--gres=gpu:{gpus}", f"--account={account}",
        f"--output={cluster.root}/job-%j.out", "--wrap", script or f"sleep {seconds}",
    ]  # fmt: skip
    if qos:
        args.insert(1, f"--qos={qos}")
    return cluster.run(*args).strip().split(";")[0]


def job_state(cluster: SlurmTestCluster, job: str) -> str:
    """The job's state once the accounting database can find it by time window, else "".

    slurmdbd records a job's eligible time a few seconds after the job; until then a
    ``sacct --starttime/--endtime`` query (what the importer runs) does not return it.
    """
    out = cluster.run(
        "sacct", "-X", "-n", "-P", "-j", job, "--format=State,Eligible", check=False
    ).strip()
    if not out or "|" not in out:
        return ""
    state, eligible = out.splitlines()[0].split("|")[:2]
    return "" if eligible in ("Unknown", "None", "") else state.split(" ")[0]


def queue_state(cluster: SlurmTestCluster, job: str) -> tuple[str, int]:
    """What ``squeue`` says of a job now: (state, seconds it has run), ("", 0) once gone."""
    out = cluster.run("squeue", "-h", "-j", job, "-o", "%T|%M", check=False).strip()
    if "|" not in out:
        return "", 0
    state, used = out.split("|")
    seconds = 0
    days, _, clock = used.rpartition("-")
    for part in clock.split(":"):
        seconds = seconds * 60 + int(part)
    return state, seconds + int(days or 0) * 86400


def wait_running(cluster: SlurmTestCluster, job: str, *, ran: int = 0, timeout: float = 40) -> None:
    """Wait until ``squeue`` shows the job RUNNING for at least ``ran`` seconds."""
    seen = ("", 0)

    def running() -> bool:
        nonlocal seen
        seen = queue_state(cluster, job)
        return seen[0] == "RUNNING" and seen[1] >= ran

    if wait_until(running, timeout, 0.2):
        return
    raise AssertionError(f"job {job} not running for {ran}s after {timeout}s (last: {seen})")


def wait_state(cluster: SlurmTestCluster, job: str, states: set[str], timeout: float = 40) -> str:
    """Wait until ``sacct`` shows ``job`` in one of ``states``; the state."""
    state = ""

    def reached() -> bool:
        nonlocal state
        state = job_state(cluster, job)
        return state in states

    if wait_until(reached, timeout, 0.3):
        return state
    raise AssertionError(f"job {job} not in {states} after {timeout}s (last: {state!r})")


def import_window_start(cluster: SlurmTestCluster, timeout: float = 10) -> str:
    """A ``--since`` for ``slurm_import_usage`` that no earlier test's job falls in.

    The test cluster lives for the whole session; an import window from this very second
    also took a job of the test before that ended in the same second (sacct keeps whole
    seconds), and a count such as "2 charged" found one more. So the window starts the
    second after the latest end sacct recorded, waited for when it is still to come (at
    most a second); the test's own jobs are submitted after it and fall wholly inside.
    """
    out = cluster.run("sacct", "-a", "-X", "-n", "-P", "--duplicates", "-S", "2000-01-01",
                      "--format=End")  # fmt: skip
    ends = [
        datetime.fromisoformat(value).replace(tzinfo=UTC)
        for value in out.split()
        if value[:1].isdigit()
    ]
    start = max(ends, default=datetime.min.replace(tzinfo=UTC)) + timedelta(seconds=1)
    wait_until(lambda: datetime.now(UTC) >= start, timeout, 0.05)
    now = datetime.now(UTC).replace(microsecond=0)
    return max(now, start).isoformat()
