"""The one answer to "what may this user see and change" in the budget tree.

Every page, API queryset, export and chart filters through ``user_visibility(user=...)`` so the
rules live here only (see docs/governance-services.md):

- org admin: sees and manages the whole organization;
- program manager: sees the organization node, their program and its projects; manages their
  program's split;
- PI: sees their project and its ancestors; may request a change of their project's share;
- researcher: sees their project and its ancestors, read-only;
- finance: sees the whole organization read-only, and its reports;
- no role: sees nothing. Staff status only opens the Django admin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Q, QuerySet

from governance.choices import ApprovalState, Role
from governance.models import (
    Allocation,
    ApprovalRequest,
    Cluster,
    Organization,
    Program,
    Project,
    RoleAssignment,
)


@dataclass(frozen=True)
class Visibility:
    """The ids a user's roles reach; build it with ``user_visibility``.

    QuerySet methods return fresh querysets, so callers may filter them further. ``can_*``
    answer by role only: whether the object is in a state that allows the action is the
    services' business (they raise a ``ValidationError`` on ``state``).
    """

    user_id: int | None
    roles: frozenset = frozenset()
    admin_org_ids: frozenset = frozenset()
    finance_org_ids: frozenset = frozenset()
    managed_program_ids: frozenset = frozenset()
    pi_project_ids: frozenset = frozenset()
    member_project_ids: frozenset = frozenset()
    # Ancestors of the program/project roles: shown by name (and share) so a PI can see
    # where their project sits, without seeing siblings.
    _ancestor_org_ids: frozenset = field(default=frozenset(), repr=False)
    _ancestor_program_ids: frozenset = field(default=frozenset(), repr=False)

    @property
    def is_empty(self) -> bool:
        """True when the user holds no role at all (the outsider)."""
        return not self.roles

    @property
    def can_view_reports(self) -> bool:
        """Finance and org admins may read usage reports of their organization."""
        return bool(self.admin_org_ids or self.finance_org_ids)

    @property
    def _whole_org_ids(self) -> frozenset:
        return self.admin_org_ids | self.finance_org_ids

    @property
    def _project_ids(self) -> frozenset:
        return self.pi_project_ids | self.member_project_ids

    def organizations(self) -> QuerySet[Organization]:
        """Organizations the user sees (at least by name)."""
        return Organization.objects.filter(id__in=self._whole_org_ids | self._ancestor_org_ids)

    def programs(self) -> QuerySet[Program]:
        """Programs the user sees: all of an admin's/finance's org, managed ones, ancestors."""
        return Program.objects.filter(
            Q(organization_id__in=self._whole_org_ids)
            | Q(id__in=self.managed_program_ids | self._ancestor_program_ids)
        )

    def projects(self) -> QuerySet[Project]:
        """Projects the user sees."""
        return Project.objects.filter(
            Q(program__organization_id__in=self._whole_org_ids)
            | Q(program_id__in=self.managed_program_ids)
            | Q(id__in=self._project_ids)
        )

    def simulating_organizations(self) -> QuerySet[Organization]:
        """Organizations whose tree the user may replay in the simulator: those they
        administer, and those of the programs they manage."""
        return Organization.objects.filter(
            Q(id__in=self.admin_org_ids) | Q(programs__id__in=self.managed_program_ids)
        ).distinct()

    def simulations_q(self) -> Q:
        """The simulations (``scheduler.models.SimulationJob``) the user may open: their own,
        and every one of an organization they administer."""
        return Q(created_by_id=self.user_id) | Q(organization_id__in=self.admin_org_ids)

    def whatif_runs_q(self) -> Q:
        """The what-ifs (``scheduler.models.WhatIfRun``) the user may open: their own, those
        of a split they manage, and previews of an approval request they see."""
        return (
            Q(created_by_id=self.user_id)
            | Q(cluster__organization_id__in=self.admin_org_ids)
            | Q(parent_kind="program", parent_id__in=self.managed_program_ids)
            | Q(approval_request__in=self.approval_requests())
        )

    def submit_projects(self) -> QuerySet[Project]:
        """Projects the user may submit workloads to: those they are PI or researcher of. An
        org admin, program manager or finance reader does not submit on a project's behalf."""
        return Project.objects.filter(id__in=self._project_ids)

    def sees_project(self, project: Project) -> bool:
        """Whether ``project`` is one of ``projects()``, answered without a query (reads
        ``project.program``: select it with the project)."""
        program = project.program
        return (
            project.pk in self._project_ids
            or program.pk in self.managed_program_ids
            or program.organization_id in self._whole_org_ids
        )

    def clusters(self) -> QuerySet[Cluster]:
        """Clusters of the organizations the user sees."""
        return Cluster.objects.filter(
            organization_id__in=self._whole_org_ids | self._ancestor_org_ids
        )

    def allocations(self) -> QuerySet[Allocation]:
        """Share history of the programs and projects the user sees."""
        return Allocation.objects.filter(
            Q(program__in=self.programs()) | Q(project__in=self.projects())
        )

    def approval_requests(self) -> QuerySet[ApprovalRequest]:
        """Requests the user made, may decide, oversees (finance) or that touch their project."""
        if self.user_id is None:
            return ApprovalRequest.objects.none()
        return ApprovalRequest.objects.filter(
            Q(requested_by_id=self.user_id)
            | Q(organization_id__in=self._whole_org_ids)
            | Q(program_id__in=self.managed_program_ids)
            | Q(lines__project_id__in=self.pi_project_ids)
        ).distinct()

    def sees_whole_organization(self, organization_id: int) -> bool:
        """Sees every program and project of the organization (org admin or finance): the
        same rule as ``programs()`` and ``projects()``, answered without a query."""
        return organization_id in self._whole_org_ids

    def is_org_admin(self, organization_id: int) -> bool:
        """Holds the org admin role on the organization with this id."""
        return organization_id in self.admin_org_ids

    def can_manage(self, parent: Organization | Program) -> bool:
        """May split the children of ``parent`` directly and decide requests about them."""
        if isinstance(parent, Organization):
            return parent.pk in self.admin_org_ids
        if isinstance(parent, Program):
            return (
                parent.organization_id in self.admin_org_ids
                or parent.pk in self.managed_program_ids
            )
        return False

    def can_request(self, node: Program | Project) -> bool:
        """May request a change of ``node``'s share (its PI, or a manager of it or above)."""
        if isinstance(node, Program):
            return node.organization_id in self.admin_org_ids or node.pk in self.managed_program_ids
        if isinstance(node, Project):
            return node.pk in self.pi_project_ids or self.can_manage(node.program)
        return False

    def can_decide(self, approval_request: ApprovalRequest) -> bool:
        """A manager of the request's parent node who did not make the request."""
        if approval_request.requested_by_id == self.user_id:
            return False
        return self.can_manage(approval_request.parent)

    def can_withdraw(self, approval_request: ApprovalRequest) -> bool:
        """Only the requester withdraws, and only before a decision."""
        return approval_request.requested_by_id == self.user_id and approval_request.state in (
            ApprovalState.DRAFT,
            ApprovalState.SUBMITTED,
        )


