"""Holds that lend, take back and move (``docs/design.md``, "Holds").

A workload blocked at the head of its project's turn holds a node. Debug-class work may
borrow the held node's free GPUs and yields to the holder once past its protection (recall);
a single-node holder that waited past the hold threshold may empty a node by moving one
preemptible workload into the free GPUs of another node; and charged debug-class work of a
team above its entitlement goes before that team's longer work in the free-GPU order.

Each case below is worked by hand: the numbers in the comments are the whole argument.
"""

from __future__ import annotations

import pytest

from scheduler.engine import PolicyParams, Scheduler, make_policy
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

T0 = 1000 * HOUR
LONG = 8 * HOUR  # protected for the whole of every case below


def halves():
    return budget("root", 100, leaf("alpha", 50), leaf("beta", 50))


def run(sched: Scheduler, wid, project, placement, *, start=T0, min_runtime=LONG):
    w = build_workload(wid, project, sum(placement.values()), min_runtime=min_runtime)
    sched.add_running(w, placement, start)
    return w


# beta has used far more than alpha over the window: alpha's groups are walked first, so
# alpha's blocked job holds its node before beta's work is placed.
BETA_OVER = {"alpha": 0.0, "beta": 500_000.0}


def fragmented() -> Scheduler:
    """Two 8-GPU nodes: n0 has 2 GPUs free, n1 has 4; both fillers are protected for 8 h.
    Budgets alpha 70 % / beta 30 % (11.2 and 4.8 GPUs): alpha's 6-GPU job keeps alpha within
    its entitlement (4 + 6 = 10), so it is walked in the guarantee pass, before anyone's
    short work; it fits nowhere, so it holds n1 (the node with the most free GPUs)."""
    sched = build_scheduler(
        build_nodes(2), budget("root", 100, leaf("alpha", 70), leaf("beta", 30))
    )
    run(sched, "fill0", "beta", {"n0": 6})
    run(sched, "fill1", "alpha", {"n1": 4})
    sched.submit(build_workload("big", "alpha", 6, submit=T0))
    return sched


def probe(submit: float = T0 + MINUTE):
    """beta's 4-GPU debug job (15 min protection)."""
    return build_workload("probe", "beta", 4, submit=submit, min_runtime=15 * MINUTE)


def lent() -> Scheduler:
    """``fragmented`` after big held n1 (at +1 min) and probe borrowed its 4 GPUs (+2 min)."""
    sched = fragmented()
    sched.cycle(T0 + MINUTE, BETA_OVER)
    sched.submit(probe())
    sched.cycle(T0 + 2 * MINUTE, BETA_OVER)
    return sched


def test_debug_work_borrows_the_free_gpus_of_a_held_node():
    sched = fragmented()
    assert sched.cycle(T0 + MINUTE, BETA_OVER).starts == []
    # probe fits only in n1's 4 free GPUs, held for big.
    sched.submit(probe())
    result = sched.cycle(T0 + 2 * MINUTE, BETA_OVER)
    assert placement_of(result, "probe") == {"n1": 4}
    (start,) = result.starts
    assert start.loan_for == "big"
    assert "held for big" in start.reason
    assert sched.running["probe"].loan_for == "big"


def test_training_work_does_not_borrow_a_held_node():
    sched = fragmented()
    sched.cycle(T0 + MINUTE, BETA_OVER)
    # The same shape with a 2 h minimum would keep big waiting for 2 h: it may not borrow.
    sched.submit(build_workload("train", "beta", 4, submit=T0 + MINUTE, min_runtime=2 * HOUR))
    result = sched.cycle(T0 + 2 * MINUTE, BETA_OVER)
    assert "train" not in started_ids(result)


def test_the_holder_takes_its_node_back_once_the_borrower_is_past_its_protection():
    sched = lent()
    # fill1 ends: n1 has 4 free GPUs and probe's 4; big needs 6.
    sched.finish("fill1")
    # probe started at +2 min and is protected for 15 min: until +17 min nothing moves. Then
    # big takes n1 back at once: a borrower yields without the break-even patience an
    # ordinary eviction waits out.
    result = sched.cycle(T0 + 16 * MINUTE, BETA_OVER)
    assert result.preemptions == [] and "big" not in started_ids(result)
    result = sched.cycle(T0 + 17 * MINUTE, BETA_OVER)
    assert preempted_ids(result) == ["probe"]
    assert result.preemptions[0].by == "big"
    assert placement_of(result, "big") == {"n1": 6}
    assert "borrowed GPUs held for big" in result.preemptions[0].reason


