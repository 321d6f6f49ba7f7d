"""Preemption (``docs/design.md``, "Preemption").

A pending workload may evict running work past its minimum runtime: the free lane at any
moment; its own project's lower-class work; what other teams run above their entitlement when
its own team stays within its entitlement (the guarantee, whatever the window rank), never
taking the victim's team below its own. Evict only what lets the preemptor start, with the
fewest GPU-hours lost, once the wait has cost what the eviction loses; no oscillation; evicted
work is requeued with its submit time; fifo never preempts; quota reclaims lent quota from
borrowers; partition never lets a team past its share. The guarantee's reclaims are in
``test_spec_reclaim.py``, the absence of oscillation in ``test_spec_no_oscillation.py``.
"""

from __future__ import annotations

from scheduler.engine import Workload
from tests.engine.conftest import (
    HOUR,
    MINUTE,
    budget,
    build_nodes,
    build_scheduler,
    build_workload,
    leaf,
    placement_of,
    preempted_ids,
    started_ids,
)
from tests.engine.preemption_world import LATER, OVER, T0, debug, halves, run

# ---------------------------------------------------------------- the debug job on a full cluster


def test_debug_job_on_full_cluster_evicts_a_past_minimum_run_of_the_team_over_budget():
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "beta-old", "beta", {"n0": 8})  # past its 2 h minimum at LATER
    run(sched, "beta-young", "beta", {"n1": 8}, min_runtime=8 * HOUR)  # still protected
    sched.submit(debug("alpha-debug", "alpha"))
    result = sched.cycle(LATER, OVER)
    assert preempted_ids(result) == ["beta-old"]
    (p,) = result.preemptions
    assert p.by == "alpha-debug" and p.kind == "preempt"
    assert placement_of(result, "alpha-debug") == {"n0": 1}
    assert "beta-young" in sched.running


def test_nothing_inside_its_minimum_runtime_is_preempted():
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "b0", "beta", {"n0": 8}, min_runtime=4 * HOUR)
    run(sched, "b1", "beta", {"n1": 8}, min_runtime=4 * HOUR)
    sched.submit(debug("alpha-debug", "alpha"))
    # 3 h 10 min in: both still inside their 4 h minimum.
    result = sched.cycle(LATER, OVER)
    assert result.preemptions == [] and result.starts == []
    # One second before the minimum ends: still nothing.
    result = sched.cycle(T0 + 4 * HOUR - 1, OVER)
    assert result.preemptions == [] and result.starts == []
    # At the minimum: now it may go.
    result = sched.cycle(T0 + 4 * HOUR, OVER)
    assert len(result.preemptions) == 1
    assert started_ids(result) == ["alpha-debug"]


def test_free_lane_work_is_evicted_at_any_moment_by_charged_work():
    # beta's free-lane job started one minute ago; alpha is even the one over budget here.
    sched = build_scheduler(build_nodes(1), halves())
    run(sched, "beta-free", "beta", {"n0": 8}, start=LATER - MINUTE, min_runtime=0.0)
    sched.submit(build_workload("alpha-train", "alpha", 8, submit=LATER, min_runtime=2 * HOUR))
    result = sched.cycle(LATER, {"alpha": 500_000.0, "beta": 0.0})
    assert preempted_ids(result) == ["beta-free"]
    assert result.preemptions[0].by == "alpha-train"
    assert placement_of(result, "alpha-train") == {"n0": 8}


def test_gang_that_needs_two_victims_evicts_exactly_those_two_whole_nodes():
    # 4 nodes, alpha 60 % (19.2 GPUs deserved), beta 40 %. beta holds every node.
    # n0, n1: cheap victims (resumable, 10 min since checkpoint).
    # n2: past its minimum but not resumable: evicting it loses 3 h 10 min x 8 GPUs.
    # n3: inside its minimum.
    root = budget("root", 100, leaf("alpha", 60), leaf("beta", 40))
    sched = build_scheduler(build_nodes(4), root)
    run(sched, "b0", "beta", {"n0": 8})
    run(sched, "b1", "beta", {"n1": 8})
    run(sched, "b2", "beta", {"n2": 8}, resumable=False)
    run(sched, "b3", "beta", {"n3": 8}, min_runtime=8 * HOUR)
    sched.submit(build_workload("gang", "alpha", 16, nodes=2, submit=LATER - HOUR))
    result = sched.cycle(LATER, OVER)
    assert sorted(preempted_ids(result)) == ["b0", "b1"]
    assert all(p.by == "gang" for p in result.preemptions)
    assert placement_of(result, "gang") == {"n0": 8, "n1": 8}
    assert set(sched.running) == {"gang", "b2", "b3"}


def test_one_gpu_debug_job_evicts_the_cheapest_victim_not_a_whole_eight_gpu_run():
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "big", "beta", {"n0": 8})
    for i in range(4):
        run(sched, f"small{i}", "beta", {"n1": 2})
    sched.submit(debug("alpha-debug", "alpha"))
    result = sched.cycle(LATER, OVER)
    (victim,) = preempted_ids(result)
    assert victim.startswith("small")
    assert placement_of(result, "alpha-debug") == {"n1": 1}
    assert "big" in sched.running


def test_fewest_gpu_hours_lost_prefers_the_run_that_checkpointed_most_recently():
    # Two 8-GPU resumable runs past their 2 h minimum, checkpoints every 30 min. At LATER
    # (T0 + 3 h 10 min): r-a started T0 + 15 min, has run 2 h 55 min, last checkpoint 25 min
    # ago; r-b started T0, has run 3 h 10 min, last checkpoint 10 min ago: cheaper to evict.
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "r-a", "beta", {"n0": 8}, start=T0 + 15 * MINUTE)
    run(sched, "r-b", "beta", {"n1": 8})
    sched.submit(debug("alpha-debug", "alpha", gpus=8))
    result = sched.cycle(LATER, OVER)
    assert preempted_ids(result) == ["r-b"]


