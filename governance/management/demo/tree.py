"""The demo's budget tree: the Philly organization, its programs and VCs as projects, one H100
cluster, and the org admin's initial split of it.

Built only from files bundled with the product (``scheduler/traces``): the budget tree of
``philly_budgets.json``, checked against the VC list of the Philly trace.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.core.management.base import CommandError
from django.utils import timezone

from governance.models import Allocation, Cluster, Organization, Program, Project
from governance.selectors.tree import ShareRow, node_key
from governance.services.audit import audit_share_change
from governance.services.shares import check_siblings_fit, lock_parent
from scheduler.traces import PHILLY_BUDGETS, PHILLY_VCS

ORGANIZATION = {"slug": "philly", "name": "Philly Research"}
CLUSTER = {"slug": "h100", "name": "h100", "gpu_type": "h100", "nodes": 32, "gpus_per_node": 8}
# The PI's project and its program, where the demo approval requests live.
PI_PROJECT = "6214e9"
PI_PROGRAM = "vision"
# The PI's project starts below its size-proportional share; the applied request brings it
# there, so today's shares equal the JSON and the history tells how.
PI_PROJECT_START = Decimal("40.00")
# Shares start before today so pages and reports over the last weeks have budgets to show.
SHARES_SINCE = timedelta(days=30)


@dataclass(frozen=True)
class DemoTree:
    """The demo's nodes: programs by slug, projects by VC name."""

    organization: Organization
    cluster: Cluster
    programs: dict[str, Program]
    projects: dict[str, Project]


def load_budget_tree() -> dict:
    """The bundled budget tree, checked against the bundled VC list."""
    tree = json.loads(PHILLY_BUDGETS.read_text())
    with open(PHILLY_VCS, newline="") as f:
        known_vcs = {row["vc"] for row in csv.DictReader(f)}
    for program in tree["children"]:
        for project in program["children"]:
            if project["name"] not in known_vcs:
                raise CommandError(f"{PHILLY_BUDGETS.name}: unknown VC {project['name']}")
    return tree


def json_share(vc: str) -> Decimal:
    """The share the bundled budget tree gives the VC ``vc`` in its program."""
    for program in load_budget_tree()["children"]:
        for project in program["children"]:
            if project["name"] == vc:
                return Decimal(str(project["share"]))
    raise CommandError(f"{vc} is not in {PHILLY_BUDGETS.name}")


def demo_tree_ensure(spec: dict, created: list[str]) -> DemoTree:
    """The demo organization, cluster, programs and projects of ``spec`` (the bundled budget
    tree), each made when missing and named in ``created``."""
    organization, new = Organization.objects.get_or_create(
        slug=ORGANIZATION["slug"], defaults={"name": ORGANIZATION["name"]}
    )
    if new:
        created.append("organization")
    cluster, new = Cluster.objects.get_or_create(
        organization=organization,
        slug=CLUSTER["slug"],
        defaults={k: v for k, v in CLUSTER.items() if k != "slug"},
    )
    if new:
        created.append("cluster")
    programs: dict[str, Program] = {}
    projects: dict[str, Project] = {}
    for program_spec in spec["children"]:
        program, new = Program.objects.get_or_create(
            organization=organization,
            slug=program_spec["name"],
            defaults={"name": program_spec["name"].capitalize()},
        )
        programs[program.slug] = program
        for project_spec in program_spec["children"]:
            vc = project_spec["name"]
            project, new_project = Project.objects.get_or_create(
                program=program,
                slug=vc,
                defaults={"name": f"VC {vc}", "cost_centre": f"CC-{vc[:4].upper()}"},
            )
            projects[vc] = project
            new = new or new_project
        if new:
            created.append(f"program {program.slug}")
    return DemoTree(
        organization=organization, cluster=cluster, programs=programs, projects=projects
    )


def initial_shares_write(spec: dict, tree: DemoTree, admin) -> None:
    """The org admin's initial split, written as of ``SHARES_SINCE`` ago.

    Written here rather than through ``allocation_split``, which refuses start dates in
    the past (it never rewrites history); the same parent lock and 100 % check guard it.
    """
    since = timezone.now() - SHARES_SINCE
    reason = "Initial budget: shares proportional to each VC's size in the Philly trace."
    programs, projects, cluster = tree.programs, tree.projects, tree.cluster
    groups = [(tree.organization, [(programs[p["name"]], p["share"]) for p in spec["children"]])]
    for program_spec in spec["children"]:
        shares = []
        for project_spec in program_spec["children"]:
            share = project_spec["share"]
            if project_spec["name"] == PI_PROJECT:
                share = PI_PROJECT_START
            shares.append((projects[project_spec["name"]], share))
        groups.append((programs[program_spec["name"]], shares))
    for parent, shares in groups:
        lock_parent(parent)
        rows = [
            ShareRow(node_key(node), Decimal(str(share)), since, None, (2, i))
            for i, (node, share) in enumerate(shares)
        ]
        check_siblings_fit(parent=parent, cluster=cluster, new_rows=rows)
        for node, share in shares:
            Allocation.objects.create(
                cluster=cluster,
                program=node if isinstance(node, Program) else None,
                project=node if isinstance(node, Project) else None,
                percent=Decimal(str(share)),
                valid_from=since,
                set_by=admin,
                reason=reason,
                created_at=since,
            )
        audit_share_change(
            actor=admin,
            parent=parent,
            cluster=cluster,
            before={},  # no share before the first split
            after={node: Decimal(str(share)) for node, share in shares},
            valid_from=since,
            valid_to=None,
            reason=reason,
            at=since,
        )
