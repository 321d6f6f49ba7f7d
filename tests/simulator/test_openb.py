"""Alibaba's openb pod list as a trace: the conversion rules ``docs/simulation.md`` states."""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from scheduler.simulator.openb import openb_trace, team_of
from scheduler.simulator.traces import TraceError, load_trace

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
PODS = [
    HEADER,
    "pod-a,8000,1024,8,1000,,Burstable,Succeeded,100,4000,160",  # a whole node, 3,840 s
    "pod-b,4000,1024,1,220,,BE,Running,50,950,50",  # a fifth of a GPU: one GPU
    "pod-c,4000,1024,0,0,,BE,Running,10,900,10",  # CPU-only: dropped
    "pod-d,4000,1024,2,1000,,LS,Pending,70,900,",  # never scheduled: dropped
]


def test_pods_become_jobs_by_the_stated_rules():
    made = openb_trace(PODS)
    jobs = {j.id: j for j in made.trace.jobs}
    assert list(jobs) == ["pod-b", "pod-a"]  # by submit time (creation), not file order
    assert (jobs["pod-a"].submit_time, jobs["pod-a"].duration, jobs["pod-a"].gpus) == (
        100.0,
        3840.0,
        8,
    )
    assert (jobs["pod-b"].duration, jobs["pod-b"].gpus) == (900.0, 1)
    # The contract is left to the replay's default rule: the trace says nothing of it.
    assert jobs["pod-a"].min_runtime is None and jobs["pod-a"].resumable is None
    assert (made.cpu_only, made.never_scheduled, made.shared_gpu) == (1, 1, 1)


def test_teams_are_dealt_by_name_with_zipf_parts():
    names = [f"openb-pod-{i:05d}" for i in range(40_000)]
    counts = Counter(team_of(name, 4) for name in names)
    # 1, 1/2, 1/3, 1/4 of 25/12: 48 %, 24 %, 16 %, 12 %, within a point each.
    for team, part in {"team1": 0.48, "team2": 0.24, "team3": 0.16, "team4": 0.12}.items():
        assert abs(counts[team] / len(names) - part) < 0.01, (team, counts)
    assert [team_of(name, 4) for name in names[:50]] == [team_of(n, 4) for n in names[:50]]


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("pod-x,1,1,-1,0,,BE,Running,1,2,1", "num_gpu must be a whole number"),
        ("pod-x,1,1,two,0,,BE,Running,1,2,1", "num_gpu is not a number"),
        ("pod-x,1,1,1,half,,BE,Running,1,2,1", "gpu_milli is not a number"),
        ("pod-x,1,1,1,1000,,BE,Running,,2,1", "creation_time is empty"),
        (",1,1,1,1000,,BE,Running,1,2,1", "name is empty"),
        ("pod-x,1,1,1,1000,,BE,Running,1,2,five", "scheduled_time"),
        ("pod-x,1,1,1,1000,,BE,Running,1,2,5", "deletion_time is before scheduled_time"),
    ],
)
def test_a_bad_pod_names_its_line_and_field(row, words):
    with pytest.raises(TraceError) as caught:
        openb_trace([HEADER, row])
    assert "line 2" in str(caught.value) and words in str(caught.value)


def test_the_command_writes_a_trace_the_replay_reads_back(tmp_path):
    pods, out = tmp_path / "pods.csv", tmp_path / "openb.csv"
    pods.write_text("\n".join(PODS) + "\n", encoding="utf-8")
    call_command("trace_openb", "--pods", str(pods), "--out", str(out))
    again = load_trace(out, "canonical")
    assert [(j.id, j.submit_time, j.duration, j.gpus) for j in again.jobs] == [
        ("pod-b", 50.0, 900.0, 1),
        ("pod-a", 100.0, 3840.0, 8),
    ]
    with pytest.raises(CommandError, match="--teams"):
        call_command("trace_openb", "--pods", str(pods), "--out", str(out), "--teams", "0")
    pods.write_text("name,num_gpu\npod-a,1\n", encoding="utf-8")
    with pytest.raises(CommandError, match="header lacks column"):
        call_command("trace_openb", "--pods", str(pods), "--out", str(out))