def user_visibility(*, user) -> Visibility:
    """What ``user`` may see and change; two queries, cheap enough to build per request.

    Anonymous and inactive users get an empty visibility (they see nothing). Staff status is
    ignored here: it only opens the Django admin.
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return Visibility(user_id=None)
    assignments = list(
        RoleAssignment.objects.filter(user=user).select_related("program", "project__program")
    )
    roles: set[Role] = set()
    ids: dict[Role, set[int]] = {role: set() for role in Role}
    ancestor_orgs: set[int] = set()
    ancestor_programs: set[int] = set()
    for a in assignments:
        role = Role(a.role)
        roles.add(role)
        if a.organization_id:
            ids[role].add(a.organization_id)
        elif a.program_id:
            ids[role].add(a.program_id)
            ancestor_orgs.add(a.program.organization_id)
        elif a.project_id:
            ids[role].add(a.project_id)
            ancestor_programs.add(a.project.program_id)
            ancestor_orgs.add(a.project.program.organization_id)
    return Visibility(
        user_id=user.pk,
        roles=frozenset(roles),
        admin_org_ids=frozenset(ids[Role.ORG_ADMIN]),
        finance_org_ids=frozenset(ids[Role.FINANCE]),
        managed_program_ids=frozenset(ids[Role.PROGRAM_MANAGER]),
        pi_project_ids=frozenset(ids[Role.PI]),
        member_project_ids=frozenset(ids[Role.RESEARCHER]),
        _ancestor_org_ids=frozenset(ancestor_orgs),
        _ancestor_program_ids=frozenset(ancestor_programs),
    )