def test_the_recall_comes_the_moment_the_borrower_passes_its_protection_and_nothing_else_moves():
    """A borrower passing its protection is the only change, and nothing else can use it.

    Two 8-GPU nodes; alpha 70 % / beta 10 % / gamma 20 % (11, 2 and 3 GPUs). n0 runs beta's
    fill0 (6, protected) and gamma's old 2-GPU run (preemptible: gamma already has
    preemptible work); n1 runs alpha's fill1 (4). alpha, holding 4 of its 11 GPUs, is
    offered free GPUs before gamma, holding 2 of its 3: alpha's 6-GPU big holds n1 and
    gamma's 4-GPU debug probe borrows its free 4. After fill1 ends, the cycle at +16 min
    changes nothing. At +17 min probe passes its 15 minutes and nothing else happens: gamma
    runs 6 GPUs, 3 above its 3, so no reclaim may take probe's 4; gamma has nothing pending;
    no other node has 4 free GPUs to move probe to. Only the loan makes probe usable, and big
    takes n1 back in that cycle (with a dirty flag alone, an engine that skips quiet cycles
    would wait).
    """
    usage = {"alpha": 0.0, "beta": 500_000.0, "gamma": 100_000.0}
    sched = build_scheduler(
        build_nodes(2),
        budget("root", 100, leaf("alpha", 70), leaf("beta", 10), leaf("gamma", 20)),
    )
    run(sched, "fill0", "beta", {"n0": 6})
    run(sched, "fill1", "alpha", {"n1": 4})
    run(sched, "old", "gamma", {"n0": 2}, start=T0 - HOUR, min_runtime=15 * MINUTE)
    sched.submit(build_workload("big", "alpha", 6, submit=T0))
    assert sched.cycle(T0 + MINUTE, usage).starts == []
    sched.submit(build_workload("probe", "gamma", 4, submit=T0 + MINUTE, min_runtime=15 * MINUTE))
    result = sched.cycle(T0 + 2 * MINUTE, usage)
    assert placement_of(result, "probe") == {"n1": 4}
    assert sched.running["probe"].loan_for == "big"
    sched.finish("fill1")
    result = sched.cycle(T0 + 16 * MINUTE, usage)
    assert result.starts == [] and result.preemptions == []
    result = sched.cycle(T0 + 17 * MINUTE, usage)
    assert preempted_ids(result) == ["probe"]
    assert placement_of(result, "big") == {"n1": 6}


def test_a_rebuilt_engine_remembers_the_loan_and_recalls_it():
    sched = lent()
    sched.finish("fill1")
    fresh = sched.rebuilt()
    assert fresh.running["probe"].loan_for == "big"
    result = fresh.cycle(T0 + 17 * MINUTE, BETA_OVER)
    assert preempted_ids(result) == ["probe"]
    assert placement_of(result, "big") == {"n1": 6}


def test_a_loan_ends_with_its_run():
    sched = lent()
    sched.finish("probe")
    # A later run on the same node is an ordinary run, not a borrower of big's hold.
    assert sched._loans == {}


# ---------------------------------------------------------------- moves


def crowded(filler_gpus: int = 6) -> Scheduler:
    """Three 8-GPU nodes; budgets alpha 30 % / beta 70 % (of 24 GPUs: 7.2 and 16.8).
    n0: beta's 1-GPU ``small`` (2 h minimum, started at T0) and 7 free GPUs;
    n1: beta's ``filler`` protected for 8 h; n2: beta's ``full``, protected for 8 h.
    beta runs 15 GPUs (or 17), alpha none. alpha's 8-GPU job would take alpha past its own
    7.2-GPU entitlement, and alpha ranks below beta over the window: neither the guarantee
    nor the window rank lets it evict ``small``. Only a move can start it."""
    sched = build_scheduler(
        build_nodes(3), budget("root", 100, leaf("alpha", 30), leaf("beta", 70))
    )
    run(sched, "small", "beta", {"n0": 1}, min_runtime=2 * HOUR)
    run(sched, "filler", "beta", {"n1": filler_gpus})
    run(sched, "full", "beta", {"n2": 8})
    return sched