def test_debug_job_evicts_own_projects_long_run_past_minimum():
    sched = build_scheduler(build_nodes(1), budget("root", 100, leaf("lab", 100)))
    run(sched, "lab-train", "lab", {"n0": 8})
    sched.submit(debug("lab-debug", "lab"))
    result = sched.cycle(LATER, {"lab": 100_000.0})
    assert preempted_ids(result) == ["lab-train"]
    assert result.preemptions[0].by == "lab-debug"
    assert started_ids(result) == ["lab-debug"]


def test_debug_job_does_not_evict_own_projects_run_inside_its_minimum():
    sched = build_scheduler(build_nodes(1), budget("root", 100, leaf("lab", 100)))
    run(sched, "lab-train", "lab", {"n0": 8}, min_runtime=8 * HOUR)
    sched.submit(debug("lab-debug", "lab"))
    result = sched.cycle(LATER, {"lab": 100_000.0})
    assert result.preemptions == [] and result.starts == []


def test_evicted_workload_is_requeued_with_its_submit_time_kept():
    sched = build_scheduler(build_nodes(1), budget("root", 100, leaf("lab", 100)))
    original = Workload("lab-train", "lab", 8, submit_time=T0 - HOUR, min_runtime=2 * HOUR)
    sched.add_running(original, {"n0": 8}, T0)
    # Same shape and priority, submitted after the original but before the eviction.
    sched.submit(build_workload("lab-train-2", "lab", 8, submit=T0, min_runtime=2 * HOUR))
    sched.submit(debug("lab-debug", "lab"))
    result = sched.cycle(LATER, {"lab": 100_000.0}, explain=True)
    assert preempted_ids(result) == ["lab-train"]
    assert "lab-train" in sched.pending_ids()
    # Requeued with submit time T0 - 1 h, it goes back ahead of lab-train-2 (submitted T0).
    assert result.order == ["lab-train", "lab-train-2"]


def test_preemption_evicts_nothing_when_no_victim_set_lets_the_preemptor_start():
    # alpha's gang needs 2 whole nodes; only one of beta's runs is past its minimum.
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "b0", "beta", {"n0": 8})
    run(sched, "b1", "beta", {"n1": 8}, min_runtime=8 * HOUR)
    sched.submit(build_workload("gang", "alpha", 16, nodes=2, submit=LATER))
    result = sched.cycle(LATER, OVER)
    assert result.preemptions == []
    assert set(sched.running) == {"b0", "b1"}


# ---------------------------------------------------------------- other policies


def test_fifo_never_preempts():
    sched = build_scheduler(build_nodes(2), halves(), policy="fifo")
    run(sched, "b0", "beta", {"n0": 8})
    run(sched, "b-free", "beta", {"n1": 8}, min_runtime=0.0)
    sched.submit(debug("alpha-debug", "alpha"))
    sched.submit(build_workload("alpha-big", "alpha", 16, nodes=2, submit=LATER))
    for k in range(20):
        result = sched.cycle(LATER + k * 10 * MINUTE, OVER)
        assert result.preemptions == []
        assert result.starts == []


def test_quota_reclaims_lent_quota_from_the_borrower():
    # beta borrowed alpha's idle half; alpha comes back and reclaims exactly one node.
    sched = build_scheduler(build_nodes(2), halves(), policy="quota")
    run(sched, "b0", "beta", {"n0": 8})
    run(sched, "b1", "beta", {"n1": 8})
    # Waiting an hour: longer than evicting one of beta's runs loses per GPU.
    sched.submit(build_workload("a0", "alpha", 8, submit=LATER - HOUR))
    sched.submit(build_workload("a1", "alpha", 8, submit=LATER - HOUR + 1))
    result = sched.cycle(LATER, {})
    assert len(result.preemptions) == 1
    assert result.preemptions[0].workload_id in {"b0", "b1"}
    assert started_ids(result) == ["a0"]
    # alpha now holds its deserved 8 GPUs: a1 does not take beta's deserved half.
    result = sched.cycle(LATER + 10 * MINUTE, {})
    assert result.preemptions == []
    assert sorted(r.workload.project for r in sched.running.values()) == ["alpha", "beta"]


def test_quota_does_not_reclaim_from_a_borrower_inside_its_minimum_runtime():
    sched = build_scheduler(build_nodes(2), halves(), policy="quota")
    run(sched, "b0", "beta", {"n0": 8}, min_runtime=8 * HOUR)
    run(sched, "b1", "beta", {"n1": 8}, min_runtime=8 * HOUR)
    sched.submit(build_workload("a0", "alpha", 8, submit=LATER))
    result = sched.cycle(LATER, {})
    assert result.preemptions == [] and result.starts == []


def test_partition_never_lets_a_team_past_its_share_even_on_an_idle_cluster():
    # 4 nodes x 8 = 32 GPUs; alpha's 25 % is 8 GPUs. No borrowing.
    root = budget("root", 100, leaf("alpha", 25), leaf("beta", 75))
    sched = build_scheduler(build_nodes(4), root, policy="partition")
    for i in range(3):
        sched.submit(build_workload(f"a{i}", "alpha", 8, submit=float(i)))
    sched.submit(build_workload("a-small", "alpha", 1, submit=9.0))
    for k in range(5):
        sched.cycle(k * 10 * MINUTE, {})
        alpha = sum(r.workload.gpus for r in sched.running.values())
        assert alpha <= 8
    assert [w for w in sched.running] == ["a0"]
