"""How often moving share to a team lowers what it is delivered of what it is owed.

Run: ``DEBUG=true .venv/bin/python -m tests.bench.whatif_monotonicity 4000`` — that many
random pairs of replays (seeded), drawn as ``tests/simulator/test_whatif_property.py`` draws
them (``scenarios.whatif_rows``): a 16-GPU cluster, team Y asking for all of it throughout,
team X's and Y's jobs of 1 to 8 GPUs over six hours; the same trace under today's split and
under one that moves 1 to 40 points of share from X to Y. Printed: the pairs in which Y's
delivered-of-owed GPU-hours fell by more than 0.01, and the worst fall (GPU-hours, and its
part of what Y was owed before).

Whole workloads make the policy not monotone in the share: a larger entitlement changes
when the other team may reclaim, which shifts when whole-node work can start
(``tests/simulator/test_whatif_property.py`` works one case by hand).
"""

from __future__ import annotations

import os
import random
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
django.setup()  # the what-if's figures live beside its models

from scheduler.selectors.whatif import _team_figures  # noqa: E402
from scheduler.simulator import ReplayConfig, replay  # noqa: E402
from tests.simulator.scenarios import trace, two_teams, whatif_rows  # noqa: E402


def main(args: list[str]) -> None:
    pairs = int(args[0]) if args else 4000
    rng = random.Random(1)

    def job() -> tuple[int, int, int]:
        return rng.randint(0, 6 * 3600), rng.randint(600, 8 * 3600), rng.choice([1, 2, 4, 8])

    config = ReplayConfig(gpus=16, record_runs=False)
    fell, worst = 0, (0.0, 0.0, 0.0)
    for _ in range(pairs):
        x_jobs = [job() for _ in range(rng.randint(1, 12))]
        y_jobs = [job() for _ in range(rng.randint(1, 12))]
        y_share = rng.randint(10, 50)
        moved = min(rng.randint(1, 40), 100 - y_share - 1)
        t = trace(*whatif_rows(x_jobs, y_jobs))
        before = _team_figures(replay(t, two_teams(100 - y_share, y_share), config))["B"]
        after = _team_figures(replay(t, two_teams(100 - y_share - moved, y_share + moved), config))
        drop = before.delivered_of_owed_gpu_hours - after["B"].delivered_of_owed_gpu_hours
        if drop > 0.01:
            fell += 1
            worst = max(worst, (drop / before.owed_gpu_hours, drop, before.owed_gpu_hours))
    print(
        f"{pairs:,} pairs: Y's delivered-of-owed fell in {fell:,}; worst fall {worst[1]:.2f} "
        f"GPU-hours of {worst[2]:.2f} owed ({worst[0]:.1%})"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
