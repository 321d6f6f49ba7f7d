"""Budget changes over time against a plain model: random dated splits, requests, approvals.

Each example runs a random sequence of operations on Vision's split (Detection, Segmentation)
through the split editor (as a manager would: open it for the start day, edit, save) and
through approval requests (a PI asks, the program manager approves or the request is refused
past 100 %), then compares:
- right after each save, the tree at the split's start with what the editor showed (with the
  edits): every child, not only the edited one;
- a refused change with the stored rows before it (nothing written);
- at the end, the tree at every day boundary with a model that knows only the rule "the row
  with the latest start, then the latest save, covering the instant wins";
- the children's sum at every such instant with 100 %.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance.forms import start_of_day
from governance.models import Allocation
from governance.selectors.tree import shares_at
from governance.services.approvals import approval_approve, approval_request_create

pytestmark = pytest.mark.django_db(transaction=False)

HORIZON = 30  # days ahead that operations may start or end on


@dataclass
class Entry:
    """One row of the model: a node's percent over [start, end), saved at position ``seq``."""

    node: str
    percent: Decimal
    start: datetime
    end: datetime | None
    seq: int

    def covers(self, at: datetime) -> bool:
        return self.start <= at and (self.end is None or at < self.end)


def model_tree(entries: list[Entry], at: datetime) -> dict[str, Decimal]:
    best: dict[str, Entry] = {}
    for entry in entries:
        if entry.covers(at):
            current = best.get(entry.node)
            if current is None or (entry.start, entry.seq) > (current.start, current.seq):
                best[entry.node] = entry
    return {node: entry.percent for node, entry in best.items() if entry.percent}


percents = st.integers(min_value=0, max_value=80).map(lambda n: Decimal(n))
splits = st.fixed_dictionaries(
    {
        "kind": st.just("split"),
        "start": st.integers(min_value=0, max_value=HORIZON),
        "length": st.one_of(st.none(), st.integers(min_value=1, max_value=HORIZON)),
        "detection": st.one_of(st.none(), percents),
        "segmentation": st.one_of(st.none(), percents),
    }
)
requests = st.fixed_dictionaries(
    {
        "kind": st.just("request"),
        "start": st.integers(min_value=0, max_value=HORIZON),
        "length": st.one_of(st.none(), st.integers(min_value=1, max_value=HORIZON)),
        "detection": percents,
    }
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(st.one_of(splits, requests), min_size=1, max_size=6))
def test_the_tree_at_every_instant_is_what_was_saved(personas, operations):
    with transaction.atomic():
        _run(personas, operations)
        transaction.set_rollback(True)  # the next example starts from the personas again


def _run(personas, operations) -> None:
    run = _ModelRun.start(personas)
    for op in operations:
        if op["kind"] == "split":
            run.split(op)
        else:
            run.request(op)
    run.check_every_instant()


