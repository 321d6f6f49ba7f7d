"""The engine's reason and place in the queue of each workload, as a scheduling cycle writes
them: only the ones that changed, all in one statement.

A pending workload's reason begins with where its project stands ("project used more than
its share over the window (rank 2 of 5 in program vision)"). That part changes for all of a
project's workloads at once whenever the ranking moves, so it is kept once per project
(``ProjectStanding``) and each workload stores only the rest, with
``reason_follows_standing`` set; ``Workload.reason`` puts them together.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import NamedTuple

from django.db import connection

from governance.models import Cluster
from scheduler.choices import WorkloadState
from scheduler.models import ProjectStanding, Workload
from scheduler.selectors.budget import ClusterBudget
from scheduler.services.cycle_state import CycleState
from scheduler.services.queue_keys import queue_keys_assign


class ReasonWrite(NamedTuple):
    """What a cycle writes to one workload if it is still in ``state``: the engine's reason
    (``None``: only the queue key changed), queue key, blocked since, patient until, and
    whether the reason continues the project's standing (``follows``)."""

    state: str
    reason: str | None
    queue_key: int | None
    blocked_since: datetime | None
    patient_until: datetime | None
    follows: bool = False


# workload id -> what to write to it
Reasons = dict[int, ReasonWrite]


def _update_reasons(
    rows: list[tuple[int, str, str | None, int | None, datetime | None, datetime | None, bool]],
) -> None:
    """Write (id, expected state, reason, queue key, blocked since, patient until, follows
    the standing) to workloads still in that state; a reason of None writes the queue key
    alone.

    One statement on PostgreSQL (``UPDATE … FROM jsonb_to_recordset(…)``): a cycle rewrites
    a few thousand workloads' reasons, and Django's ``bulk_update`` (a CASE per row) is
    quadratic. Rows whose queue key alone changed carry no reason text.
    """
    if not rows:
        return
    if connection.vendor == "postgresql":
        # One JSON parameter: binding thousands of array elements client-side is slower.
        payload = json.dumps(
            [
                {"id": i, "state": st, "key": k}
                if r is None
                else {
                    "id": i,
                    "state": st,
                    "said": True,
                    "reason": r,
                    "key": k,
                    "blocked": None if b is None else b.isoformat(),
                    "patient": None if pu is None else pu.isoformat(),
                    "follows": f,
                }
                for i, st, r, k, b, pu, f in rows
            ]
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"""
                UPDATE {Workload._meta.db_table} AS w
                   SET queue_key = v.key,
                       engine_reason = CASE WHEN v.said THEN v.reason ELSE w.engine_reason END,
                       blocked_since = CASE WHEN v.said THEN v.blocked ELSE w.blocked_since END,
                       patient_until = CASE WHEN v.said THEN v.patient ELSE w.patient_until END,
                       reason_follows_standing = CASE WHEN v.said THEN v.follows
                                                      ELSE w.reason_follows_standing END
                  FROM jsonb_to_recordset(%s::jsonb)
                       AS v(id bigint, state text, said boolean, reason text, key bigint,
                            blocked timestamptz, patient timestamptz, follows boolean)
                 WHERE w.id = v.id AND w.state = v.state
                """,
                [payload],
            )
        return
    for workload_id, state, reason, key, blocked, patient, follows in rows:
        fields = {"queue_key": key}
        if reason is not None:
            fields.update(
                engine_reason=reason,
                blocked_since=blocked,
                patient_until=patient,
                reason_follows_standing=follows,
            )
        Workload.objects.filter(pk=workload_id, state=state).update(**fields)


def standings_write(
    cluster: Cluster, state: CycleState, result, budget: ClusterBudget, now: datetime
) -> dict[int, str]:
    """Write where each project with pending work stands (the engine's
    ``project_phrases``) to its ``ProjectStanding``, only those that changed since
    ``state`` last wrote them (a rebuilt state writes them all), and return project id ->
    phrase for every such project."""
    phrases = result.project_phrases
    standings: dict[int, str] = {}
    for row in state.workloads.values():
        if row.state == WorkloadState.PENDING and row.project_id not in standings:
            phrase = phrases.get(budget.key(row.project_id))
            if phrase is not None:
                standings[row.project_id] = phrase
    changed = [
        ProjectStanding(cluster_id=cluster.id, project_id=pid, phrase=phrase, updated_at=now)
        for pid, phrase in standings.items()
        if state.standings.get(pid) != phrase
    ]
    if changed:
        ProjectStanding.objects.bulk_create(
            changed,
            update_conflicts=True,
            unique_fields=["cluster", "project"],
            update_fields=["phrase", "updated_at"],
        )
        state.standings.update((s.project_id, s.phrase) for s in changed)
    return standings


def pending_reasons_write(
    state: CycleState, result, reasons: Reasons, standings: dict[int, str]
) -> None:
    """Add every pending workload whose reason, queue key, blocked-since or patience changed
    to ``reasons``, write them all in one statement, and update ``state``'s rows to match (the
    kept records, ``cycle_kept``: the next cycle compares with what was written).
    ``standings`` (project id -> phrase, ``standings_write``) is the part of the reasons kept
    once per project: a reason that begins with its project's stores only the rest.

    Queue keys change only where the order did (``queue_keys``): most cycles start a few
    workloads and queue a few new ones, and every other key still sorts right.
    """
    said, blocked_at, patient_at = result.reasons, result.blocked_since, result.patient_until
    pending = WorkloadState.PENDING
    # project id -> the words its workloads' reasons begin with, and the "; " after them
    leads = {project_id: f"{phrase}; " for project_id, phrase in standings.items()}
    rows = state.workloads
    ordered = []
    for workload_id in map(int, result.order):
        row = rows.get(workload_id)
        if row is not None and row.state == pending and workload_id not in reasons:
            ordered.append(workload_id)
    new_keys = queue_keys_assign(ordered, {w: rows[w].queue_key for w in ordered})
    placed = set(ordered)
    # Thousands of rows a cycle: no call per row but for the few blocked or patient ones.
    for row in rows.values():
        if row.state != pending or row.id in reasons:
            continue
        key = str(row.id)
        reason = said.get(key, "")
        lead = leads.get(row.project_id)
        follows = lead is not None and reason.startswith(lead)
        if follows:
            reason = reason[len(lead) :]
        queue_key = new_keys.get(row.id, row.queue_key) if row.id in placed else None
        b, p = blocked_at.get(key), patient_at.get(key)
        blocked = None if b is None else datetime.fromtimestamp(b, tz=UTC)
        patient = None if p is None else datetime.fromtimestamp(p, tz=UTC)
        if (
            reason != row.engine_reason
            or follows != row.reason_follows_standing
            or blocked != row.blocked_since
            or patient != row.patient_until
        ):
            reasons[row.id] = ReasonWrite(pending, reason, queue_key, blocked, patient, follows)
            row.engine_reason, row.queue_key = reason, queue_key
            row.reason_follows_standing = follows
            row.blocked_since, row.patient_until = blocked, patient
        elif queue_key != row.queue_key:
            reasons[row.id] = ReasonWrite(pending, None, queue_key, None, None)
            row.queue_key = queue_key
    _update_reasons([(wid, *values) for wid, values in reasons.items()])
