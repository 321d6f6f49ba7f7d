"""A real Slurm for the adapter's tests, started once per session and stopped at its end.

Fails (never skips) when the Slurm or munge programs are missing: the adapter's promise is
tested against the real thing or not at all.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduler.models import SlurmConnection
from tests.adapters.slurm.daemons import INSTALL_HINT, SlurmTestCluster, missing_binaries
from tests.conftest import attach_daemon_log, tail_of
from tests.factories import UserFactory, researcher_of
from tests.personas import personas  # noqa: F401 - the fixture

# Account prefixes of tests that build the tree from nothing, unique in the session (the
# one Slurm outlives each test's database).
_prefixes = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker of tests that build the tree in Slurm from nothing."""
    config.addinivalue_line(
        "markers", "fresh_slurm_tree: the test's accounts get a prefix of their own"
    )


@pytest.fixture(scope="session")
def slurm():
    """A running one-node Slurm (8 GPUs as gres) with slurmdbd accounting; yields its handle."""
    missing = missing_binaries()
    if missing:
        pytest.fail(
            f"Slurm tests need {', '.join(missing)}: install the packages slurm-wlm, slurmdbd "
            f"and munge (`{INSTALL_HINT}`) and a MariaDB at 127.0.0.1:3306.",
            pytrace=False,
        )
    if os.geteuid() != 0:
        pytest.fail(
            "Slurm tests start slurmd, which launches jobs and must run as root: run the "
            "suite as root (CI does) or in a container.",
            pytrace=False,
        )
    root = Path(tempfile.mkdtemp(prefix="gov-slurm-"))
    cluster = SlurmTestCluster(root)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def slurm_logs_on_failure(request):
    """For a test that uses the Slurm: its jobs (sacct), their output and the daemons' logs
    are printed if it fails."""
    if "slurm" not in request.fixturenames:
        yield
        return
    cluster: SlurmTestCluster = request.getfixturevalue("slurm")
    began = time.time()
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")

    def jobs() -> str:
        return cluster.run(
            "sacct", "-n", "-P", "--duplicates", "--allusers", f"--starttime={since}",
            "--format=JobID,Account,QOS,State,ExitCode,Reason,Submit,Start,End,ElapsedRaw",
            check=False,
        )  # fmt: skip

    def outputs() -> str:
        return "".join(
            f"--- {path.name}\n{tail_of(path, 1500)}\n"
            for path in sorted(cluster.root.glob("job-*.out"))
            if path.stat().st_mtime >= began - 1
        )

    node = request.node
    attach_daemon_log(node, "sacct (this test's jobs, every run)", jobs)
    attach_daemon_log(node, "job output", outputs)
    for daemon in ("slurmctld", "slurmd", "slurmdbd"):
        log = cluster.root / "log" / f"{daemon}.log"
        attach_daemon_log(node, f"{daemon}.log", lambda log=log: tail_of(log))
    yield


@pytest.fixture
def site(request, personas, slurm):  # noqa: F811 - the fixture imported above
    """The personas' cluster connected to the test Slurm, with root as a member of A1.

    Account names come from slugs, so tests using the shared prefix ``s`` find the tree
    already in Slurm (a sync then changes nothing: fast). A test marked ``fresh_slurm_tree``
    gets a prefix of its own, so it builds the tree from nothing. Tests that change Slurm by
    hand put it back.
    """
    fresh = request.node.get_closest_marker("fresh_slurm_tree") is not None
    prefix = f"t{next(_prefixes)}" if fresh else "s"
    connection = SlurmConnection.objects.create(
        cluster=personas.cluster,
        slurm_cluster=slurm.name,
        slurm_conf=str(slurm.conf),
        account_prefix=prefix,
    )
    # Jobs are submitted as root (the test process): root is a researcher of Detection.
    researcher_of(personas.project_a1, UserFactory(username="root"))
    names = {
        "org": f"{prefix}acme",
        "vision": f"{prefix}acme_vision",
        "language": f"{prefix}acme_language",
        "detection": f"{prefix}vision_detection",
        "segmentation": f"{prefix}vision_segmentation",
        "translation": f"{prefix}language_translation",
        "summaries": f"{prefix}language_summaries",
        "free": f"{prefix}acme-free",
        "min1h": f"{prefix}acme-min1h",
    }
    return personas, connection, names
