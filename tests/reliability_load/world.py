"""The harness's world on its own database: demo data plus load accounts and a lab cluster.

Run as ``python -m tests.reliability_load.world --out FILE`` (Django settings from the
environment) after ``migrate`` and ``load_demo``. It adds:

- ``LOAD_RESEARCHERS`` researchers (``load-r0`` …), each a member of one demo project, with an
  API token: the locust clients submit and read their queue as them;
- signed-in sessions for the demo manager, PI, finance reader and org admin (the
  owed-vs-delivered page is a browser page; made with Django's test client ``force_login``,
  so the run does not depend on the login form or its rate limits);
- a ``lab`` cluster of 2 nodes x 4 GPUs whose nodes are real ``run_agent`` processes (the demo
  ``h100`` cluster is played by the simulated executor), with one agent token per node.

Writes everything the harness and locust need as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os

import django

LAB_NODES = ["lab-01", "lab-02"]
LAB_GPUS_PER_NODE = 4


def build(researchers: int) -> dict:
    """Create the load accounts, sessions and the lab cluster; return their credentials."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from governance.choices import Role
    from governance.models import Cluster, Organization, Project, RoleAssignment
    from scheduler.services.executor_reports import node_agent_create

    user_model = get_user_model()
    org = Organization.objects.get(slug="philly")
    h100 = Cluster.objects.get(organization=org, slug="h100")
    lab, _ = Cluster.objects.get_or_create(
        organization=org, slug="lab",
        defaults={"name": "lab", "gpu_type": "h100", "nodes": len(LAB_NODES),
                  "gpus_per_node": LAB_GPUS_PER_NODE},
    )  # fmt: skip
    projects = list(Project.objects.filter(program__organization=org).order_by("slug"))
    accounts = []
    for i in range(researchers):
        user, _ = user_model.objects.get_or_create(username=f"load-r{i}")
        project = projects[i % len(projects)]
        RoleAssignment.objects.get_or_create(user=user, role=Role.RESEARCHER, project=project)
        token, _ = Token.objects.get_or_create(user=user)
        accounts.append({"username": user.username, "token": token.key, "project": project.pk})
    sessions = []
    for username in ("manager", "pi", "finance", "admin"):
        client = Client()
        client.force_login(user_model.objects.get(username=username))
        sessions.append({"username": username, "sessionid": client.cookies["sessionid"].value})
    agents = []
    for name in LAB_NODES:
        _, raw = node_agent_create(cluster=lab, name=name)
        agents.append({"node": name, "token": raw})
    return {
        "clusters": {"h100": h100.pk, "lab": lab.pk},
        "lab_gpus_per_node": LAB_GPUS_PER_NODE,
        "researchers": accounts,
        "sessions": sessions,
        "agents": agents,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--researchers", type=int, default=20)
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governance.settings")
    django.setup()
    with open(options.out, "w") as f:
        json.dump(build(options.researchers), f, indent=1)


if __name__ == "__main__":
    main()
