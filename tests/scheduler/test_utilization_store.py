"""Storing GPU utilization: exact splitting across UTC hours, all-or-nothing validation,
repeats, periods without telemetry, and runs of other nodes or clusters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db.models import Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.models import Cluster
from scheduler.models import Run, UtilizationHour
from scheduler.selectors.utilization import (
    allocated_idle_gpu_seconds_by_project,
    run_utilization_trace,
    utilization_by_project_day,
)
from scheduler.services.executor_reports import node_agent_create, node_register
from scheduler.services.utilization import hour_pieces, utilization_report
from scheduler.services.workloads import workload_submit
from tests.factories import ClusterFactory
from tests.personas import build_personas
from tests.scheduler.agent_api import started_run

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def at(hours: float = 0, minutes: float = 0) -> datetime:
    return T0 + timedelta(hours=hours, minutes=minutes)


def node_of(cluster: Cluster, name: str):
    agent, _ = node_agent_create(cluster=cluster, name=name)
    return node_register(agent=agent, gpus=8)


def run_on(personas, node, *, gpus: int = 4, started: datetime = T0, name: str = "train") -> Run:
    workload = workload_submit(
        project=personas.project_a1,
        cluster=node.cluster,
        name=name,
        gpus=gpus,
        min_runtime_seconds=600,
        launch_spec={"command": ["python", "train.py"]},
        submitted_by=personas.researcher,
    )
    run = started_run(workload, node)
    Run.objects.filter(pk=run.pk).update(started_at=started, accounted_until=started)
    run.refresh_from_db()
    return run


def item(run, start, end, allocated, busy, **extra) -> dict:
    return {
        "run": run.pk,
        "start": start,
        "end": end,
        "allocated_gpu_seconds": Decimal(allocated),
        "busy_gpu_seconds": None if busy is None else Decimal(busy),
        "samples": extra.pop("samples", 0),
        **extra,
    }


@pytest.fixture
def world(db):
    personas = build_personas()
    node = node_of(personas.cluster, "node-1")
    return personas, node


def test_hand_worked_period_across_two_hour_boundaries(world):
    personas, node = world
    run = run_on(personas, node)
    # 09:40 to 11:10 is 5,400 s: 1,200 s in the 09 hour, 3,600 s in the 10 hour, 600 s in
    # the 11 hour. 4 GPUs: allocated 21,600 GPU-s, busy 10,000.
    # busy, cumulative floors to 6 places: 10000 x 1200/5400 = 2222.222222|2…,
    #   10000 x 4800/5400 = 8888.888888|8…, then 10000: parts 2222.222222, 6666.666666,
    #   1111.111112.
    # idle (11,600), likewise: 2577.777777, 10311.111111, 11600: parts 2577.777777,
    #   7733.333334, 1288.888889.
    # allocated = busy + idle: 4799.999999, 14400.000000, 2400.000001 (sum 21,600).
    # samples 90 split the same way: 20, 80 - 20 = 60, 10.
    answer = utilization_report(
        node=node,
        reports=[
            item(
                run,
                at(minutes=40),
                at(hours=2, minutes=10),
                "21600",
                "10000",
                samples=90,
                memory_max_mib=40000,
                power_mean_watts=Decimal("350.5"),
            )
        ],
        now=NOW,
    )
    assert answer == {"stored": 3, "repeated": 0, "no_telemetry": 0}
    rows = list(UtilizationHour.objects.filter(run=run).order_by("hour"))
    assert [r.hour for r in rows] == [at(0), at(1), at(2)]
    assert [r.busy_gpu_seconds for r in rows] == [
        Decimal("2222.222222"),
        Decimal("6666.666666"),
        Decimal("1111.111112"),
    ]
    assert [r.allocated_gpu_seconds for r in rows] == [
        Decimal("4799.999999"),
        Decimal("14400.000000"),
        Decimal("2400.000001"),
    ]
    assert [r.samples for r in rows] == [20, 60, 10]
    assert [r.covered_seconds for r in rows] == [Decimal(1200), Decimal(3600), Decimal(600)]
    assert all(r.memory_max_mib == 40000 for r in rows)
    assert all(r.power_mean_watts == Decimal("350.500") for r in rows)
    assert all(r.project_id == personas.project_a1.pk for r in rows)
    assert all(r.cluster_id == personas.cluster.pk for r in rows)
    totals = UtilizationHour.objects.filter(run=run).aggregate(
        a=Sum("allocated_gpu_seconds"), b=Sum("busy_gpu_seconds")
    )
    assert totals == {"a": Decimal("21600"), "b": Decimal("10000")}


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    start_us=st.integers(min_value=0, max_value=10 * 3600 * 10**6),
    length_us=st.integers(min_value=1, max_value=30 * 3600 * 10**6),
    allocated_units=st.integers(min_value=0, max_value=10**14),
    busy_share=st.fractions(min_value=0, max_value=1),
    samples=st.integers(min_value=0, max_value=10**6),
)
def test_split_preserves_sums_exactly(start_us, length_us, allocated_units, busy_share, samples):
    start = T0 + timedelta(microseconds=start_us)
    end = start + timedelta(microseconds=length_us)
    allocated = Decimal(allocated_units) / Decimal(10**6)
    busy = Decimal(int(allocated_units * busy_share)) / Decimal(10**6)
    pieces = hour_pieces(start=start, end=end, allocated=allocated, busy=busy, samples=samples)
    assert sum((p["allocated"] for p in pieces), Decimal(0)) == allocated
    assert sum((p["busy"] for p in pieces), Decimal(0)) == busy
    assert sum(p["samples"] for p in pieces) == samples
    for piece in pieces:
        assert Decimal(0) <= piece["busy"] <= piece["allocated"]
        assert piece["allocated"] == piece["allocated"].quantize(Decimal("0.000001"))
        assert piece["hour"] <= piece["start"] < piece["end"] <= piece["hour"] + timedelta(hours=1)
    assert pieces[0]["start"] == start and pieces[-1]["end"] == end


def test_one_bad_item_stores_nothing_and_names_it(world):
    personas, node = world
    run = run_on(personas, node)
    good = item(run, at(minutes=10), at(minutes=20), "2400", "100")
    bad = item(run, at(minutes=20), at(minutes=30), "2400", "2500")  # busy > allocated
    with pytest.raises(ValidationError) as caught:
        utilization_report(node=node, reports=[good, bad], now=NOW)
    assert set(caught.value.message_dict) == {"reports[1].busy_gpu_seconds"}
    assert not UtilizationHour.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"end": at(minutes=10)}, "end"),  # end == start
        ({"allocated_gpu_seconds": Decimal("2400.000002")}, "allocated_gpu_seconds"),  # > 4x600
        ({"allocated_gpu_seconds": Decimal("NaN")}, "allocated_gpu_seconds"),
        ({"busy_gpu_seconds": Decimal("-1")}, "busy_gpu_seconds"),
        ({"power_mean_watts": Decimal("Infinity")}, "power_mean_watts"),
        ({"end": NOW + timedelta(hours=1)}, "end"),
        ({"start": at(hours=-25)}, "end"),  # longer than 24 hours
        ({"start": at(hours=-1)}, "start"),  # before the run started
    ],
)
def test_each_rule_names_its_field(world, change, field):
    personas, node = world
    run = run_on(personas, node)
    bad = {**item(run, at(minutes=10), at(minutes=20), "2400", "100"), **change}
    with pytest.raises(ValidationError) as caught:
        utilization_report(node=node, reports=[bad], now=NOW)
    assert f"reports[0].{field}" in caught.value.message_dict
    assert not UtilizationHour.objects.exists()


def test_run_of_another_node_or_cluster_is_refused(world):
    personas, node = world
    mine = run_on(personas, node)
    other_node = node_of(personas.cluster, "node-2")
    theirs = run_on(personas, other_node, name="other")
    foreign = ClusterFactory(organization=personas.organization, name="a100", slug="a100")
    foreign_node = node_of(foreign, "node-1")
    far = run_on(personas, foreign_node, name="far")
    for run in (theirs, far):
        with pytest.raises(ValidationError) as caught:
            utilization_report(
                node=node,
                reports=[
                    item(mine, at(minutes=10), at(minutes=20), "2400", "1"),
                    item(run, at(minutes=10), at(minutes=20), "2400", "1"),
                ],
                now=NOW,
            )
        assert set(caught.value.message_dict) == {"reports[1].run"}
    assert not UtilizationHour.objects.exists()


def test_long_ended_run_is_refused_recent_one_accepted(world):
    personas, node = world
    run = run_on(personas, node)
    Run.objects.filter(pk=run.pk).update(ended_at=at(hours=1), end_reason="succeeded")
    report = [item(run, at(minutes=50), at(minutes=60), "2400", "10")]
    with pytest.raises(ValidationError) as caught:
        utilization_report(node=node, reports=report, now=at(hours=2, minutes=1))
    assert "reports[0].run" in caught.value.message_dict
    assert utilization_report(node=node, reports=report, now=at(hours=1, minutes=30))["stored"]


def test_repeat_is_skipped_and_overlap_refused(world):
    personas, node = world
    run = run_on(personas, node)
    first = item(run, at(minutes=10), at(minutes=20), "2400", "600")
    assert utilization_report(node=node, reports=[first], now=NOW)["stored"] == 1
    assert utilization_report(node=node, reports=[first], now=NOW) == {
        "stored": 0,
        "repeated": 1,
        "no_telemetry": 0,
    }
    overlap = item(run, at(minutes=15), at(minutes=25), "2400", "600")
    with pytest.raises(ValidationError) as caught:
        utilization_report(node=node, reports=[overlap], now=NOW)
    assert "reports[0].start" in caught.value.message_dict
    following = item(run, at(minutes=20), at(minutes=30), "2400", "0")
    utilization_report(node=node, reports=[following], now=NOW)
    row = UtilizationHour.objects.get(run=run)
    assert (row.allocated_gpu_seconds, row.busy_gpu_seconds) == (Decimal(4800), Decimal(600))
    assert row.covered_seconds == Decimal(1200)
    assert (row.covered_from, row.reported_until) == (at(minutes=10), at(minutes=30))


def test_no_telemetry_stores_nothing(world):
    personas, node = world
    run = run_on(personas, node)
    answer = utilization_report(
        node=node, reports=[item(run, at(minutes=10), at(minutes=20), "2400", None)], now=NOW
    )
    assert answer == {"stored": 0, "repeated": 0, "no_telemetry": 1}
    assert not UtilizationHour.objects.exists()


def test_selectors(world):
    personas, node = world
    run = run_on(personas, node)
    utilization_report(
        node=node,
        reports=[
            item(run, at(minutes=0), at(minutes=30), "7200", "1800", memory_max_mib=100),
            item(run, at(minutes=30), at(minutes=90), "14400", "14400", memory_max_mib=300),
        ],
        now=NOW,
    )
    days = utilization_by_project_day(cluster=personas.cluster, start=at(0), end=at(24))
    assert days == [
        {
            "project_id": personas.project_a1.pk,
            "day": at(0).date(),
            "allocated_gpu_seconds": Decimal(21600),
            "busy_gpu_seconds": Decimal(16200),
            "utilization": Decimal("0.75"),
        }
    ]
    trace = run_utilization_trace(run=run)
    assert [(t["hour"], t["allocated_gpu_seconds"], t["busy_gpu_seconds"]) for t in trace] == [
        (at(0), Decimal(14400), Decimal(9000)),
        (at(1), Decimal(7200), Decimal(7200)),
    ]
    assert [t["memory_max_mib"] for t in trace] == [300, 300]
    idle = allocated_idle_gpu_seconds_by_project(cluster=personas.cluster, start=at(0), end=at(24))
    assert idle == {personas.project_a1.pk: Decimal(5400)}
