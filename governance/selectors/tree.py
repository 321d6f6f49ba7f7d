"""Reads of the budget tree: shares as of an instant, effective shares, history.

The effective-dating rule (see ``Allocation``): the share of a node on a cluster at instant t
is the newest row — latest ``valid_from``, then latest id — whose window ``[valid_from,
valid_to)`` contains t; with no such row the node holds 0 %. ``pick_shares`` is that rule as a
pure function so the services' 100 % check and these reads cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.choices import Role
from governance.models import Allocation, Cluster, Organization, Program, Project, RoleAssignment

ZERO = Decimal("0")
HUNDRED = Decimal("100")


@dataclass(frozen=True)
class ShareRow:
    """One share row as the effective-dating rule sees it (stored, or about to be stored).

    ``node`` is ``("program", id)`` or ``("project", id)``; ``order`` breaks ties between rows
    with the same ``valid_from`` (the row's id; rows not yet stored sort after stored ones).
    """

    node: tuple[str, int]
    percent: Decimal
    valid_from: datetime
    valid_to: datetime | None
    order: tuple = ()

    def covers(self, at: datetime) -> bool:
        """The row's window ``[valid_from, valid_to)`` contains ``at``."""
        return self.valid_from <= at and (self.valid_to is None or at < self.valid_to)

    @classmethod
    def from_allocation(cls, allocation: Allocation) -> ShareRow:
        """The stored row as the rule sees it."""
        return cls(
            node=node_key(allocation.node),
            percent=allocation.percent,
            valid_from=allocation.valid_from,
            valid_to=allocation.valid_to,
            order=(0, allocation.pk),
        )

    @classmethod
    def from_values(
        cls,
        pk: int,
        program_id: int | None,
        project_id: int | None,
        percent: Decimal,
        valid_from: datetime,
        valid_to: datetime | None,
    ) -> ShareRow:
        """The stored row from its ``SHARE_COLUMNS`` (plain values: no model instance)."""
        return cls(
            node=("program", program_id) if program_id else ("project", project_id),
            percent=percent,
            valid_from=valid_from,
            valid_to=valid_to,
            order=(0, pk),
        )


# The columns of an ``Allocation`` that ``ShareRow.from_values`` takes, in its order.
SHARE_COLUMNS = ("id", "program_id", "project_id", "percent", "valid_from", "valid_to")


def node_key(node: Program | Project) -> tuple[str, int]:
    """A hashable key of a program or project that cannot confuse the two kinds."""
    return ("program" if isinstance(node, Program) else "project", node.pk)


def pick_shares(rows: Iterable[ShareRow], at: datetime) -> dict[tuple[str, int], Decimal]:
    """The share of every node named in ``rows`` at ``at`` (nodes with no covering row omitted)."""
    best: dict[tuple[str, int], ShareRow] = {}
    for row in rows:
        if not row.covers(at):
            continue
        current = best.get(row.node)
        if current is None or (row.valid_from, row.order) > (current.valid_from, current.order):
            best[row.node] = row
    return {key: row.percent for key, row in best.items()}


def share_rows(*, cluster: Cluster) -> list[ShareRow]:
    """Every stored share row of ``cluster``, as the effective-dating rule sees them. One
    query; ``pick_shares(rows, t)`` is then ``shares_at`` at any instant t without another."""
    return [
        ShareRow.from_values(*values)
        for values in Allocation.objects.filter(cluster=cluster).values_list(*SHARE_COLUMNS)
    ]


def _node_filter(node: Program | Project) -> Q:
    return Q(program=node) if isinstance(node, Program) else Q(project=node)


def share_at(*, node: Program | Project, cluster: Cluster, at: datetime | None = None) -> Decimal:
    """The percent of its parent that ``node`` holds on ``cluster`` at ``at`` (default now).

    0 when no allocation applies. One query.
    """
    at = at or timezone.now()
    row = (
        Allocation.objects.filter(_node_filter(node), cluster=cluster, valid_from__lte=at)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=at))
        .order_by("-valid_from", "-id")
        .values_list("percent", flat=True)
        .first()
    )
    return row if row is not None else ZERO


def shares_at(*, cluster: Cluster, at: datetime | None = None) -> dict[tuple[str, int], Decimal]:
    """The share of every program and project on ``cluster`` at ``at``, keyed by ``node_key``.

    Nodes with no applicable allocation are absent (they hold 0 %). One query.
    """
    at = at or timezone.now()
    rows = (
        Allocation.objects.filter(cluster=cluster, valid_from__lte=at)
        .filter(Q(valid_to__isnull=True) | Q(valid_to__gt=at))
        .values_list(*SHARE_COLUMNS)
    )  # plain rows: the live cycle and the fair-share page read this for every node
    return pick_shares((ShareRow.from_values(*values) for values in rows), at)


