"""The replay loop: lost work, requeues, conservation, skipped and stuck jobs, gangs."""

import itertools
import random

import pytest

from scheduler.engine import POLICIES
from scheduler.simulator import ReplayConfig, replay
from scheduler.simulator.metrics import compute_metrics
from scheduler.simulator.replay import ConfigError
from tests.simulator.fakes import scripted
from tests.simulator.scenarios import T0, trace, two_teams


def test_a_preempted_resumable_job_loses_work_since_its_checkpoint_plus_overhead():
    t = trace("long,0,10800,4,A,,", "poke,3000,60,1,B,,")
    result = replay(
        t, two_teams(), ReplayConfig(gpus=8), scheduler_factory=scripted({T0 + 3000: ["long"]})
    )
    job = result.jobs[0]
    # Ran 3000 s, last checkpoint at 1800 s: 1200 s lost, plus the 300 s restart overhead.
    assert job.lost_gpu_seconds == 4 * 1500
    assert job.preemptions == 1
    assert job.end == T0 + 3000 + (10800 - 1800 + 300)
    assert job.first_start == T0
    [event] = result.preemptions
    assert (event.time, event.lost_gpu_seconds) == (T0 + 3000, 6000)
    assert compute_metrics(result)["lost_gpu_hours"] == pytest.approx(6000 / 3600, abs=0.01)


def test_a_preempted_non_resumable_job_starts_over():
    t = trace("long,0,10800,4,A,,false", "poke,3000,60,1,B,,")
    result = replay(
        t, two_teams(), ReplayConfig(gpus=8), scheduler_factory=scripted({T0 + 3000: ["long"]})
    )
    job = result.jobs[0]
    assert job.lost_gpu_seconds == 4 * 3000
    assert job.end == T0 + 3000 + 10800


def test_checkpoint_and_overhead_are_configurable():
    t = trace("long,0,10800,1,A,,", "poke,3000,60,1,B,,")
    config = ReplayConfig(gpus=8, checkpoint_interval=600, restart_overhead=0)
    result = replay(t, two_teams(), config, scheduler_factory=scripted({T0 + 3000: ["long"]}))
    assert result.jobs[0].lost_gpu_seconds == 0  # 3000 s is a checkpoint boundary


def test_jobs_larger_than_the_cluster_are_skipped_and_counted():
    t = trace("huge,0,60,16,A,,", "fits,0,60,8,B,,")
    result = replay(t, two_teams(), ReplayConfig(gpus=8), scheduler_factory=scripted())
    assert [j.id for j in result.skipped] == ["huge"]
    metrics = compute_metrics(result)
    assert metrics["skipped_jobs"] == 1 and metrics["jobs"] == 1


def test_a_gang_asks_for_whole_nodes():
    seen = []

    def factory(nodes, root, policy, params):
        sched = scripted()(nodes, root, policy, params)
        original = sched.submit
        sched.submit = lambda w: (seen.append((w.id, w.gpus, w.nodes)), original(w))[1]
        return sched

    t = trace("g12,0,60,12,A,,", "g16,0,60,16,A,,", "one,0,60,8,A,,")
    replay(t, two_teams(), ReplayConfig(gpus=32), scheduler_factory=factory)
    assert seen == [("g12", 12, 2), ("g16", 16, 2), ("one", 8, 1)]


def test_the_free_lane_is_not_charged():
    t = trace("free,0,3600,2,A,0,", "paid,0,3600,2,A,600,")
    result = replay(t, two_teams(), ReplayConfig(gpus=8, policy="fifo"))
    [team_a] = [x for x in compute_metrics(result)["teams"] if x["project"] == "A"]
    assert team_a["charged_gpu_hours"] == 2.0
    assert team_a["free_gpu_hours"] == 2.0


def test_free_lane_work_asks_for_nothing_owed():
    # A asks only for free-lane GPUs: it can never be charged, so nothing is owed to it (it
    # used to be owed its entitlement and read 0 % delivered).
    t = trace("free,0,3600,2,A,0,", "paid,0,3600,2,B,600,")
    result = replay(t, two_teams(), ReplayConfig(gpus=8, policy="fifo"))
    teams = {x["project"]: x for x in compute_metrics(result)["teams"]}
    assert teams["A"]["owed_gpu_hours"] == 0
    assert teams["B"]["owed_gpu_hours"] == 2.0


def test_jobs_that_can_never_start_end_the_replay_and_are_counted():
    # Partition holds each team to its share: A's 8-GPU job can never fit in 4 GPUs.
    t = trace("big,0,3600,8,A,,", "small,0,3600,2,B,,")
    result = replay(t, two_teams(), ReplayConfig(gpus=8, policy="partition"))
    metrics = compute_metrics(result)
    assert metrics["never_started"] == 1
    assert result.end_time == T0 + 3600


def test_config_is_validated():
    with pytest.raises(ConfigError, match="not a whole number of 8-GPU nodes"):
        ReplayConfig(gpus=12).validate()
    with pytest.raises(ConfigError, match="window_seconds must be positive"):
        ReplayConfig(gpus=8, window_seconds=0).validate()


