"""Reclaim (``docs/design.md``, "Preemption"): the guarantee between teams.

A team below its entitlement evicts what other teams run above theirs, whatever the window
rank, and only while it stays within its own entitlement; a reclaim never takes the
victim's team below its entitlement (all of one team's victims counted together) and never
digs a bigger hole than it fills; gangs have whole nodes cleared the same way; the order a
person sees puts teams below their entitlement first.
"""

from __future__ import annotations

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
)
from tests.engine.preemption_world import LATER, OVER, T0, debug, halves, run


def test_a_team_below_its_entitlement_reclaims_whatever_the_window_rank():
    sched = build_scheduler(build_nodes(1), halves())
    run(sched, "alpha-own", "alpha", {"n0": 4}, min_runtime=8 * HOUR)
    run(sched, "alpha-run", "alpha", {"n0": 4})
    sched.submit(debug("beta-debug", "beta", gpus=4))
    # beta used far more over the window, but holds nothing of its 4 GPUs now, while alpha
    # runs 8: the entitlement is a guarantee, the window rank does not gate it.
    result = sched.cycle(LATER, OVER)
    assert [p.workload_id for p in result.preemptions] == ["alpha-run"]
    assert "below its entitlement" in result.preemptions[0].reason
    assert [s.workload_id for s in result.starts] == ["beta-debug"]


def test_a_team_at_its_entitlement_does_not_evict_even_when_it_ranks_first():
    sched = build_scheduler(build_nodes(1), halves())
    run(sched, "alpha-run", "alpha", {"n0": 4}, min_runtime=15 * MINUTE)
    run(sched, "beta-run", "beta", {"n0": 4})
    # alpha ranks first by the window, but already holds its 4 GPUs: what is above its
    # entitlement is shared through free GPUs, never by evicting beta (and alpha's own run
    # is of the same class as its new job, so alpha does not evict itself either).
    sched.submit(debug("alpha-debug", "alpha"))
    result = sched.cycle(LATER, OVER)
    assert result.preemptions == [] and result.starts == []


def test_a_reclaim_never_takes_the_victims_team_below_its_entitlement():
    sched = build_scheduler(build_nodes(1), halves())
    run(sched, "alpha-run", "alpha", {"n0": 8})
    sched.submit(debug("beta-debug", "beta", gpus=4))
    # alpha borrows 4 GPUs, but in one 8-GPU run: evicting it would leave alpha 4 below its
    # entitlement, a claim to take them back. beta waits for a free slot instead.
    result = sched.cycle(LATER, OVER)
    assert result.preemptions == [] and result.starts == []


def test_a_reclaim_never_digs_a_bigger_hole_than_it_fills():
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "alpha-a", "alpha", {"n0": 8})
    run(sched, "alpha-b", "alpha", {"n1": 1})
    run(sched, "beta-run", "beta", {"n1": 7})
    # beta is one GPU short of its 8; alpha runs one above. Evicting alpha's 8-GPU run would
    # leave alpha 7 short: refused. Its 1-GPU run is what it borrows: the victim.
    sched.submit(debug("beta-debug", "beta"))
    result = sched.cycle(LATER, OVER)
    assert [p.workload_id for p in result.preemptions] == ["alpha-b"]
    assert [s.workload_id for s in result.starts] == ["beta-debug"]


def small_runs_world():
    """2 nodes of 8; alpha runs 10 GPUs (three 2-GPU runs on n0, 4 on n1), 2 above its 8;
    beta runs 1 GPU on n0."""
    sched = build_scheduler(build_nodes(2), halves())
    for i in range(3):
        run(sched, f"alpha-{i}", "alpha", {"n0": 2})
    run(sched, "alpha-big", "alpha", {"n1": 4})
    run(sched, "beta-run", "beta", {"n0": 1})
    return sched


def alpha_gpus(sched) -> int:
    """GPUs alpha runs now."""
    return sum(r.workload.gpus for w, r in sched.running.items() if w.startswith("alpha"))


def test_a_reclaim_counts_every_victim_of_one_team_together():
    sched = small_runs_world()
    # alpha runs 10 GPUs, 2 above its 8. beta (1 of 8) needs 5 on one node: n0 has 1 free,
    # so two of alpha's 2-GPU runs would have to go. Each alone fits in alpha's 2 GPUs of
    # room; both together would take alpha to 6, below its entitlement: refused.
    sched.submit(build_workload("beta-5", "beta", 5, submit=T0 - 100 * HOUR))
    result = sched.cycle(LATER, OVER)
    assert result.preemptions == []
    assert alpha_gpus(sched) == 10


