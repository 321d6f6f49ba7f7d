"""Team names as the engine keys its tables by them: one shared copy, whatever the caller passed.

A caller may name a team with a ``str`` subclass (Django's ``SafeString`` is one); the engine
interns names, which ``sys.intern`` refuses for a subclass, so each name is made a plain ``str``
first.
"""

from __future__ import annotations

from scheduler.engine import BudgetNode
from scheduler.engine.names import interned
from tests.engine.builders import HOUR, MINUTE, nodes, scheduler, work


class _Marked(str):
    """A ``str`` subclass, as a web framework's marked-safe text is."""


def _reclaim(name) -> list[tuple[str, str | None]]:
    """Team ``b`` (under its entitlement) reclaims from team ``a`` (above its own), with every
    name made by ``name``: the preemptions and who made them."""
    teams = [BudgetNode(name("a"), 50.0), BudgetNode(name("b"), 50.0)]
    sched = scheduler(nodes(1), BudgetNode(name("org"), 100.0, teams))
    sched.add_running(work("a-own", name("a"), 4, min_runtime=8 * HOUR), {"n0": 4}, 0.0)
    sched.add_running(work("a-run", name("a"), 4, min_runtime=HOUR), {"n0": 4}, 0.0)
    # Short work: it waits at most its own minimum runtime for a slot before it evicts.
    sched.submit(work("b-job", name("b"), 4, submit=HOUR, min_runtime=10 * MINUTE))
    result = sched.cycle(2 * HOUR, {name("a"): 8 * 2 * HOUR})
    return [(p.workload_id, p.by) for p in result.preemptions]


def test_names_given_as_a_str_subclass_schedule_as_plain_names_do():
    plain = _reclaim(str)
    assert plain == [("a-run", "b-job")]
    assert _reclaim(_Marked) == plain


def test_interned_gives_one_plain_copy_per_text():
    first = interned(_Marked("team-" + "7"))
    second = interned("".join(["team", "-7"]))
    assert type(first) is str
    assert first == "team-7"
    assert first is second
