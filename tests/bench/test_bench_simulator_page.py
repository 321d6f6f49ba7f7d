"""Benchmark: a finished simulation's result page (``/simulator/<id>/``).

Made once per session: an organization of its own with one program manager (its rows stay
committed for the session, so it must not take the personas' names: the benchmarks after it
build the personas) and a simulation of the whole bundled Philly trace (82,247 jobs, more than the form's default of 14 days) on 256 GPUs under
fairshare and quota, run to ``done`` in-process (about 100 s). Each round is one render of its page as the program
manager who asked for it: the stored figures and tables, the template. Target: median
<= 500 ms. Nothing here asserts on time.

Run: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/gov_simbench
make bench BENCH=tests/bench/test_bench_simulator_page.py``.
"""

from __future__ import annotations

import pytest
from django.test import Client

from scheduler.models import SimulationJobState
from scheduler.services.simulations import simulation_job_create, simulation_job_run
from tests.factories import OrganizationFactory, ProgramFactory, program_manager_of

TARGET_SECONDS = 0.5


@pytest.fixture(scope="session")
def finished_job(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        organization = OrganizationFactory(name="Simulator benchmark", slug="simulator-bench")
        manager = program_manager_of(ProgramFactory(organization=organization)).user
        job = simulation_job_create(
            user=manager, organization=organization, trace_source="philly",
            gpus=256, gpus_per_node=8, policies=["fairshare", "quota"],
        )  # fmt: skip
        job = simulation_job_run(job_id=job.pk)
    assert job.state == SimulationJobState.DONE, job.error
    return manager, job


@pytest.mark.django_db
def test_bench_simulation_result_page(benchmark, finished_job):
    user, job = finished_job
    client = Client()
    client.force_login(user)
    benchmark.extra_info["target_seconds"] = TARGET_SECONDS
    response = benchmark.pedantic(
        client.get, args=(f"/simulator/{job.pk}/",), rounds=10, iterations=1, warmup_rounds=1
    )
    assert response.status_code == 200
    assert 'data-figure="timeline-1"' in response.content.decode()
    benchmark.extra_info["page_kb"] = round(len(response.content) / 1024, 1)