# alpha has used far more than beta: beta ranks first for free GPUs.
ALPHA_OVER = {"alpha": 500_000.0, "beta": 0.0}
MOVE_AT = T0 + 3 * HOUR  # small is past its 2 h minimum; filler and full are not


def test_a_blocked_single_node_job_gets_a_node_emptied_by_one_move_after_the_hold_threshold():
    sched = crowded()
    sched.submit(build_workload("big", "alpha", 8, submit=MOVE_AT))
    # Before big has waited the 30-minute hold threshold at the head: no move.
    for minutes in (0, 10, 20):
        result = sched.cycle(MOVE_AT + minutes * MINUTE, ALPHA_OVER)
        assert result.preemptions == [] and result.starts == []
    # Past it: small moves out of n0 (it fits in n1's 2 free GPUs), big starts on n0.
    result = sched.cycle(MOVE_AT + 31 * MINUTE, ALPHA_OVER)
    assert preempted_ids(result) == ["small"]
    assert result.preemptions[0].by == "big"
    assert "moved to empty n0 for big" in result.preemptions[0].reason
    assert placement_of(result, "big") == {"n0": 8}
    # small is requeued with its submit time and restarts in n1's free GPUs next cycle.
    assert "small" not in sched.running
    result = sched.cycle(MOVE_AT + 32 * MINUTE, ALPHA_OVER)
    assert placement_of(result, "small") == {"n1": 1}


def test_a_move_at_the_start_of_a_replay_says_how_long_the_job_waited():
    """The same world with every clock at 0 (a replay starts there): big comes to the head
    blocked at 0 s and is moved for at 31 min. Its wait began at 0.0, which is an instant
    like any other (the reason once said "waited 0 s", reading 0.0 as "never")."""
    sched = build_scheduler(
        build_nodes(3), budget("root", 100, leaf("alpha", 30), leaf("beta", 70))
    )
    run(sched, "small", "beta", {"n0": 1}, start=0.0, min_runtime=10 * MINUTE)
    run(sched, "filler", "beta", {"n1": 6}, start=0.0)
    run(sched, "full", "beta", {"n2": 8}, start=0.0)
    sched.submit(build_workload("big", "alpha", 8, submit=0.0))
    for minutes in (0, 10, 20):
        assert sched.cycle(minutes * MINUTE, ALPHA_OVER).preemptions == []
    result = sched.cycle(31 * MINUTE, ALPHA_OVER)
    assert preempted_ids(result) == ["small"]
    assert "moved to empty n0 for big, which waited 31 min blocked" in result.preemptions[0].reason


def test_no_move_when_the_moved_work_would_have_nowhere_to_go():
    # n1 is full too: moving small would only swap one waiting job for another.
    sched = crowded(filler_gpus=8)
    sched.submit(build_workload("big", "alpha", 8, submit=MOVE_AT))
    for minutes in (0, 20, 31, 60, 120):
        result = sched.cycle(MOVE_AT + minutes * MINUTE, ALPHA_OVER)
        assert result.preemptions == [] and result.starts == []


def test_other_policies_do_not_move_work():
    sched = build_scheduler(build_nodes(3), halves(), policy="quota")
    run(sched, "small", "beta", {"n0": 1}, min_runtime=2 * HOUR)
    run(sched, "filler", "beta", {"n1": 6})
    run(sched, "full", "beta", {"n2": 8})
    sched.submit(build_workload("big", "alpha", 8, submit=MOVE_AT))
    kinds = set()
    for minutes in (0, 31, 60):
        for p in sched.cycle(MOVE_AT + minutes * MINUTE, ALPHA_OVER).preemptions:
            kinds.add(p.reason.split(" ")[0])
    assert "moved" not in kinds


# ---------------------------------------------------------------- short work first


