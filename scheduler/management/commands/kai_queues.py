"""``manage.py kai_queues``: the budget tree of a cluster as KAI Scheduler Queue resources."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from governance.models import Cluster
from scheduler.adapters.kai.output import queues_write, queues_yaml
from scheduler.adapters.kai.queues import STEPS, QueueOptions, queues_build
from scheduler.adapters.kai.tree import kai_tree_read

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def parse_duration(text: str) -> int:
    """``"2h"``, ``"1h30m"``, ``"45m"``, ``"90s"`` or plain seconds → seconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    match = _DURATION.match(text)
    if not text or not match or not any(match.groups()):
        raise CommandError(f"--min-runtime: {text!r} is not a duration like 2h, 1h30m or 90s")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def cluster_lookup(name: str) -> Cluster:
    """The cluster named ``slug`` or ``org-slug/slug``; a ``CommandError`` names what failed."""
    org_slug, _, slug = name.rpartition("/")
    clusters = Cluster.objects.select_related("organization").filter(slug=slug)
    if org_slug:
        clusters = clusters.filter(organization__slug=org_slug)
    found = list(clusters[:2])
    if not found:
        raise CommandError(f"--cluster: no cluster {name!r}")
    if len(found) > 1:
        raise CommandError(
            f"--cluster: {name!r} names clusters of several organizations; "
            "write it as <organization slug>/<cluster slug>"
        )
    return found[0]


class Command(BaseCommand):
    help = (
        "Write KAI Scheduler Queue resources (scheduling.run.ai/v2) for a cluster's budget "
        "tree: one multi-document YAML on stdout, or one file per queue with --out. "
        "Apply with `kubectl apply -f`. See docs/kubernetes.md."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--cluster", required=True, help="Cluster slug (or <organization>/<cluster>)."
        )
        parser.add_argument("--out", help="Directory: write <queue>.yaml files there.")
        parser.add_argument(
            "--prefix", help="First part of every queue name (default: the cluster slug)."
        )
        parser.add_argument(
            "--gpu-step",
            default="1",
            choices=[str(s) for s in STEPS],
            help="Quotas are multiples of this many GPUs (default 1: whole GPUs).",
        )
        parser.add_argument(
            "--no-burst",
            action="store_true",
            help="GPU limit = the queue's quota (default: the cluster's GPUs, burst allowed).",
        )
        parser.add_argument(
            "--min-runtime",
            help="preemptMinRuntime/reclaimMinRuntime on the top queue, inherited by all "
            "(0-8 h, e.g. 2h or 30m). Default: not set, KAI's plugin defaults apply.",
        )

    def handle(self, *args, **options) -> None:
        cluster = cluster_lookup(options["cluster"])
        min_runtime = options["min_runtime"]
        queue_options = QueueOptions(
            total_gpus=cluster.total_gpus,
            prefix=options["prefix"] or cluster.slug,
            step=Decimal(options["gpu_step"]),
            burst=not options["no_burst"],
            min_runtime_seconds=parse_duration(min_runtime) if min_runtime else None,
        )
        try:
            queues = queues_build(root=kai_tree_read(cluster=cluster), options=queue_options)
        except ValueError as exc:
            raise CommandError(f"cluster {cluster.slug!r}: {exc}") from exc
        summary = (
            f"{len(queues)} queues for cluster {cluster.slug!r} "
            f"({cluster.total_gpus} GPUs; {sum(1 for q in queues if q.kind == 'project')} "
            f"projects)"
        )
        if not options["out"]:
            self.stdout.write(queues_yaml(queues=queues, cluster=cluster.slug), ending="")
            # The summary goes to stderr so stdout can be piped into `kubectl apply -f -`.
            self.stderr.write(summary)
            return
        written, stale = queues_write(queues=queues, directory=Path(options["out"]))
        self.stdout.write(f"{summary}: {len(written)} files written to {options['out']}")
        for path in stale:
            self.stdout.write(
                f"stale: {path} is a queue this tree no longer has (not deleted; "
                f"`kubectl delete -f {path}` to remove it)"
            )
