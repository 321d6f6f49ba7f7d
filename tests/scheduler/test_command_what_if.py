"""``manage.py what_if``: the table for a proposal file, and a clear error for a bad one."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.scheduler.test_ledger_trace import E
from tests.scheduler.test_whatif import history

pytestmark = pytest.mark.django_db


def run(tmp_path, proposal, *args) -> str:
    path = tmp_path / "proposal.json"
    path.write_text(proposal if isinstance(proposal, str) else json.dumps(proposal))
    out = StringIO()
    call_command("what_if", "--cluster", "loop-org/h100", "--proposal", str(path), *args,
                 stdout=out)  # fmt: skip
    return out.getvalue()


def body(world, x="25", y="75"):
    return {
        "parent": {"kind": "program", "id": world.program.pk},
        "shares": [
            {"node": world.projects["x"].pk, "percent": x},
            {"node": world.projects["y"].pk, "percent": y},
        ],
    }


def test_the_table_has_a_line_per_team_and_the_sentence(tmp_path):
    world = history()
    out = run(tmp_path, body(world), "--days", "3", "--end", E.isoformat())
    lines = out.splitlines()
    assert lines[0].startswith("12 workloads from ")
    assert [line.split()[0] for line in lines[3:5]] == ["X", "Y"]
    assert "Past demand is not future demand" in out
    data = json.loads(run(tmp_path, body(world), "--days", "3", "--end", E.isoformat(), "--json"))
    assert data["jobs"] == 12 and [t["name"] for t in data["teams"]] == ["X", "Y"]


@pytest.mark.parametrize(
    ("proposal", "message"),
    [
        ("{not json", "--proposal: cannot read"),
        ({"parent": {"kind": "program"}}, "--proposal: expected"),
        ("body:x=101", "percent"),
        ("body:x=60", "would sum to"),
        ("end:yesterday", "--end: not an ISO instant"),
    ],
)
def test_a_bad_proposal_is_a_command_error_naming_the_field(tmp_path, proposal, message):
    world = history()
    extra = []
    if proposal == "end:yesterday":
        proposal, extra = body(world), ["--end", "yesterday"]
    elif isinstance(proposal, str) and proposal.startswith("body:x="):
        proposal = body(world, x=proposal.removeprefix("body:x="), y="50")
    with pytest.raises(CommandError, match=message):
        run(tmp_path, proposal, *extra)


def test_an_unknown_cluster_is_named(tmp_path):
    history()
    with pytest.raises(CommandError, match="--cluster: no cluster"):
        call_command("what_if", "--cluster", "nope/h100", "--proposal", str(tmp_path / "x"))
