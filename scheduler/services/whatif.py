"""What-if runs before a budget change: validate the proposal, reuse a run of the same pair,
run it in the background with its progress (``scheduler.selectors.whatif`` replays).

A proposal is a split of one node's children on one cluster — the split editor's and an
approval request's shape: ``parent`` (an organization or a program) and ``percents``
(child → percent of the parent). It is checked like a split (each percent from 0 to 100 with at most
two decimals, each node a child of the parent, the children's shares together at most
100 % with the proposal laid over today's), never saved as one. Who may ask: someone who may
change or request a change of those children (the split editor's rule: a manager of the
parent, a PI for their project), or who decides or made the approval request it previews
(finance readers never write, not even a preview).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from datetime import UTC, datetime
from decimal import Decimal

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from governance.models import ApprovalRequest, Cluster, Organization, Program, Project
from governance.selectors.tree import HUNDRED, node_key, shares_at
from governance.selectors.visibility import user_visibility
from governance.services.shares import is_child, parse_percent
from scheduler.models import SimulationJobState, WhatIfRun
from scheduler.selectors.whatif import DEFAULT_DAYS, MAX_DAYS, what_if
from scheduler.services.background import run_in_background

logger = logging.getLogger(__name__)

Node = Program | Project


def whatif_create(
    *,
    user,
    cluster: Cluster,
    parent: Organization | Program,
    percents: dict[Node, object],
    days: int = DEFAULT_DAYS,
    approval_request: ApprovalRequest | None = None,
    now: datetime | None = None,
) -> WhatIfRun:
    """A what-if of ``percents`` (children of ``parent`` → percent) on ``cluster`` over the
    last ``days``: the run of the same window and trees if one is queued, running or done
    this hour, else a new one, queued once the transaction commits. Raises
    ``PermissionDenied`` (may not ask) or one ``ValidationError`` naming every bad field."""
    vis = user_visibility(user=user)
    proposal = whatif_proposal_validate(cluster, parent, percents, days)
    may_change = vis.can_manage(parent) or all(vis.can_request(node) for node in percents)
    # A request's preview: for whoever decides it, and the requester. Finance reads only.
    previews = approval_request is not None and (
        approval_request.requested_by_id == user.pk or vis.can_decide(approval_request)
    )
    if not (may_change or previews):
        raise PermissionDenied(f"You may not change, or ask to change, the split of {parent}.")
    now = now or timezone.now()
    window_end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    key = _key(cluster, window_end, days, proposal)
    with transaction.atomic():
        found = (
            WhatIfRun.objects.filter(key=key)
            .exclude(state=SimulationJobState.FAILED)
            .order_by("-id")
            .first()
        )
        if found is not None:
            return found
        run = WhatIfRun.objects.create(
            created_by=user,
            cluster=cluster,
            parent_kind="program" if isinstance(parent, Program) else "organization",
            parent_id=parent.pk,
            approval_request=approval_request,
            proposal={f"{kind}-{pk}": str(percent) for (kind, pk), percent in proposal.items()},
            days=days,
            window_end=window_end,
            key=key,
            created_at=now,
            progress_note="Waiting for a worker.",
        )
        transaction.on_commit(lambda: _enqueue(run.pk), robust=True)
    return run


def whatif_proposal_validate(
    cluster: Cluster, parent: Organization | Program, percents: dict, days
) -> dict[tuple[str, int], Decimal]:
    """The proposal (children of ``parent`` → percent) as ``node_key`` → percent, checked like
    a split (the module's rule), or one ``ValidationError`` naming each bad field."""
    errors: dict[str, list[str]] = {}
    organization_id = parent.pk if isinstance(parent, Organization) else parent.organization_id
    if cluster.organization_id != organization_id:
        errors.setdefault("cluster", []).append(f"{cluster} is not a cluster of {parent}'s.")
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        errors.setdefault("days", []).append(f"A whole number of days from 1 to {MAX_DAYS}.")
    proposal: dict[tuple[str, int], Decimal] = {}
    if not isinstance(percents, dict) or not percents:
        errors.setdefault("shares", []).append("Name at least one child and its percent.")
    else:
        for node, value in percents.items():
            if not is_child(node, parent):
                errors.setdefault("shares", []).append(f"{node} is not a child of {parent}.")
                continue
            try:
                proposal[node_key(node)] = parse_percent(value, label=str(node))
            except ValidationError as exc:
                for field, messages in exc.message_dict.items():
                    errors.setdefault(field, []).extend(messages)
    if not errors:
        children = (
            parent.programs.all() if isinstance(parent, Organization) else parent.projects.all()
        )
        today = shares_at(cluster=cluster)
        total = sum(
            (proposal.get(node_key(c), today.get(node_key(c), Decimal(0))) for c in children),
            Decimal(0),
        )
        if total > HUNDRED:
            errors["shares"] = [
                f"Children of {parent} would sum to {total:.2f} % on {cluster.name} (limit 100 %)."
            ]
    if errors:
        raise ValidationError(errors)
    return proposal


def _key(cluster: Cluster, window_end: datetime, days: int, proposal: dict) -> str:
    """The name of the pair (window, trees): today's shares and the proposed ones."""
    today = shares_at(cluster=cluster, at=window_end)
    described = repr(
        (
            cluster.pk,
            window_end.isoformat(),
            days,
            sorted((k, str(v)) for k, v in today.items()),
            sorted((k, str(v)) for k, v in proposal.items()),
        )
    )
    return hashlib.sha256(described.encode()).hexdigest()


def whatif_run(*, job_id: int, now: datetime | None = None) -> WhatIfRun | None:
    """Run a queued what-if to ``done`` (or ``failed``, saying why); None if it was not
    queued (a compare-and-set claim: a redelivered task is a no-op)."""
    now = now or timezone.now()
    claimed = WhatIfRun.objects.filter(pk=job_id, state=SimulationJobState.QUEUED).update(
        state=SimulationJobState.RUNNING,
        started_at=now,
        progress_note="Reading the cluster's history and replaying it under today's tree.",
    )
    if claimed != 1:
        return None
    run = WhatIfRun.objects.select_related("cluster").get(pk=job_id)
    proposal = {_node_of(ref): Decimal(value) for ref, value in run.proposal.items()}

    def halfway() -> None:
        WhatIfRun.objects.filter(pk=job_id).update(
            progress=0.5, progress_note="Today's tree replayed; now the proposed one."
        )

    try:
        result = what_if(
            cluster=run.cluster,
            proposed=proposal,
            end=run.window_end,
            days=run.days,
            on_first_replay=halfway,
        )
    except Exception as exc:  # the run must end, and say why
        logger.exception("what-if %s failed", job_id)
        run.state, run.error = SimulationJobState.FAILED, f"The replay stopped on an error: {exc}"
        run.finished_at = timezone.now()
        run.save(update_fields=["state", "error", "finished_at"])
        return run
    run.result = _as_json(result)
    run.state, run.progress, run.progress_note = SimulationJobState.DONE, 1.0, "Done."
    run.finished_at = timezone.now()
    run.save(update_fields=["result", "state", "progress", "progress_note", "finished_at"])
    return run


def _node_of(ref: str) -> tuple[str, int]:
    kind, _, pk = ref.partition("-")
    return kind, int(pk)


def _as_json(result) -> dict:
    data = dataclasses.asdict(result)
    data["start"], data["end"] = result.start.isoformat(), result.end.isoformat()
    return data


def _enqueue(job_id: int) -> None:
    from scheduler.tasks import whatif_run as task

    run_in_background(task, whatif_run, job_id, "what-if")
