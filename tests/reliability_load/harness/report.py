"""The run's figures: per endpoint and per fault from locust's request log, the markdown
summary table, and whether a correctness check failed."""

from __future__ import annotations

import csv
import os
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

RECOVERY_KEYS = [
    "worker_restarted_s", "redis_up_s", "postgres_up_s", "node_marked_down_s",
    "agent_restarted_s", "node_healthy_again_s", "submits_ok_again_s",
    "cycle_h100_s", "cycle_lab_s", "order_acknowledged_s",
    "order_acknowledged_on_node_s",
]  # fmt: skip


class Request(NamedTuple):
    """One request locust made (a row of ``requests.csv``)."""

    start: float  # epoch seconds
    name: str
    ms: float
    status: int  # 0: no response
    error: str


@dataclass
class RunFacts:
    """What the summary says about the run besides the figures."""

    mode: str
    users: int
    gunicorn_workers: int
    began: float
    ended: float
    cpu: dict[str, float] | None


def in_window(start: float, ms: float, window_start: float, window_end: float) -> bool:
    """Did a request that began at ``start`` (epoch seconds) and took ``ms`` overlap the fault
    window? A request in flight when the fault began counts, not only one begun inside it."""
    return start <= window_end and start + ms / 1000.0 >= window_start


def read_requests(path: Path) -> list[Request]:
    """The requests locust logged, in order."""
    with open(path, newline="") as f:
        return [
            Request(float(row["start"]), row["name"], float(row["ms"]), int(row["status"]),
                    row["error"])
            for row in csv.DictReader(f)
        ]  # fmt: skip


def _bad(r: Request) -> bool:
    return r.status >= 400 or r.status == 0 or bool(r.error)


def endpoint_stats(rows: list[Request], faults: list[dict], began: float, ended: float) -> dict:
    """Per endpoint: requests, throughput, percentiles, errors in and out of fault windows."""
    windows = [(f["start"], f["end"]) for f in faults]

    def in_fault(r: Request) -> bool:
        return any(in_window(r.start, r.ms, start, end) for start, end in windows)

    result = {}
    for name in sorted({r.name for r in rows}):
        mine = [r for r in rows if r.name == name]
        steady = [r for r in mine if not in_fault(r)]
        ms = sorted(r.ms for r in steady) or [0.0]

        def pct(q: float, values=ms) -> float:
            return round(values[min(len(values) - 1, int(q * len(values)))], 1)

        result[name] = {
            "requests": len(mine),
            "rps": round(len(mine) / (ended - began), 1),
            "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "errors_steady": sum(1 for r in steady if _bad(r)),
            "requests_in_fault_windows": len(mine) - len(steady),
            "errors_in_fault_windows": sum(1 for r in mine if in_fault(r) and _bad(r)),
        }
    return result


def add_fault_window_stats(rows: list[Request], faults: list[dict]) -> None:
    """Per fault: failed requests in its window, and when submits succeeded again."""
    for fault in faults:
        window = [r for r in rows if in_window(r.start, r.ms, fault["start"], fault["end"])]
        failed = [r for r in window if _bad(r)]
        fault["requests_in_window"] = len(window)
        fault["failed_in_window"] = len(failed)
        fault["last_failure_s"] = (
            round(max(r.start for r in failed) - fault["start"], 1) if failed else None
        )
        submits = [r for r in window if r.name.startswith("submit")]
        last_fail = max((r.start for r in submits if r.status != 201), default=None)
        if last_fail is None:
            fault["submits_ok_again_s"] = 0.0
        else:
            later = [r.start for r in rows if r.name.startswith("submit") and r.status == 201
                     and r.start > last_fail]  # fmt: skip
            fault["submits_ok_again_s"] = round(min(later) - fault["start"], 1) if later else None