def above_both() -> Scheduler:
    """Two 8-GPU nodes and budgets of 25 % each for alpha and beta (4 GPUs each) and 50 % for
    gamma, which runs nothing. alpha runs 8, beta 7: both are above their entitlement, so
    neither is guaranteed anything; one GPU is free and nothing is preemptible."""
    sched = build_scheduler(
        build_nodes(2),
        budget("root", 100, leaf("alpha", 25), leaf("beta", 25), leaf("gamma", 50)),
    )
    run(sched, "a-run", "alpha", {"n0": 8})
    run(sched, "b-run", "beta", {"n1": 7})
    return sched


# alpha has used less than beta over the window: alpha ranks first for free GPUs.
BETA_MORE = {"alpha": 100_000.0, "beta": 200_000.0, "gamma": 0.0}


def test_a_debug_job_of_a_team_above_entitlement_goes_before_longer_work_ranked_ahead():
    sched = above_both()
    sched.submit(build_workload("a-train", "alpha", 1, submit=T0, min_runtime=2 * HOUR))
    sched.submit(build_workload("b-debug", "beta", 1, submit=T0, min_runtime=15 * MINUTE))
    result = sched.cycle(T0 + MINUTE, BETA_MORE)
    assert started_ids(result) == ["b-debug"]


def test_without_the_debug_job_the_window_rank_decides():
    # The control: the same world with beta's job a 2 h run; alpha, ranked first, gets the GPU.
    sched = above_both()
    sched.submit(build_workload("a-train", "alpha", 1, submit=T0, min_runtime=2 * HOUR))
    sched.submit(build_workload("b-train", "beta", 1, submit=T0, min_runtime=2 * HOUR))
    result = sched.cycle(T0 + MINUTE, BETA_MORE)
    assert started_ids(result) == ["a-train"]


def gang_holding_fillers(project: str, min_runtime: float = LONG) -> Scheduler:
    """Three 8-GPU nodes, halves: ``project``'s fillers take 2 GPUs of n0 and 2 of n1,
    protected for ``min_runtime`` from T0, and beta's filler all of n2 (protected for 8 h).
    alpha's 2-node gang (16 GPUs) fits nowhere; 31 minutes at the head of its turn it holds
    n0 and n1 (the emptiest; no cap on held nodes)."""
    sched = build_scheduler(build_nodes(3), halves(), max_reserved_fraction=1.0)
    run(sched, "f0", project, {"n0": 2}, min_runtime=min_runtime)
    run(sched, "f1", project, {"n1": 2}, min_runtime=min_runtime)
    run(sched, "f2", "beta", {"n2": 8})
    sched.submit(build_workload("gang", "alpha", 16, nodes=2, submit=T0))
    assert sched.cycle(T0, BETA_OVER).starts == []
    return sched


def gang_waiting_on_protected_work() -> Scheduler:
    """``gang_holding_fillers`` with beta's fillers, protected until T0 + 8 h: the gang
    cannot have n0 and n1 before then by eviction, so its hold is needed no earlier."""
    return gang_holding_fillers("beta")


def test_work_that_outlasts_what_a_gang_waits_for_does_not_borrow():
    sched = gang_waiting_on_protected_work()
    # Protected until T0 + 8 h 31 min: past the fillers' protection, it could delay the
    # gang by 31 minutes beyond the moment it could have every node: it waits.
    sched.submit(build_workload("long", "beta", 4, submit=T0 + 31 * MINUTE, min_runtime=LONG))
    result = sched.cycle(T0 + 31 * MINUTE, BETA_OVER)
    assert result.starts == []
    assert "long" in sched.pending_ids()


