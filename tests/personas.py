"""The six fixed personas and the small budget tree they live in (a pytest plugin).

Use the ``personas`` fixture from any test directory by importing it in that directory's
``conftest.py`` (``from tests.personas import personas  # noqa: F401``); pytest no longer
accepts ``pytest_plugins`` outside the top-level conftest.

The tree (one organization "Acme Research", one cluster "h100" of 4 x 8 GPUs)::

    Acme Research
    ├── Vision    60 %   (program A; managed by program_manager)
    │   ├── Detection     50 %   (project A1; pi is its PI, researcher a member)
    │   └── Segmentation  30 %   (project A2)          → Vision has 20 % unallocated
    └── Language  40 %   (program B)
        ├── Translation   70 %   (project B1)
        └── Summaries     30 %   (project B2)

Shares are open allocations set by the org admin 30 days ago. Persona usernames equal their
key in ``personas.users``; every persona signs in with ``tests.factories.TEST_PASSWORD``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from governance.models import Cluster, Organization, Program, Project
from tests.factories import (
    TEST_PASSWORD,
    AllocationFactory,
    ClusterFactory,
    OrganizationFactory,
    ProgramFactory,
    ProjectFactory,
    UserFactory,
    finance_of,
    org_admin_of,
    pi_of,
    program_manager_of,
    researcher_of,
)

PERSONA_NAMES = ("org_admin", "program_manager", "pi", "researcher", "finance", "outsider")

# Baseline shares (percent of parent) of the personas' tree.
BASELINE_SHARES = {
    "program_a": Decimal("60.00"),
    "program_b": Decimal("40.00"),
    "project_a1": Decimal("50.00"),
    "project_a2": Decimal("30.00"),
    "project_b1": Decimal("70.00"),
    "project_b2": Decimal("30.00"),
}


@dataclass
class Personas:
    """The users by persona name, and the tree they hold roles on."""

    organization: Organization
    cluster: Cluster
    program_a: Program
    program_b: Program
    project_a1: Project
    project_a2: Project
    project_b1: Project
    project_b2: Project
    users: dict = field(default_factory=dict)
    password: str = TEST_PASSWORD

    def __getattr__(self, name: str):
        # personas.pi, personas.finance, … read like the permission matrix.
        users = self.__dict__.get("users", {})
        if name in users:
            return users[name]
        raise AttributeError(name)

    @property
    def programs(self) -> list[Program]:
        return [self.program_a, self.program_b]

    @property
    def projects(self) -> list[Project]:
        return [self.project_a1, self.project_a2, self.project_b1, self.project_b2]


def build_personas() -> Personas:
    """Create the personas' tree, roles and baseline shares (needs database access)."""
    organization = OrganizationFactory(name="Acme Research", slug="acme")
    cluster = ClusterFactory(
        organization=organization, name="h100", slug="h100", nodes=4, gpus_per_node=8
    )
    program_a = ProgramFactory(organization=organization, name="Vision", slug="vision")
    program_b = ProgramFactory(organization=organization, name="Language", slug="language")
    tree = {
        "program_a": program_a,
        "program_b": program_b,
        "project_a1": ProjectFactory(program=program_a, name="Detection", slug="detection"),
        "project_a2": ProjectFactory(program=program_a, name="Segmentation", slug="segmentation"),
        "project_b1": ProjectFactory(program=program_b, name="Translation", slug="translation"),
        "project_b2": ProjectFactory(program=program_b, name="Summaries", slug="summaries"),
    }
    users = {name: UserFactory(username=name) for name in PERSONA_NAMES}
    org_admin_of(organization, users["org_admin"])
    program_manager_of(program_a, users["program_manager"])
    pi_of(tree["project_a1"], users["pi"])
    researcher_of(tree["project_a1"], users["researcher"])
    finance_of(organization, users["finance"])

    since = timezone.now() - timedelta(days=30)
    for key, percent in BASELINE_SHARES.items():
        node = tree[key]
        AllocationFactory(
            cluster=cluster,
            program=node if key.startswith("program") else None,
            project=node if key.startswith("project") else None,
            percent=percent,
            valid_from=since,
            set_by=users["org_admin"],
            reason="Baseline split of the personas' tree.",
        )
    return Personas(organization=organization, cluster=cluster, users=users, **tree)


@pytest.fixture
def personas(db) -> Personas:
    """One organization, 2 programs x 2 projects, one cluster, six users (see module doc)."""
    return build_personas()