def children_of(*, parent: Organization | Program) -> list[Program | Project]:
    """The programs of an organization or the projects of a program, by name."""
    if isinstance(parent, Organization):
        return list(parent.programs.all())
    return list(parent.projects.all())


def children_shares(
    *, parent: Organization | Program, cluster: Cluster, at: datetime | None = None
) -> list[tuple[Program | Project, Decimal]]:
    """Every child of ``parent`` with its share on ``cluster`` at ``at`` (for the split editor)."""
    shares = shares_at(cluster=cluster, at=at)
    return [(child, shares.get(node_key(child), ZERO)) for child in children_of(parent=parent)]


def allocation_history(
    *, node: Program | Project, cluster: Cluster | None = None
) -> QuerySet[Allocation]:
    """Every allocation row of ``node`` (on ``cluster`` if given), newest first.

    Newest means most recently recorded: the order in which people changed things. Rows carry
    ``set_by``, ``cluster`` and ``approval_request`` already joined.
    """
    rows = Allocation.objects.filter(_node_filter(node))
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    return rows.select_related("set_by", "cluster", "approval_request").order_by(
        "-created_at", "-id"
    )


@dataclass
class TreeNode:
    """One node of the tree as a page or the API shows it.

    ``share`` is percent of the parent, ``effective_share`` percent of the whole cluster (the
    product of shares from the root). ``unallocated`` is the parent's rest (100 - the sum of its
    children's shares); it is ``None`` for projects and for parents whose children the viewer
    cannot all see (a PI sees their program but not their siblings' shares). ``managers`` are
    the users who decide about this node's children: org admins of an organization, program
    managers of a program, PIs of a project.
    """

    kind: str
    obj: Organization | Program | Project
    share: Decimal
    effective_share: Decimal
    gpus_entitled: float
    unallocated: Decimal | None = None
    managers: list = field(default_factory=list)
    children: list[TreeNode] = field(default_factory=list)


def _managers_by_node(organization: Organization) -> dict[tuple[str, int], list]:
    """Users holding the managing role of every node of ``organization``'s tree."""
    assignments = RoleAssignment.objects.filter(
        Q(role=Role.ORG_ADMIN, organization=organization)
        | Q(role=Role.PROGRAM_MANAGER, program__organization=organization)
        | Q(role=Role.PI, project__program__organization=organization)
    ).select_related("user")
    found: dict[tuple[str, int], list] = {}
    for a in assignments.order_by("user__username"):
        if a.organization_id:
            key = ("organization", a.organization_id)
        elif a.program_id:
            key = ("program", a.program_id)
        else:
            key = ("project", a.project_id)
        found.setdefault(key, []).append(a.user)
    return found


def tree_for(*, visibility, cluster: Cluster, at: datetime | None = None) -> TreeNode:
    """The visible part of the tree of ``cluster``'s organization, with shares as of ``at``.

    ``at`` defaults to now. The caller resolves ``cluster`` through ``visibility.clusters()``
    first (a 404 for clusters the user cannot see); an invisible organization raises
    ``PermissionDenied`` here as a second line of defence. A handful of queries, independent of
    the size of the tree.
    """
    from django.core.exceptions import PermissionDenied

    organization = cluster.organization
    if not visibility.organizations().filter(pk=organization.pk).exists():
        raise PermissionDenied("You cannot see this organization.")
    shares = shares_at(cluster=cluster, at=at)
    managers = _managers_by_node(organization)
    total_gpus = cluster.total_gpus

    all_programs = list(organization.programs.all())
    all_projects = list(Project.objects.filter(program__organization=organization))
    visible_programs = set(visibility.programs().values_list("id", flat=True))
    visible_projects = set(visibility.projects().values_list("id", flat=True))

    def make(kind: str, obj, share: Decimal, parent_effective: Decimal) -> TreeNode:
        effective = parent_effective * share / HUNDRED
        return TreeNode(
            kind=kind,
            obj=obj,
            share=share,
            effective_share=effective,
            gpus_entitled=float(effective / HUNDRED * total_gpus),
            managers=managers.get((kind, obj.pk), []),
        )

    def rest(children: list, visible: set[int]) -> Decimal | None:
        if any(child.pk not in visible for child in children):
            return None
        return HUNDRED - sum((shares.get(node_key(c), ZERO) for c in children), ZERO)

    root = make("organization", organization, HUNDRED, HUNDRED)
    root.unallocated = rest(all_programs, visible_programs)
    for program in all_programs:
        if program.pk not in visible_programs:
            continue
        program_node = make("program", program, shares.get(node_key(program), ZERO), HUNDRED)
        projects = [p for p in all_projects if p.program_id == program.pk]
        program_node.unallocated = rest(projects, visible_projects)
        for project in projects:
            if project.pk not in visible_projects:
                continue
            program_node.children.append(
                make(
                    "project",
                    project,
                    shares.get(node_key(project), ZERO),
                    program_node.effective_share,
                )
            )
        root.children.append(program_node)
    return root