def test_a_start_on_a_gangs_node_lets_longer_work_borrow_it_within_the_failed_search_memo():
    """Three 8-GPU nodes, halves (12 GPUs each), no cap on held nodes. beta's fillers take 2
    GPUs of n0, 2 of n1 and all of n2, protected for 7 h (until T0 + 7 h): beta runs its
    12, nothing of it may be reclaimed. alpha's 2-node gang holds n0 and n1 from +31 min,
    needed no earlier than T0 + 7 h. beta's 7.5 h run submitted then would be protected
    until T0 + 8 h 1 min: past that, it may not borrow, and its failed search is remembered.

    At +33 min, with nothing freed since, alpha's 2-GPU run of priority 1 (8 h) goes before
    the gang in alpha's turn and starts on n0 (6 free, the fullest with room; the hold is
    made afresh after it). The gang holds n0 and n1 again, now waiting for that run to end:
    its own project's work of a better class, which it may never evict. So beta's run may
    borrow, whatever its protection. The memo of its failed search must not hide that (it did:
    a hold's readiness grows with a start on its node, which frees nothing)."""
    seven = 7 * HOUR
    for incremental in (True, False):
        sched = Scheduler(
            build_nodes(3),
            halves(),
            policy=make_policy("fairshare"),
            params=PolicyParams(max_reserved_fraction=1.0),
            incremental=incremental,
        )
        run(sched, "f0", "beta", {"n0": 2}, min_runtime=seven)
        run(sched, "f1", "beta", {"n1": 2}, min_runtime=seven)
        run(sched, "f2", "beta", {"n2": 8}, min_runtime=seven)
        sched.submit(build_workload("gang", "alpha", 16, nodes=2, submit=T0))
        assert sched.cycle(T0, BETA_OVER).starts == []
        sched.submit(build_workload("train", "beta", 4, submit=T0, min_runtime=7.5 * HOUR))
        assert sched.cycle(T0 + 31 * MINUTE, BETA_OVER).starts == []
        sched.submit(build_workload("first", "alpha", 2, submit=T0, min_runtime=LONG, priority=1))
        result = sched.cycle(T0 + 33 * MINUTE, BETA_OVER)
        assert placement_of(result, "first") == {"n0": 2}
        assert placement_of(result, "train") == {"n0": 4}
        assert sched.running["train"].loan_for == "gang"


def gang_waiting_on_its_own_work() -> Scheduler:
    """``gang_holding_fillers`` with alpha's own fillers of the gang's class (1 h minimum
    runtime, protected until T0 + 1 h): work the gang may never evict, so it waits for them
    to end, whenever that is."""
    return gang_holding_fillers("alpha", HOUR)


@pytest.mark.parametrize(
    ("held", "words"),
    [
        (gang_waiting_on_protected_work, "work protected for at most 7.5 h may borrow"),
        (gang_waiting_on_its_own_work, "waits for its own project's work on them to end"),
    ],
)
def test_a_run_that_ends_its_protection_before_the_gang_can_have_its_nodes_borrows_one(held, words):
    """beta's 1 h run submitted at +31 min is protected until T0 + 1 h 31 min. Beside beta's
    fillers (protected until T0 + 8 h) that is long before the gang could have its nodes by
    eviction. Beside alpha's own fillers it is after their protection ends (T0 + 1 h), but the
    gang cannot have n0 and n1 before they end, which nobody knows: judged by their
    protection, beta's run would have waited beside 12 idle GPUs. Either way it borrows."""
    sched = held()
    sched.submit(build_workload("train", "beta", 4, submit=T0 + 31 * MINUTE))
    result = sched.cycle(T0 + 31 * MINUTE, BETA_OVER, explain=True)
    assert "holding n0, n1" in result.reasons["gang"]
    assert words in result.reasons["gang"]
    (start,) = result.starts
    assert start.workload_id == "train" and start.loan_for == "gang"
    assert set(start.placement) <= {"n0", "n1"}


def test_the_gang_takes_back_a_node_lent_while_it_waited_for_its_own_work():
    sched = gang_waiting_on_its_own_work()
    sched.submit(build_workload("train", "beta", 4, submit=T0 + 31 * MINUTE))
    assert started_ids(sched.cycle(T0 + 31 * MINUTE, BETA_OVER)) == ["train"]
    # At T0 + 2 h alpha's fillers have ended and beta's run is past its protection
    # (T0 + 1 h 31 min): the gang evicts its borrower and starts on n0 and n1.
    sched.finish("f0")
    sched.finish("f1")
    result = sched.cycle(T0 + 2 * HOUR, BETA_OVER)
    assert preempted_ids(result) == ["train"]
    assert placement_of(result, "gang") == {"n0": 8, "n1": 8}
