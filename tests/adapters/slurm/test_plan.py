"""The pure parts of the Slurm adapter: safe names and the reconcile plan (no Slurm needed)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduler.adapters.slurm.names import MAX_NAME, SlurmNameError, slurm_safe_name, unique_names
from scheduler.adapters.slurm.plan import (
    ADD_ACCOUNT,
    ADD_QOS,
    ADD_USER,
    MODIFY_ACCOUNT,
    MODIFY_QOS,
    MODIFY_USER,
    REMOVE_ACCOUNT,
    REMOVE_USER,
    Account,
    Current,
    Desired,
    Qos,
    format_duration,
    parse_duration,
    plan_sync,
)
from scheduler.adapters.slurm.usage import gpus_of


def test_names_are_lowercase_and_restricted_to_what_slurm_takes():
    assert slurm_safe_name("Vision Lab/Detection") == "vision-lab-detection"
    assert slurm_safe_name("ÉQUIPE_42") == "quipe_42"


def test_long_names_are_cut_with_a_stable_hash_so_shared_starts_still_differ():
    a = slurm_safe_name("x" * 60 + "-alpha")
    b = slurm_safe_name("x" * 60 + "-beta")
    assert len(a) == len(b) == MAX_NAME
    assert a != b
    assert a == slurm_safe_name("x" * 60 + "-alpha")  # deterministic


def test_a_name_with_nothing_usable_is_refused():
    with pytest.raises(SlurmNameError, match="name: '///'"):
        slurm_safe_name("///")


def test_two_nodes_with_one_name_are_refused_naming_both():
    with pytest.raises(SlurmNameError) as caught:
        unique_names({("program", 1): "a-b_c", ("project", 2): "A-B_C"})
    assert "('program', 1)" in str(caught.value) and "('project', 2)" in str(caught.value)


def test_a_node_named_like_the_parent_account_is_refused():
    with pytest.raises(SlurmNameError, match=r"root: .*the parent account"):
        unique_names({("organization", 1): "root"}, reserved={"root": "the parent account"})


def test_durations_and_gpu_counts_parse_as_slurm_writes_them():
    assert parse_duration("01:00:00") == 3600
    assert parse_duration("1-02:00:00") == 26 * 3600
    assert parse_duration("05:30") == 330
    assert parse_duration("") is None
    assert format_duration(8 * 3600) == "08:00:00"
    assert format_duration(90000) == "1-01:00:00"
    assert gpus_of("billing=1,cpu=1,gres/gpu=2,node=1") == 2
    assert gpus_of("cpu=4,gres/gpu:h100=4,gres/gpu=4,node=1") == 4
    assert gpus_of("billing=1,cpu=1,node=1") == 0


FREE = Qos("o-free", usage_factor=Decimal(0), preempt_exempt_seconds=0)
MIN1H = Qos("o-min1h", preempt_exempt_seconds=3600, preempt=("o-free",))


def desired(users=frozenset()) -> Desired:
    return Desired(
        cluster="c",
        organization_account="o",
        accounts=[
            Account("o", "root", None, frozenset({"o-free", "o-min1h"}), "o-min1h"),
            Account("o_p", "o", 6000),
            Account("p_a", "o_p", 5000),
            Account("p_b", "o_p", 0),
        ],
        users=set(users),
        qos=[FREE, MIN1H],
    )


def in_slurm(d: Desired, **changes) -> Current:
    """A Slurm that holds exactly ``d`` (then altered by ``changes``)."""
    current = Current(
        accounts={a.name: a for a in d.accounts},
        users=set(d.users),
        default_accounts={u: a for u, a in sorted(d.users, reverse=True)},
        qos={q.name: q for q in d.qos},
    )
    for key, value in changes.items():
        setattr(current, key, value)
    return current


def kinds(plan) -> list[tuple[str, str]]:
    return [(c.kind, c.target) for c in plan.changes]


def test_an_empty_slurm_gets_qos_then_parents_before_children_then_users():
    d = desired(users={("ann", "p_a"), ("bob", "p_a"), ("ann", "p_b")})
    plan = plan_sync(d, Current(accounts={}, users=set(), default_accounts={}, qos={}))
    assert kinds(plan) == [
        (ADD_QOS, "o-free"),
        (ADD_QOS, "o-min1h"),
        (ADD_ACCOUNT, "o"),
        (ADD_ACCOUNT, "o_p"),
        (ADD_ACCOUNT, "p_a"),
        (ADD_ACCOUNT, "p_b"),
        (ADD_USER, "ann,bob@p_a"),
        (ADD_USER, "ann@p_b"),
    ]
    add_o = plan.changes[2].args
    assert (
        "parent=root" in add_o and "qos=o-free,o-min1h" in add_o and "defaultqos=o-min1h" in add_o
    )
    assert "fairshare=6000" in plan.changes[3].args
    assert "PreemptExemptTime=01:00:00" in plan.changes[1].args


def test_a_slurm_that_matches_gets_no_change():
    d = desired(users={("ann", "p_a")})
    assert plan_sync(d, in_slurm(d)).empty


def test_drift_in_fairshare_parent_qos_and_qos_settings_is_repaired():
    d = desired()
    accounts = {a.name: a for a in d.accounts}
    accounts["o_p"] = Account("o_p", "o", 1)
    accounts["p_b"] = Account("p_b", "root", 0)
    accounts["o"] = Account("o", "root", None, frozenset({"o-free"}), "o-free")
    qos = {
        "o-free": Qos("o-free", usage_factor=Decimal(1), preempt_exempt_seconds=0),
        "o-min1h": MIN1H,
    }
    plan = plan_sync(d, in_slurm(d, accounts=accounts, qos=qos))
    assert kinds(plan) == [
        (MODIFY_QOS, "o-free"),
        (MODIFY_ACCOUNT, "o"),
        (MODIFY_ACCOUNT, "o_p"),
        (MODIFY_ACCOUNT, "p_b"),
    ]
    assert plan.changes[2].why == "Fairshare 1 → 6000"
    assert plan.changes[3].why == "parent root → o_p"
    assert "UsageFactor 1 → 0" in plan.changes[0].why


def test_unknown_accounts_are_reported_and_removed_children_first_only_when_asked():
    d = desired()
    accounts = {a.name: a for a in d.accounts}
    accounts["stray"] = Account("stray", "o", 1)
    accounts["stray_kid"] = Account("stray_kid", "stray", 1)
    accounts["elsewhere"] = Account("elsewhere", "root", 1)  # not under the organization
    current = in_slurm(d, accounts=accounts)
    kept = plan_sync(d, current)
    assert kept.empty and kept.unknown_accounts == ["stray", "stray_kid"]
    removed = plan_sync(d, current, remove_unknown=True)
    assert kinds(removed) == [(REMOVE_ACCOUNT, "stray_kid"), (REMOVE_ACCOUNT, "stray")]


def test_a_member_who_left_is_removed_after_their_default_account_moves():
    d = desired(users={("ann", "p_b")})
    current = in_slurm(d, users={("ann", "p_a"), ("ann", "p_b")}, default_accounts={"ann": "p_a"})
    plan = plan_sync(d, current)
    assert kinds(plan) == [(MODIFY_USER, "ann"), (REMOVE_USER, "ann@p_a")]
    assert "defaultaccount=p_b" in plan.changes[0].args
