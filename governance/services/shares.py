"""Rules every write of shares obeys: input validation, the parent lock, the 100 % check.

Shared by ``allocations`` (direct splits) and ``approvals`` (requested changes) so both refuse
the same input with the same messages.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from django.core.exceptions import ValidationError
from django.utils import timezone

from governance.models import Cluster, Organization, Program, Project
from governance.selectors.splits import parent_organization_id, sibling_rows, sibling_sums
from governance.selectors.tree import HUNDRED, ZERO, ShareRow

TWO_PLACES = Decimal("0.01")
# A form rendered with "now" is submitted a little later; a start that recent is taken as now
# rather than refused as rewriting history.
PAST_GRACE = timedelta(minutes=15)


class ValidChange(NamedTuple):
    """A change of shares that passed ``validate_change``: each child's new percent, in the
    order given, and the window ``[start, end)`` it applies to (``end`` None: open)."""

    items: list[tuple[Program | Project, Decimal]]
    start: datetime
    end: datetime | None


def parse_percent(value, *, label: str) -> Decimal:
    """``value`` as a Decimal percent in 0 to 100 with at most two decimals, or a ValidationError."""
    if isinstance(value, bool) or value is None:
        raise ValidationError({"percent": [f"{label}: must be a number."]})
    try:
        percent = Decimal(str(value).strip()) if not isinstance(value, Decimal) else value
    except (InvalidOperation, ValueError):
        raise ValidationError({"percent": [f"{label}: must be a number."]}) from None
    if not percent.is_finite():
        raise ValidationError({"percent": [f"{label}: must be a number."]})
    if percent < ZERO or percent > HUNDRED:
        raise ValidationError({"percent": [f"{label}: must be between 0 and 100."]})
    if percent != percent.quantize(TWO_PLACES):
        raise ValidationError({"percent": [f"{label}: use at most two decimal places."]})
    return percent.quantize(TWO_PLACES)


def is_child(node, parent: Organization | Program) -> bool:
    if isinstance(parent, Organization):
        return isinstance(node, Program) and node.organization_id == parent.pk
    return isinstance(node, Project) and node.program_id == parent.pk


def validate_change(
    *,
    parent: Organization | Program,
    cluster: Cluster,
    percents: dict,
    reason: str,
    start: datetime | None,
    end: datetime | None,
    now: datetime,
    start_field: str,
    end_field: str,
) -> ValidChange:
    """Check a requested change of children's shares; return (node, percent) pairs and window.

    Raises one ``ValidationError`` naming every offending field. ``start`` defaults to ``now``
    and may not lie in the past (history is never rewritten), except by ``PAST_GRACE``.
    """
    errors: dict[str, list[str]] = {}
    if not isinstance(parent, (Organization, Program)):
        raise ValidationError({"parent": ["Must be an organization or a program."]})
    if not isinstance(cluster, Cluster) or cluster.organization_id != parent_organization_id(
        parent
    ):
        errors.setdefault("cluster", []).append(
            f"{cluster} belongs to another organization than {parent}."
        )
    if not str(reason or "").strip():
        errors.setdefault("reason", []).append("Say why the shares change.")

    items: list[tuple[Program | Project, Decimal]] = []
    if not isinstance(percents, dict) or not percents:
        errors.setdefault("percents", []).append("Name at least one child and its percent.")
    else:
        for node, value in percents.items():
            if not is_child(node, parent):
                errors.setdefault("percents", []).append(f"{node} is not a child of {parent}.")
                continue
            try:
                items.append((node, parse_percent(value, label=str(node))))
            except ValidationError as exc:
                for field, messages in exc.message_dict.items():
                    errors.setdefault(field, []).extend(messages)

    start = start or now
    if start < now - PAST_GRACE:
        errors.setdefault(start_field, []).append(
            "Must not be in the past: approved changes never rewrite history."
        )
    elif start < now:
        start = now
    if end is not None and end <= start:
        errors.setdefault(end_field, []).append(f"Must be after {start_field}.")
    if errors:
        raise ValidationError(errors)
    return ValidChange(items, start, end)


def lock_parent(parent: Organization | Program) -> None:
    """Row-lock ``parent`` for the rest of the transaction.

    Every write that changes a sibling group takes this lock first, so two writers of the same
    group run one after the other and the second sees the first's rows in its 100 % check.
    """
    model = type(parent)
    model.objects.select_for_update().only("id").get(pk=parent.pk)


def check_siblings_fit(
    *,
    parent: Organization | Program,
    cluster: Cluster,
    new_rows: list[ShareRow],
    exclude_request_id: int | None = None,
) -> None:
    """Refuse (``ValidationError`` on ``shares``) if ``new_rows`` push siblings past 100 %.

    Call it holding ``lock_parent(parent)``. The sum is checked at every instant of the new
    rows' windows: their starts, and every start or end of any sibling row (stored, approved
    and waiting, or new) inside them — the only instants where the sum can change. So a
    temporary grant in the future that would only later meet another one is refused now.
    """
    rows = sibling_rows(parent, cluster, exclude_request_id=exclude_request_id)
    for at, total in sibling_sums(rows, new_rows):
        if total > HUNDRED:
            when = timezone.localtime(at).strftime("%Y-%m-%d %H:%M %Z")
            raise ValidationError(
                {
                    "shares": [
                        f"Children of {parent} would sum to {total:.2f} % on {cluster.name} "
                        f"from {when} (limit 100 %)."
                    ]
                }
            )