def test_a_reclaim_takes_what_a_team_borrows_when_one_victim_is_enough():
    sched = small_runs_world()
    run(sched, "beta-n1", "beta", {"n1": 4})
    # The same world with n1 full and beta asking for 3 GPUs (5 + 3 = its 8): one 2-GPU run
    # of alpha is enough (n0 has 1 free), and alpha keeps its 8.
    sched.submit(build_workload("beta-3", "beta", 3, submit=T0 - 100 * HOUR))
    result = sched.cycle(LATER, OVER)
    assert len(result.preemptions) == 1
    assert alpha_gpus(sched) == 8


def gang_world(on_n1: int, small: int):
    """4 nodes of 8; alpha runs 8 GPUs on n0, ``on_n1`` on n1 and ``small`` alone on each of
    n2 and n3 (its entitlement is 16 of 32); beta, running nothing, waits with a 2-node,
    16-GPU gang that the guarantee lets reclaim."""
    sched = build_scheduler(build_nodes(4), halves())
    run(sched, "alpha-a", "alpha", {"n0": 8})
    run(sched, "alpha-b", "alpha", {"n1": on_n1})
    run(sched, "alpha-c", "alpha", {"n2": small})
    run(sched, "alpha-d", "alpha", {"n3": small})
    sched.submit(build_workload("beta-gang", "beta", 16, nodes=2, submit=T0 - 100 * HOUR))
    return sched


def test_a_gang_reclaim_clears_nodes_holding_what_the_team_borrows():
    # alpha runs 20 and borrows 4, all on n2 and n3: clearing both leaves it its 16.
    sched = gang_world(on_n1=8, small=2)
    result = sched.cycle(LATER, OVER)
    assert sorted(preempted_ids(result)) == ["alpha-c", "alpha-d"]
    assert placement_of(result, "beta-gang") == {"n2": 8, "n3": 8}


def test_a_gang_reclaim_counts_every_cleared_node_of_one_team_together():
    # alpha runs 19 and borrows 3: each 3-GPU run alone fits in that room, clearing both
    # n2 and n3 would take alpha to 13 of its 16: refused.
    sched = gang_world(on_n1=5, small=3)
    result = sched.cycle(LATER, OVER)
    assert result.preemptions == []
    assert alpha_gpus(sched) == 19


def small_team_world():
    """3 nodes of 8. alpha (10 %, 3 GPUs) runs nothing and waits with one 8-GPU job; delta
    (30 %) runs nothing, so beta and gamma (30 % each, 7 GPUs) run 12 each: 4 on n0 and 8 on
    a node of their own, 5 above their entitlement."""
    root = budget(
        "root", 100, leaf("alpha", 10), leaf("beta", 30), leaf("gamma", 30), leaf("delta", 30)
    )
    sched = build_scheduler(build_nodes(3), root)
    run(sched, "beta-small", "beta", {"n0": 4})
    run(sched, "gamma-small", "gamma", {"n0": 4})
    run(sched, "beta-big", "beta", {"n1": 8})
    run(sched, "gamma-big", "gamma", {"n2": 8})
    sched.submit(build_workload("alpha-8", "alpha", 8, submit=T0))
    return sched


def test_a_team_whose_smallest_job_exceeds_what_it_is_owed_reclaims_after_the_hold_bound():
    # alpha is owed 3 GPUs, its job needs 8: it can never stay within its entitlement, so the
    # ordinary reclaim never applies. Once the job has waited 30 min at the head of alpha's
    # turn (the hold bound, as for a gang), one workload is the smallest step alpha can
    # take: it reclaims n0, whose two runs fit in what beta and gamma run above theirs.
    sched = small_team_world()
    assert sched.cycle(LATER, OVER).preemptions == []
    assert sched.cycle(LATER + 29 * MINUTE, OVER).preemptions == []
    result = sched.cycle(LATER + 31 * MINUTE, OVER)
    assert sorted(preempted_ids(result)) == ["beta-small", "gamma-small"]
    assert placement_of(result, "alpha-8") == {"n0": 8}
    # Neither victim's team went below its entitlement of 7.
    for team in ("beta", "gamma"):
        assert (
            sum(r.workload.gpus for r in sched.running.values() if r.workload.project == team) == 8
        )


def test_the_explained_order_puts_teams_below_their_entitlement_first():
    # alpha ranks first by the window (it used nothing) but already runs its 8 GPUs; beta
    # used a lot and holds nothing: beta's pending work is offered GPUs first, and the order
    # a person sees says so.
    sched = build_scheduler(build_nodes(2), halves())
    run(sched, "alpha-run", "alpha", {"n0": 8}, min_runtime=8 * HOUR)
    run(sched, "alpha-run2", "alpha", {"n1": 8}, min_runtime=8 * HOUR)
    sched.submit(debug("alpha-next", "alpha"))
    sched.submit(debug("beta-next", "beta"))
    result = sched.cycle(LATER, OVER, explain=True)
    assert result.order == ["beta-next", "alpha-next"]