def random_trace(seed: int, jobs: int = 60):
    rng = random.Random(seed)
    rows = []
    for i in range(jobs):
        gpus = rng.choice([1, 1, 1, 2, 4, 8, 16])
        rows.append(
            f"j{i},{rng.uniform(0, 6 * 3600):.0f},{rng.choice([60, 900, 3600, 4 * 3600, 10 * 3600])},"
            f"{gpus},{rng.choice('ABC')},{rng.choice(['', '', '0', '600'])},"
            f"{rng.choice(['', 'false'])}"
        )
    return trace(*rows)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_usage_is_conserved_and_the_cluster_never_overflows(policy, seed):
    t = random_trace(seed)
    result = replay(t, two_teams(40, 40), ReplayConfig(gpus=16, policy=policy))
    ledger = result.ledger
    booked = sum(sum(ledger.charged[i]) + sum(ledger.free[i]) for i in range(len(ledger.projects)))
    ran = sum(r.gpus * (r.end - r.start) for r in result.runs)
    assert booked == pytest.approx(ran)  # ledger = sum of GPUs x time
    for rec in result.jobs:
        if rec.end is not None:  # every finished job ran its duration plus what it lost
            job_runs = [r for r in result.runs if result.jobs[r.job] is rec]
            assert sum(r.gpus * (r.end - r.start) for r in job_runs) == pytest.approx(
                rec.duration * job_runs[-1].gpus + rec.lost_gpu_seconds
            )
    edges = sorted(
        [(r.start, r.gpus) for r in result.runs] + [(r.end, -r.gpus) for r in result.runs]
    )
    in_use = 0
    for _, delta in sorted(edges, key=lambda e: (e[0], e[1])):
        in_use += delta
        assert in_use <= 16
    rows_busy = [(row, r.start, r.end) for r in result.runs for row in r.rows]
    by_row: dict[int, list] = {}
    for row, s, e in rows_busy:
        by_row.setdefault(row, []).append((s, e))
    for spans in by_row.values():  # one GPU holds one run at a time
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_the_same_input_gives_the_same_replay():
    t = random_trace(1)
    first = compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=16)))
    second = compute_metrics(replay(t, two_teams(), ReplayConfig(gpus=16)))
    for m in (first, second):
        m.pop("wall_seconds")
        m.pop("jobs_per_second")
    assert first == second


def test_periodic_cycles_back_off_while_they_change_nothing():
    sched = {}

    def factory(nodes, root, policy, params):
        sched["s"] = scripted()(nodes, root, policy, params)
        return sched["s"]

    # "wait" cannot start until "hog" ends 3 h later; nothing else happens meanwhile.
    t = trace("hog,0,10800,8,A,,", "wait,0,60,8,B,,")
    replay(t, two_teams(), ReplayConfig(gpus=8), scheduler_factory=factory)
    times = [c - T0 for c in sched["s"].cycles]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[:6] == [60, 120, 240, 480, 960, 960]
    assert times[-1] == 10800  # the hog's end is an event: "wait" starts at once


def _running_at(result, project, t):
    """How many GPUs ``project`` runs at ``t`` in a replay's recorded runs."""
    return sum(
        run.gpus
        for run in result.runs
        if result.jobs[run.job].project == project and run.start <= t < run.end
    )


def test_a_share_change_during_the_trace_reaches_the_engine_at_its_moment():
    # One 8-GPU node. A is owed 6 GPUs and B 2 until 3 h, when A's 75 % becomes 25 %. A fills
    # the node at 0 (2-hour minimum runtime); B asks for six GPUs at 30 min. At 2 h B reclaims
    # the 2 it is owed; from 3 h it is owed 6 and reclaims 4 more.
    rows = [f"a{i},0,36000,1,A,7200," for i in range(8)]
    rows += [f"b{i},1800,36000,1,B,7200," for i in range(6)]
    t = trace(*rows)
    same = replay(t, two_teams(75, 25), ReplayConfig(gpus=8))
    changed = replay(
        t,
        two_teams(75, 25),
        ReplayConfig(gpus=8),
        budget_changes=[(T0 + 3 * 3600, two_teams(25, 75))],
    )
    assert (
        _running_at(same, "B", T0 + 2.5 * 3600) == _running_at(changed, "B", T0 + 2.5 * 3600) == 2
    )
    assert _running_at(same, "B", T0 + 4 * 3600) == 2
    assert _running_at(changed, "B", T0 + 4 * 3600) == 6


@pytest.mark.parametrize("heavy", ["A", "B"])
def test_a_prior_usage_window_orders_the_first_cycle(heavy):
    # Equal shares, one 8-GPU cluster, and both teams ask for all of it at once. With no
    # history the tie breaks by name (A first); a team that used 8 GPU-hours in the hour
    # before the trace goes second.
    t = trace("a,0,3600,8,A,3600,", "b,0,3600,8,B,3600,")
    result = replay(t, two_teams(), ReplayConfig(gpus=8), prior_usage={heavy: [8 * 3600.0]})
    first = min(result.jobs, key=lambda job: job.first_start)
    assert first.project == ("B" if heavy == "A" else "A")
    assert sorted(job.first_start for job in result.jobs) == [T0, T0 + 3600]