def _endpoint_table(facts: RunFacts, endpoints: dict) -> list[str]:
    lines = [
        f"### {facts.mode} run {datetime.fromtimestamp(facts.began, UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"{facts.users} locust clients (think time "
        f"{os.environ.get('LOAD_THINK', '0.5,2').replace(',', ' to ')} s) "
        f"for {facts.ended - facts.began:.0f} s against gunicorn "
        f"({facts.gunicorn_workers} workers x 4 threads, DEBUG=false) with a Celery "
        f"worker (2 processes) and beat, the simulated executor (h100, 32 x 8 GPUs) and "
        f"2 real node agents (lab, 2 x 4 GPUs); {os.cpu_count()} cores shared by everything "
        "(PostgreSQL, Redis, locust included).",
        "",
        "| endpoint | requests | req/s | p50 ms | p95 ms | p99 ms | errors (steady) "
        "| requests / errors in fault windows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in endpoints.items():
        lines.append(
            f"| {name} | {s['requests']} | {s['rps']} | {s['p50_ms']} | {s['p95_ms']} "
            f"| {s['p99_ms']} | {s['errors_steady']} "
            f"| {s['requests_in_fault_windows']} / {s['errors_in_fault_windows']} |"
        )
    total = sum(s["requests"] for s in endpoints.values())
    lines.append(
        f"| all | {total} | {total / (facts.ended - facts.began):.1f} | | | "
        f"| {sum(s['errors_steady'] for s in endpoints.values())} "
        f"| {sum(s['requests_in_fault_windows'] for s in endpoints.values())} / "
        f"{sum(s['errors_in_fault_windows'] for s in endpoints.values())} |"
    )
    return lines


def _cpu_line(facts: RunFacts) -> list[str]:
    if not facts.cpu:
        return []
    seconds = facts.ended - facts.began
    return [
        "",
        f"CPU seconds used by each component during the run (2 cores x {seconds:.0f} s = "
        f"{2 * seconds:.0f} available): "
        + ", ".join(f"{k} {v}" for k, v in sorted(facts.cpu.items(), key=lambda x: -x[1]))
        + ".",
    ]


def _checks_tables(checks: dict) -> list[str]:
    sub = checks.get("submits", {})
    lines = [
        "",
        f"Submits: {sub.get('submits_attempted')} sent, {sub.get('submits_acknowledged')} "
        f"acknowledged (201), {sub.get('acknowledged_found_once')} of them in the database "
        f"exactly once; missing {len(sub.get('missing', []))}, duplicated "
        f"{len(sub.get('duplicated', []))}, not acknowledged but stored "
        f"{sub.get('unacknowledged_but_stored')}.",
        "",
        "| cluster | workloads | runs | cycles (time in them) | orders acked | runs failed | runs open at end "
        "| started twice, starts off placement | ledger GPU-s | Σ runs GPU-s | balances |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for slug, c in checks.get("clusters", {}).items():
        lines.append(
            f"| {slug} | {c['workloads']} | {c['runs']} | {c['cycles']} ({c['cycle_seconds']} s, "
            f"mean {c['cycle_mean_ms']} ms, ≤ {c['cycle_max_pending']} pending, "
            f"{c.get('cycles_kept', 0)} with a kept engine) "
            f"| {c['orders_acknowledged']} | {c['runs_by_end_reason'].get('failed', 0)} "
            f"| {c['runs_open_at_end']} | {c['started_twice']}, "
            f"{c['starts_off_placement'] + c['duplicate_start_orders']} "
            f"| {float(c['ledger_gpu_seconds']):.1f} | {float(c['runs_gpu_seconds']):.1f} "
            f"| {'yes' if c['ledger_balances'] else 'NO'} |"
        )
    return lines


def _recovery_table(faults: list[dict]) -> list[str]:
    if not faults:
        return []
    lines = [
        "",
        "Seconds from the fault to each sign of recovery (— : not applicable):",
        "",
        "| fault | "
        + " | ".join(k.removesuffix("_s").replace("_", " ") for k in RECOVERY_KEYS)
        + " | requests / failed in window |",
        "|---|" + "---:|" * (len(RECOVERY_KEYS) + 1),
    ]
    for f in faults:
        cells = [
            "—" if k not in f else ("not within 90 s" if f[k] is None else f"{f[k]}")
            for k in RECOVERY_KEYS
        ]
        lines.append(
            f"| {f['fault']} | "
            + " | ".join(cells)
            + f" | {f['requests_in_window']} / {f['failed_in_window']}"
            + (f", last at {f['last_failure_s']} s" if f["last_failure_s"] else "")
            + " |"
        )
    return lines


def summary(facts: RunFacts, endpoints: dict, checks: dict, faults: list[dict]) -> str:
    """The markdown summary: endpoints, CPU, the checks, and per fault its recovery."""
    lines = [
        *_endpoint_table(facts, endpoints),
        *_cpu_line(facts),
        *_checks_tables(checks),
        *_recovery_table(faults),
    ]
    return "\n".join(lines) + "\n"


def run_failed(endpoints: dict, checks: dict) -> bool:
    """Did a correctness check fail: verify itself, an error outside the fault windows, a
    lost, duplicated or misnumbered submit, a workload started twice, an unbalanced ledger?"""
    failed = "error" in checks
    failed |= any(s["errors_steady"] for s in endpoints.values())
    sub = checks.get("submits", {})
    failed |= bool(sub.get("missing") or sub.get("duplicated") or sub.get("wrong_id"))
    for c in checks.get("clusters", {}).values():
        failed |= c["started_twice"] != "none" or not c["ledger_balances"]
        failed |= bool(c["starts_off_placement"] or c["duplicate_start_orders"])
    return failed
