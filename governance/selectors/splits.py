"""Reads behind every change of a split: the sibling rows in force and the sums a change makes.

A change of shares (a manager's split, an approval request being decided or applied) is a set
of new ``ShareRow``\\ s. ``sibling_rows`` is everything already decided for the same siblings:
stored rows and approved requests still waiting for their date. ``sibling_sums`` gives the sum
of the siblings' shares at every instant the change can move it; the 100 % check refuses a
change whose sum passes 100 % at any of them, and ``split_outcome`` shows a decider the shares
and sums that would result, with the same rule (``pick_shares``), so the two cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Q

from governance.choices import ApprovalState
from governance.models import Allocation, ApprovalRequest, Cluster, Organization, Program, Project
from governance.selectors.tree import ZERO, ShareRow, children_of, node_key, pick_shares


def parent_organization_id(parent: Organization | Program) -> int:
    """The organization a split's parent belongs to (itself for an organization)."""
    return parent.pk if isinstance(parent, Organization) else parent.organization_id


def request_rows(approval_request: ApprovalRequest, *, valid_from: datetime) -> list[ShareRow]:
    """The rows an approval request would add if applied with its window starting at
    ``valid_from``."""
    return [
        ShareRow(
            node=node_key(line.node),
            percent=line.percent,
            valid_from=valid_from,
            valid_to=approval_request.effective_to,
            order=(1, approval_request.pk, line.pk),
        )
        for line in approval_request.lines.select_related("program", "project")
    ]


def sibling_rows(
    parent: Organization | Program, cluster: Cluster, *, exclude_request_id: int | None = None
) -> list[ShareRow]:
    """Every share row of ``parent``'s children on ``cluster``: stored, and those of approved
    requests still waiting for their date (they already hold their place: a later change must
    fit beside them, or applying them would fail). ``exclude_request_id``: the request being
    decided, whose own rows the caller adds."""
    if isinstance(parent, Organization):
        siblings = Q(program__organization=parent)
    else:
        siblings = Q(project__program=parent)
    rows = [
        ShareRow.from_allocation(a)
        for a in Allocation.objects.filter(siblings, cluster=cluster).only(
            "id", "program_id", "project_id", "percent", "valid_from", "valid_to"
        )
    ]
    waiting = ApprovalRequest.objects.filter(
        state=ApprovalState.APPROVED,
        cluster=cluster,
        organization_id=parent_organization_id(parent),
        program=parent if isinstance(parent, Program) else None,
    ).exclude(pk=exclude_request_id)
    for approval_request in waiting:
        rows.extend(request_rows(approval_request, valid_from=approval_request.effective_from))
    return rows


def sibling_sums(rows: list[ShareRow], new_rows: list[ShareRow]) -> list[tuple[datetime, Decimal]]:
    """The siblings' sum at every instant of the new rows' windows where it can change.

    Those instants are the new rows' starts and every start or end of any row (``rows`` or
    new) inside their windows. Sorted by instant.
    """
    every = rows + new_rows
    boundaries = {r.valid_from for r in every} | {r.valid_to for r in every if r.valid_to}
    instants: set[datetime] = set()
    for new in new_rows:
        instants.add(new.valid_from)
        instants.update(
            b
            for b in boundaries
            if b > new.valid_from and (new.valid_to is None or b < new.valid_to)
        )
    return [(at, sum(pick_shares(every, at).values(), ZERO)) for at in sorted(instants)]


@dataclass(frozen=True)
class OutcomeRow:
    """One child of the split: its share at the change's start without and with the change."""

    node: Program | Project
    before: Decimal
    after: Decimal

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def delta(self) -> Decimal:
        return self.after - self.before


@dataclass(frozen=True)
class SplitOutcome:
    """What a change would make of a split: per child and in sum, at its start, and the
    highest sum at any instant of its window (``peak_at`` when it differs from the start's)."""

    at: datetime
    rows: list[OutcomeRow]
    total_before: Decimal
    total_after: Decimal
    peak: Decimal
    peak_at: datetime

    @property
    def fits(self) -> bool:
        """The change keeps the children within 100 % at every instant of its window."""
        return self.peak <= Decimal(100)

    @property
    def rest_after(self) -> Decimal:
        """What stays unallocated at the start (never below zero)."""
        return max(Decimal(100) - self.total_after, ZERO)


def split_outcome(
    *,
    parent: Organization | Program,
    cluster: Cluster,
    new_rows: list[ShareRow],
    exclude_request_id: int | None = None,
) -> SplitOutcome | None:
    """The shares and sums ``new_rows`` would give ``parent``'s children (None if no rows)."""
    if not new_rows:
        return None
    rows = sibling_rows(parent, cluster, exclude_request_id=exclude_request_id)
    at = min(r.valid_from for r in new_rows)
    before = pick_shares(rows, at)
    after = pick_shares(rows + new_rows, at)
    outcome = [
        OutcomeRow(
            node=child,
            before=before.get(node_key(child), ZERO),
            after=after.get(node_key(child), ZERO),
        )
        for child in children_of(parent=parent)
    ]
    sums = sibling_sums(rows, new_rows)
    peak_at, peak = max(sums, key=lambda s: (s[1], -s[0].timestamp()))
    return SplitOutcome(
        at=at,
        rows=outcome,
        total_before=sum(before.values(), ZERO),
        total_after=sum(after.values(), ZERO),
        peak=peak,
        peak_at=peak_at,
    )
