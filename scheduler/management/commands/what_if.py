"""``manage.py what_if``: replay a cluster's last weeks under today's tree and a proposed one.

    manage.py what_if --cluster ORG/CLUSTER --proposal FILE [--days 14] [--end ISO] [--json]

``FILE`` holds the split API's body without a reason or a cluster (``docs/what-if.md``)::

    {"parent": {"kind": "program", "id": 3},
     "shares": [{"node": 12, "percent": "20"}, {"node": 13, "percent": "80"}]}

Prints, per team, owed and delivered-of-owed GPU-hours, hourly delivery, p90 waits and
preemptions under today's tree and the proposal, and what changes most. It runs at once (no
worker) and stores nothing. Every bad input ends in a ``CommandError``.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from governance.models import Cluster, Organization, Program
from governance.parsing import instant
from scheduler.selectors.whatif import MAX_DAYS, what_if
from scheduler.services.whatif import whatif_proposal_validate
from scheduler.simulator.durations import format_duration

KINDS = {"organization": Organization, "program": Program}


class Command(BaseCommand):
    """Preview a split of one node's children on one cluster, on real past demand."""

    help = (
        "Replay a cluster's last days of real demand under today's shares and under a "
        "proposed split (JSON file), and print the difference per team. See docs/what-if.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--cluster", required=True, help="ORGANIZATION-SLUG/CLUSTER-SLUG")
        parser.add_argument("--proposal", required=True, help="the proposed split (JSON file)")
        parser.add_argument("--days", type=int, default=14, help=f"days replayed (1-{MAX_DAYS})")
        parser.add_argument(
            "--end", help="the window's end, an ISO instant (default: now, on the hour)"
        )
        parser.add_argument("--json", action="store_true", help="print the figures as JSON")

    def handle(self, *args, **options) -> None:
        cluster = _cluster(options["cluster"])
        parent, percents = _proposal(Path(options["proposal"]), cluster)
        try:
            proposal = whatif_proposal_validate(cluster, parent, percents, options["days"])
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            ) from None
        end = None
        if options["end"] is not None:
            end = instant(options["end"])
            if end is None:
                raise CommandError("--end: not an ISO instant such as 2026-03-04T00:00Z")
        result = what_if(cluster=cluster, proposed=proposal, end=end, days=options["days"])
        if options["json"]:
            data = asdict(result)
            data["start"], data["end"] = result.start.isoformat(), result.end.isoformat()
            self.stdout.write(json.dumps(data, indent=2))
            return
        self.stdout.write(_table(result))


def _cluster(value: str) -> Cluster:
    org_slug, _, slug = value.partition("/")
    cluster = Cluster.objects.filter(organization__slug=org_slug, slug=slug).first()
    if cluster is None:
        raise CommandError(
            f"--cluster: no cluster {value!r} (write ORGANIZATION-SLUG/CLUSTER-SLUG)"
        )
    return cluster


def _proposal(path: Path, cluster: Cluster):
    """The file's parent node and ``{child: percent}``, resolved in the cluster's organization."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"--proposal: cannot read {path}: {exc}") from None
    try:
        kind, pk = data["parent"]["kind"], int(data["parent"]["id"])
        shares = [(int(item["node"]), item["percent"]) for item in data["shares"]]
    except (TypeError, KeyError, ValueError):
        raise CommandError(
            '--proposal: expected {"parent": {"kind", "id"}, "shares": [{"node", "percent"}]}'
        ) from None
    model = KINDS.get(kind)
    parent = model.objects.filter(pk=pk).first() if model else None
    if parent is None:
        raise CommandError(f"--proposal: parent: no {kind} {pk}")
    children = parent.programs.all() if kind == "organization" else parent.projects.all()
    by_id = {child.pk: child for child in children}
    missing = [node for node, _ in shares if node not in by_id]
    if missing:
        raise CommandError(f"--proposal: shares: {missing} are not children of {parent}")
    return parent, {by_id[node]: percent for node, percent in shares}


def _table(result) -> str:
    """The figures as a plain-text table, one line per team."""
    lines = [
        f"{result.jobs:,} workloads from {result.start:%Y-%m-%d %H:%M} to "
        f"{result.end:%Y-%m-%d %H:%M} UTC on {result.gpus} GPUs ({result.gpus_per_node} per node); "
        + ", ".join(f"{n} {how}" for how, n in sorted(result.counts.items())),
        "",
        f"{'team':<24} {'owed GPU-h':>21} {'delivered of owed':>21} {'hourly':>13} "
        f"{'wait p90':>17} {'preemptions':>11}",
    ]
    for team in result.teams:
        a, b = team.today, team.proposed
        lines.append(
            f"{team.name[:24]:<24} {_pair(a.owed_gpu_hours, b.owed_gpu_hours, '{:,.1f}'):>21} "
            f"{_pair(a.delivered_of_owed_gpu_hours, b.delivered_of_owed_gpu_hours, '{:,.1f}'):>21} "
            f"{_pair(a.hourly_delivery_ratio, b.hourly_delivery_ratio, '{:.0%}'):>13} "
            f"{_pair(a.wait_p90, b.wait_p90, format_duration):>17} "
            f"{_pair(a.preemptions, b.preemptions, '{}'):>11}"
        )
    lines += ["", result.summary, "Past demand is not future demand; work people did not submit "
              "because the queue was long is not in it."]  # fmt: skip
    return "\n".join(lines)


def _pair(before, after, fmt) -> str:
    """``before → after``, each through ``fmt`` (a format string or a function)."""

    def one(v):
        if v is None:
            return "—"
        return fmt(v) if callable(fmt) else fmt.format(v)

    return f"{one(before)} → {one(after)}"
