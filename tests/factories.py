"""factory-boy factories for every model of the budget domain.

Factories build valid rows with the fewest arguments; they bypass the services on purpose
(tests use them to set up a state, then call the service under test). Allocations made here
are not checked against the 100 % rule — use ``governance.services`` when the rule matters.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.utils import timezone

from governance.choices import ApprovalState, DecisionAction, Role
from governance.models import (
    Allocation,
    ApprovalDecision,
    ApprovalLine,
    ApprovalRequest,
    Cluster,
    Organization,
    Program,
    Project,
    RoleAssignment,
)

TEST_PASSWORD = "correct-horse-battery-staple"


class UserFactory(factory.django.DjangoModelFactory):
    """A user who can sign in with ``TEST_PASSWORD``."""

    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    first_name = factory.Faker("first_name")
    last_name = factory.Faker("last_name")

    @factory.post_generation
    def password(obj, create, extracted, **kwargs):
        # Hashing is deliberately slow; every factory user shares one hash of the test
        # password so a test with six personas does not spend seconds in PBKDF2.
        obj.password = _password_hash(extracted or TEST_PASSWORD)
        if create:
            obj.save(update_fields=["password"])


@functools.cache
def _password_hash(raw: str) -> str:
    return make_password(raw)


class OrganizationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organization

    name = factory.Sequence(lambda n: f"Organization {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class ProgramFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Program

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Program {n}")
    slug = factory.Sequence(lambda n: f"program-{n}")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    program = factory.SubFactory(ProgramFactory)
    name = factory.Sequence(lambda n: f"Project {n}")
    slug = factory.Sequence(lambda n: f"project-{n}")
    cost_centre = factory.Sequence(lambda n: f"CC-{1000 + n}")


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"h100-{n}")
    slug = factory.Sequence(lambda n: f"h100-{n}")
    gpu_type = "h100"
    nodes = 4
    gpus_per_node = 8


class RoleAssignmentFactory(factory.django.DjangoModelFactory):
    """A role; pass the scope that matches it (organization, program or project)."""

    class Meta:
        model = RoleAssignment

    user = factory.SubFactory(UserFactory)
    role = Role.RESEARCHER
    organization = None
    program = None
    project = None


def org_admin_of(organization: Organization, user=None) -> RoleAssignment:
    """Make ``user`` (a new one when omitted) an org admin of ``organization``."""
    return RoleAssignmentFactory(
        user=user or UserFactory(), role=Role.ORG_ADMIN, organization=organization
    )


def finance_of(organization: Organization, user=None) -> RoleAssignment:
    return RoleAssignmentFactory(
        user=user or UserFactory(), role=Role.FINANCE, organization=organization
    )


def program_manager_of(program: Program, user=None) -> RoleAssignment:
    return RoleAssignmentFactory(
        user=user or UserFactory(), role=Role.PROGRAM_MANAGER, program=program
    )


def pi_of(project: Project, user=None) -> RoleAssignment:
    return RoleAssignmentFactory(user=user or UserFactory(), role=Role.PI, project=project)


def researcher_of(project: Project, user=None) -> RoleAssignment:
    return RoleAssignmentFactory(user=user or UserFactory(), role=Role.RESEARCHER, project=project)


class AllocationFactory(factory.django.DjangoModelFactory):
    """A program's share of its organization (pass ``project=`` and ``program=None`` for a project)."""

    class Meta:
        model = Allocation

    program = factory.SubFactory(ProgramFactory)
    project = None
    cluster = factory.SubFactory(
        ClusterFactory,
        organization=factory.LazyAttribute(
            lambda c: (c.factory_parent.program or c.factory_parent.project.program).organization
        ),
    )
    percent = Decimal("50.00")
    valid_from = factory.LazyFunction(lambda: timezone.now() - timedelta(days=1))
    valid_to = None
    set_by = factory.SubFactory(UserFactory)
    reason = "Set up by a test."


class ApprovalRequestFactory(factory.django.DjangoModelFactory):
    """A request about the programs of ``organization`` (pass ``program=`` for its projects)."""

    class Meta:
        model = ApprovalRequest

    organization = factory.SubFactory(OrganizationFactory)
    program = None
    cluster = factory.SubFactory(
        ClusterFactory, organization=factory.SelfAttribute("..organization")
    )
    requested_by = factory.SubFactory(UserFactory)
    reason = "More GPU time for a deadline."
    effective_from = factory.LazyFunction(timezone.now)
    effective_to = None
    state = ApprovalState.SUBMITTED


class ApprovalLineFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ApprovalLine

    request = factory.SubFactory(ApprovalRequestFactory)
    program = None
    project = None
    percent = Decimal("10.00")
    previous_percent = Decimal("0.00")


class ApprovalDecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ApprovalDecision

    request = factory.SubFactory(ApprovalRequestFactory)
    actor = factory.SelfAttribute("request.requested_by")
    action = DecisionAction.SUBMIT
    from_state = ApprovalState.DRAFT
    to_state = ApprovalState.SUBMITTED
    comment = ""