@dataclass
class _ModelRun:
    """One example: the manager's editor, the model's rows, and the tree read back."""

    personas: object
    today: date
    manager: Client
    url: str
    names: dict[int, str]  # project pk → its name in the model
    entries: list[Entry]
    seq: int

    @classmethod
    def start(cls, personas) -> _ModelRun:
        """The model of the rows stored before any operation, and a signed-in manager."""
        manager = Client()
        manager.force_login(personas.program_manager)
        nodes = {"Detection": personas.project_a1, "Segmentation": personas.project_a2}
        seq = 0
        entries = [
            Entry(a.node.name, a.percent, a.valid_from, a.valid_to, (seq := seq + 1))
            for a in Allocation.objects.filter(
                cluster=personas.cluster, project__program=personas.program_a
            ).order_by("id")
        ]
        return cls(
            personas=personas,
            today=timezone.localdate(),
            manager=manager,
            url=reverse("split", args=[personas.cluster.pk, "program", personas.program_a.pk]),
            names={node.pk: name for name, node in nodes.items()},
            entries=entries,
            seq=seq,
        )

    def tree(self, at: datetime) -> dict[str, Decimal]:
        shares = shares_at(cluster=self.personas.cluster, at=at)
        found = {self.names[pk]: shares.get(("project", pk), Decimal(0)) for pk in self.names}
        return {name: value for name, value in found.items() if value}

    def _window(self, op) -> tuple[date, date | None]:
        day = self.today + timedelta(days=op["start"])
        until = day + timedelta(days=op["length"]) if op["length"] else None
        return day, until

    def split(self, op) -> None:
        """Open the editor for the start day, edit, save; check the tree against it."""
        day, until = self._window(op)
        start = start_of_day(day)
        names = self.names
        before = _ids()
        query = {"valid_from": day.isoformat()} if op["start"] else {}
        page = self.manager.get(self.url, query)
        shown = {item["row"].node.pk: item["row"].current for item in page.context["table"]}
        typed = {
            pk: op[name.lower()] if op[name.lower()] is not None else shown[pk]
            for pk, name in names.items()
        }
        response = self.manager.post(
            self.url,
            {
                **{f"percent_{pk}": str(value) for pk, value in typed.items()},
                "reason": "Model test.",
                "valid_from": day.isoformat() if op["start"] else "",
                "valid_to": until.isoformat() if until else "",
                "shown_for": day.isoformat() if op["start"] else "",
            },
        )
        if response.status_code != 302:
            assert _ids() == before  # refused: nothing written
            return
        at = start if op["start"] else _created(before)
        # The editor's promise: from its start, every child is what it showed.
        expected = {names[pk]: value for pk, value in typed.items() if value}
        assert self.tree(at) == expected
        self.seq = _record_new(self.entries, before, names, self.seq)
        written = {names[a.project_id] for a in Allocation.objects.exclude(id__in=before)}
        if until:
            assert written == {n for n, v in expected.items()} | {
                names[pk] for pk, v in shown.items() if v
            }
        else:
            assert written == {names[pk] for pk in typed if typed[pk] != shown[pk]}

    def request(self, op) -> None:
        """The PI asks for Detection's new percent and the manager approves (or it is refused)."""
        personas = self.personas
        day, until = self._window(op)
        start = start_of_day(day)
        before = _ids()
        try:
            request = approval_request_create(
                actor=personas.pi,
                parent=personas.program_a,
                cluster=personas.cluster,
                percents={personas.project_a1: op["detection"]},
                reason="Model test.",
                effective_from=start if op["start"] else None,
                effective_to=start_of_day(until) if until else None,
            )
            approval_approve(actor=personas.program_manager, approval_request=request)
        except ValidationError:
            assert _ids() == before  # refused: nothing written
            return
        self.seq = _record_new(self.entries, before, self.names, self.seq)

    def check_every_instant(self) -> None:
        """The tree at every day boundary and every row's edge is the model's, within 100 %."""
        entries, tree = self.entries, self.tree
        instants = {start_of_day(self.today + timedelta(days=d)) for d in range(2 * HORIZON + 2)}
        instants |= {e.start for e in entries} | {e.end for e in entries if e.end}
        for at in sorted(instants):
            if at < entries[0].start:
                continue
            assert tree(at) == model_tree(entries, at), at
            assert sum(tree(at).values(), Decimal(0)) <= 100, at


def _ids() -> list[int]:
    return list(Allocation.objects.order_by("id").values_list("id", flat=True))


def _record_new(entries: list[Entry], before: list[int], names: dict, seq: int) -> int:
    """Add the rows stored since ``before`` to the model, in save order; the last seq."""
    for allocation in Allocation.objects.exclude(id__in=before).order_by("id"):
        seq += 1
        entries.append(
            Entry(
                names[allocation.project_id],
                allocation.percent,
                allocation.valid_from,
                allocation.valid_to,
                seq,
            )
        )
    return seq


def _created(before: list[int]) -> datetime:
    """When the rows of the save that just happened start (a save "now" starts at now)."""
    return Allocation.objects.exclude(id__in=before).order_by("id").first().valid_from
