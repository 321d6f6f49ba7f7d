"""``manage.py run_agent --node NAME --gpus 0,1,2,3``: the local node agent.

Runs each workload ordered to this node as a process with ``CUDA_VISIBLE_DEVICES`` set to its
GPUs, stops it with SIGTERM then SIGKILL after a grace period, reports exits — over HTTP only
(``scheduler/agent``), like ``python -m scheduler.agent`` on a machine without this checkout's
database. See docs/agents.md.

Without ``--token`` (and ``GPU_AGENT_TOKEN``), on the server's own machine, the command makes
the node's agent credentials itself the first time and keeps the token in
``var/agents/<cluster>/<node>.token`` (readable by its owner only) for the next start.
"""

from __future__ import annotations

import logging
import os

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduler.agent.__main__ import add_agent_arguments
from scheduler.agent.launch_spec import parse_gpu_indices
from scheduler.agent.loop import run_agent


class Command(BaseCommand):
    """Run the node agent for one node until SIGTERM or SIGINT."""

    help = "Run the local node agent: pull orders, run workloads as processes, report exits."

    def add_arguments(self, parser):
        add_agent_arguments(parser)
        parser.add_argument(
            "--cluster",
            help="Cluster slug, when a token must be made here (default: the only cluster).",
        )

    def handle(self, *args, **options):
        try:
            gpus = parse_gpu_indices(options["gpus"])
        except ValueError as exc:
            raise CommandError(f"--gpus: {exc}") from exc
        if not gpus:
            raise CommandError("--gpus: list at least one GPU index (e.g. 0 or 0,1,2,3)")
        token = options["token"] or self._local_token(options["cluster"], options["node"])
        logging.getLogger("scheduler.agent").setLevel(logging.INFO)
        code = run_agent(
            server=options["server"],
            token=token,
            node=options["node"],
            gpus=gpus,
            poll_seconds=options["poll_seconds"],
            heartbeat_seconds=options["heartbeat_seconds"],
            grace_seconds=options["grace_seconds"],
            log_dir=options["log_dir"],
            gpu_telemetry=not options["no_gpu_telemetry"],
            utilization_seconds=options["utilization_seconds"],
        )
        if code:
            raise CommandError("the agent stopped: its registration was refused", returncode=code)

    def _local_token(self, cluster_slug: str | None, node: str) -> str:
        """The token kept for this node under var/, made (with its credentials) if missing."""
        from governance.models import Cluster
        from scheduler.models import NodeAgent
        from scheduler.services.executor_reports import node_agent_create

        clusters = Cluster.objects.all()
        if cluster_slug:
            clusters = clusters.filter(slug=cluster_slug)
        found = list(clusters[:2])
        if len(found) != 1:
            raise CommandError(
                "give --token, or --cluster naming one cluster so a token can be made here"
            )
        cluster = found[0]
        path = settings.BASE_DIR / "var" / "agents" / cluster.slug / f"{node}.token"
        if path.exists():
            return path.read_text().strip()
        if NodeAgent.objects.filter(cluster=cluster, name=node).exists():
            raise CommandError(
                f"{cluster.slug} already has an agent for {node} and its token is not in {path}; "
                "give --token"
            )
        _, raw = node_agent_create(cluster=cluster, name=node)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(raw)
        os.chmod(path, 0o600)
        self.stdout.write(f"Made agent credentials for {node} on {cluster.slug}; token in {path}")
        return raw
