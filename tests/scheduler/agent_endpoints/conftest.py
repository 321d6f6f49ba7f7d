"""Fixtures of the node agent API tests: the personas' cluster (4 x 8 GPUs), two agents and
a submitted workload."""

from __future__ import annotations

import pytest

from scheduler.services.workloads import workload_submit
from tests.scheduler.agent_api import Agent


@pytest.fixture
def agent(personas):
    return Agent(personas.cluster, "node-1")


@pytest.fixture
def other_agent(personas):
    return Agent(personas.cluster, "node-2")


@pytest.fixture
def workload(personas):
    return workload_submit(
        project=personas.project_a1,
        cluster=personas.cluster,
        name="train",
        gpus=4,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "train.py"]},
        submitted_by=personas.researcher,
    )
