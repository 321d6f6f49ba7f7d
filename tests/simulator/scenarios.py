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


def whatif_rows(x_jobs, y_jobs) -> list[str]:
    """Rows for the what-if's monotonicity checks, from (submit, duration, GPUs) jobs of team
    X (``A``) and Y (``B``). Y also asks for the whole 16-GPU cluster from T0 on, for longer
    than anything else lasts (two 8-GPU runs of 12 h): it has pending demand throughout."""
    rows = [f"y-wall-{i},0,{12 * 3600},8,B,3600," for i in range(2)]
    rows += [f"x{i},{s},{d},{g},A,1800," for i, (s, d, g) in enumerate(x_jobs)]
    rows += [f"y{i},{s},{d},{g},B,1800," for i, (s, d, g) in enumerate(y_jobs)]
    return rows


def two_teams(a=50, b=50):
    """org -> A (a %), B (b %)."""
    return parse_budgets(
        {
            "name": "org",
            "share": 100,
            "children": [{"name": "A", "share": a}, {"name": "B", "share": b}],
        }
    )
