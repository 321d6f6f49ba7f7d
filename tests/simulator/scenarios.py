"""Small traces shared by the simulator tests."""

from scheduler.simulator import parse_budgets, read_trace

HEADER = "id,submit_time,duration_s,gpus,project,min_runtime_s,resumable\n"
T0 = 1483228800.0  # 2017-01-01T00:00:00Z, an hour boundary


def trace(*rows: str):
    """A canonical trace from ``id,submit,duration,gpus,project,min_runtime,resumable`` rows
    whose submit time is seconds after T0."""
    lines = []
    for row in rows:
        jid, submit, rest = row.split(",", 2)
        lines.append(f"{jid},{T0 + float(submit)},{rest}\n")
    return read_trace(HEADER + "".join(lines))


def two_teams(a=50, b=50):
    """org -> A (a %), B (b %)."""
    return parse_budgets(
        {
            "name": "org",
            "share": 100,
            "children": [{"name": "A", "share": a}, {"name": "B", "share": b}],
        }
    )
