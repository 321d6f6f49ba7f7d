"""The world the permission matrix runs in: the personas, a foreign organization, requests,
allocations, workloads and nodes of both tenants (fixture ``world``)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import pytest

from governance.models import Allocation
from governance.services.approvals import approval_request_create
from scheduler.services.executor_reports import node_agent_create, node_register
from scheduler.services.workloads import workload_submit
from tests.factories import ClusterFactory, OrganizationFactory, UserFactory, pi_of
from tests.personas import Personas


@dataclass
class World:
    """The personas plus the objects the matrix points at (own and cross-tenant)."""

    p: Personas
    foreign_organization: object
    foreign_cluster: object
    pi_b: object  # PI of Translation (project B1, program Language)
    request_a: object  # submitted by the PI: Detection 50 → 55 %
    draft_a: object  # the PI's draft: Detection 50 → 52 %
    request_b: object  # submitted by pi_b: Translation 70 → 65 %
    draft_b: object  # pi_b's draft: Translation 70 → 68 %
    allocation_a1: object
    allocation_b1: object
    workload_a: object  # submitted by the researcher on Detection
    workload_b: object  # submitted by pi_b on Translation
    node_a: object  # a registered node of the personas' cluster
    node_foreign: object  # a node of the foreign organization's cluster


@pytest.fixture
def fast_password_hasher(settings):
    """Hash passwords cheaply; requested before ``personas`` so the personas use it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(fast_password_hasher, personas) -> World:
    p = personas
    foreign_organization = OrganizationFactory(name="Elsewhere Labs", slug="elsewhere")
    foreign_cluster = ClusterFactory(organization=foreign_organization)
    pi_b = UserFactory(username="pi_b")
    pi_of(p.project_b1, pi_b)

    def ask(actor, parent, node, percent, submit=True):
        return approval_request_create(
            actor=actor,
            parent=parent,
            cluster=p.cluster,
            percents={node: Decimal(percent)},
            reason="Permission matrix.",
            submit=submit,
        )

    def submit(project, user):
        return workload_submit(
            project=project,
            cluster=p.cluster,
            name="matrix",
            gpus=1,
            min_runtime_seconds=600,
            launch_spec={"command": ["true"]},
            submitted_by=user,
        )

    def node(cluster, name):
        agent, _token = node_agent_create(cluster=cluster, name=name)
        return node_register(agent=agent, gpus=8)

    return World(
        p=p,
        workload_a=submit(p.project_a1, p.researcher),
        workload_b=submit(p.project_b1, pi_b),
        node_a=node(p.cluster, "node-a"),
        node_foreign=node(foreign_cluster, "node-f"),
        foreign_organization=foreign_organization,
        foreign_cluster=foreign_cluster,
        pi_b=pi_b,
        request_a=ask(p.pi, p.program_a, p.project_a1, "55"),
        draft_a=ask(p.pi, p.program_a, p.project_a1, "52", submit=False),
        request_b=ask(pi_b, p.program_b, p.project_b1, "65"),
        draft_b=ask(pi_b, p.program_b, p.project_b1, "68", submit=False),
        allocation_a1=Allocation.objects.get(project=p.project_a1),
        allocation_b1=Allocation.objects.get(project=p.project_b1),
    )
