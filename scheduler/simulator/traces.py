"""Workload traces: load, validate and sort the jobs a replay is made of.

Two formats:

- ``canonical``: CSV with header ``id,submit_time,duration_s,gpus,project,min_runtime_s,resumable``.
  ``submit_time`` is ISO 8601 (naive times are UTC) or epoch seconds; ``min_runtime_s`` and
  ``resumable`` may be empty (the replay's defaults then apply). An optional ``submitter``
  column names who submitted each job (debug jobs are ranked in bursts per submitter;
  without it, per project). An optional ``utilization`` column gives each job's mean GPU
  busy fraction (0 to 1; empty: unknown): a job below ``replay.IDLE_UTILIZATION`` holds
  idle GPUs (``docs/simulation.md``, "Utilization and idle allocations").
- ``philly``: the Microsoft Philly job table, ``timestamp,duration,num_gpus,gpu_time,cluster``;
  the project is the ``cluster`` column (the Philly virtual cluster, i.e. the team).

Either file may be gzipped (detected by its magic bytes, not its name). Rows are sorted by
submit time, ties kept in file order. Exact duplicate rows are *kept*: real logs have them and
dropping them would silently change the workload; ``Trace.duplicates`` counts them.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from scheduler.engine.names import interned

FORMATS = ("canonical", "philly")
CANONICAL_COLUMNS = (
    "id",
    "submit_time",
    "duration_s",
    "gpus",
    "project",
    "min_runtime_s",
    "resumable",
)
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}


class TraceError(ValueError):
    """A trace that cannot be replayed: names the line (1 = the header) and the reason."""

    def __init__(self, reason: str, line: int | None = None, source: str = "trace"):
        self.reason = reason
        self.line = line
        self.source = source
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {reason}")


@dataclass(slots=True)
class TraceJob:
    """One job of a trace, as read: times in seconds, ``None`` where the trace is silent.

    ``id`` is unique within a trace (a repeated canonical id gets ``@<line>`` appended);
    ``line`` is the file line it came from, for messages.
    """

    id: str
    submit_time: float
    duration: float
    gpus: int
    project: str
    min_runtime: float | None = None
    resumable: bool | None = None
    line: int = 0
    submitter: str = ""  # who submitted it, when the trace says ("": unknown)
    utilization: float | None = None  # mean GPU busy fraction, 0..1 (None: unknown)


@dataclass
class Trace:
    """The jobs of one trace file, sorted by submit time (ties in file order)."""

    jobs: list[TraceJob]
    format: str
    source: str = "trace"
    duplicates: int = 0  # rows identical to an earlier row (all fields but id): kept
    projects: list[str] = field(default_factory=list)

    def head(self, n: int) -> Trace:
        """The first ``n`` jobs by submit time, as a trace of their own."""
        jobs = self.jobs[:n]
        return Trace(
            jobs=jobs,
            format=self.format,
            source=f"{self.source} (first {len(jobs):,} jobs)",
            duplicates=self.duplicates if n >= len(self.jobs) else _count_duplicates(jobs),
            projects=sorted({j.project for j in jobs}),
        )

    @property
    def start(self) -> float:
        """Submit time of the first job (0 for an empty trace)."""
        return self.jobs[0].submit_time if self.jobs else 0.0

    @property
    def last_submit(self) -> float:
        """Submit time of the last job: the end of the *submit window*."""
        return self.jobs[-1].submit_time if self.jobs else 0.0


def load_trace(path: str | Path, fmt: str = "canonical") -> Trace:
    """Read the trace at ``path`` (plain or gzipped CSV) in format ``fmt``.

    Raises ``TraceError`` for an unknown format, a missing or unreadable file, a wrong header
    or any bad row (with its line number).
    """
    path = Path(path)
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; choose one of {', '.join(FORMATS)}")
    try:
        with open(path, "rb") as raw:
            gz = raw.read(2) == b"\x1f\x8b"
        opener = gzip.open if gz else open
        with opener(path, "rt", encoding="utf-8", newline="") as stream:
            return read_trace(stream, fmt, source=str(path))
    except OSError as exc:  # missing file, bad gzip, permission: no traceback for the user
        raise TraceError(f"cannot read: {exc.strerror or exc}", source=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise TraceError("not a UTF-8 text file", source=str(path)) from exc


def read_trace(stream: Iterable[str] | str, fmt: str = "canonical", source: str = "trace") -> Trace:
    """Parse CSV text (a string or an iterable of lines) in format ``fmt`` into a sorted Trace."""
    if isinstance(stream, str):
        stream = io.StringIO(stream)
    if fmt not in FORMATS:
        raise TraceError(f"unknown trace format {fmt!r}; choose one of {', '.join(FORMATS)}")
    reader = csv.reader(stream)
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError("empty file (no header)", line=1, source=source) from None
    except csv.Error as exc:
        raise TraceError(f"malformed CSV: {exc}", line=1, source=source) from None
    header = [h.strip().lower() for h in header]
    expected = CANONICAL_COLUMNS if fmt == "canonical" else PHILLY_COLUMNS
    required = expected if fmt == "canonical" else ("timestamp", "duration", "num_gpus", "cluster")
    missing = [c for c in required if c not in header]
    if missing:
        raise TraceError(
            f"header lacks column(s) {', '.join(missing)} for format {fmt!r} "
            f"(expected {','.join(expected)})",
            line=1,
            source=source,
        )
    index = {name: header.index(name) for name in required}
    if fmt == "canonical" and "submitter" in header:
        index["submitter"] = header.index("submitter")  # optional: who submitted each job
    if fmt == "canonical" and "utilization" in header:
        index["utilization"] = header.index("utilization")  # optional: mean GPU busy fraction
    parse_row = _canonical_row if fmt == "canonical" else _philly_row

    jobs: list[TraceJob] = []
    seen_ids: set[str] = set()
    seen_rows: set[tuple] = set()
    duplicates = 0
    line = 1
    try:
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue  # blank lines are not jobs
            if len(row) != len(header):
                raise TraceError(
                    f"expected {len(header)} fields, found {len(row)}", line=line, source=source
                )
            try:
                job = parse_row(row, index, line)
            except ValueError as exc:
                raise TraceError(str(exc), line=line, source=source) from None
            if job.id in seen_ids:
                job.id = f"{job.id}@{line}"
            seen_ids.add(job.id)
            key = (
                job.submit_time,
                job.duration,
                job.gpus,
                job.project,
                job.min_runtime,
                job.resumable,
            )
            if key in seen_rows:
                duplicates += 1
            else:
                seen_rows.add(key)
            jobs.append(job)
    except csv.Error as exc:
        raise TraceError(f"malformed CSV: {exc}", line=reader.line_num, source=source) from None
    # Stable sort: equal submit times keep their file order, so replays are deterministic.
    jobs.sort(key=lambda j: (j.submit_time, j.line))
    projects = sorted({j.project for j in jobs})
    return Trace(jobs=jobs, format=fmt, source=source, duplicates=duplicates, projects=projects)


def _count_duplicates(jobs: list[TraceJob]) -> int:
    seen = {
        (j.submit_time, j.duration, j.gpus, j.project, j.min_runtime, j.resumable) for j in jobs
    }
    return len(jobs) - len(seen)


def _required(text: str, name: str) -> str:
    """``text`` stripped, or ValueError naming the field when nothing is left."""
    value = text.strip()
    if not value:
        raise ValueError(f"{name} is empty")
    return value


def parse_number(text: str, name: str) -> float:
    """A finite float, or ValueError naming the field."""
    text = _required(text, name)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} is not a number: {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} is not a finite number: {text!r}")
    return value


def _duration(text: str, name: str) -> float:
    value = parse_number(text, name)
    if value < 0:
        raise ValueError(f"{name} is negative ({text.strip()})")
    return value


def _gpus(text: str, name: str) -> int:
    value = parse_number(text, name)
    if value != int(value) or value < 1:
        raise ValueError(f"{name} must be a whole number of GPUs ≥ 1, found {text.strip()!r}")
    return int(value)


def _project(text: str, name: str) -> str:
    # Interned: each row would otherwise carry its own copy of a team's name, and the
    # replay looks teams up by name many times a cycle.
    return interned(_required(text, name))


def parse_time(text: str, name: str) -> float:
    """Epoch seconds, or an ISO 8601 date-time (naive = UTC)."""
    text = _required(text, name)
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} is not a valid epoch time: {text!r}")
        return value
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{name} is neither ISO 8601 nor epoch seconds: {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _optional_bool(text: str, name: str) -> bool | None:
    value = text.strip().lower()
    if not value:
        return None
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name} must be true or false (or empty), found {text.strip()!r}")


def _optional_fraction(text: str, name: str) -> float | None:
    """A number from 0 to 1, or None when empty; ValueError naming the field otherwise."""
    if not text.strip():
        return None
    value = parse_number(text, name)
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{name} must be a fraction from 0 to 1 (or empty), found {text.strip()!r}"
        )
    return value


def _canonical_row(row: list[str], index: dict[str, int], line: int) -> TraceJob:
    min_runtime_text = row[index["min_runtime_s"]].strip()
    return TraceJob(
        id=_project(row[index["id"]], "id"),
        submit_time=parse_time(row[index["submit_time"]], "submit_time"),
        duration=_duration(row[index["duration_s"]], "duration_s"),
        gpus=_gpus(row[index["gpus"]], "gpus"),
        project=_project(row[index["project"]], "project"),
        min_runtime=_duration(min_runtime_text, "min_runtime_s") if min_runtime_text else None,
        resumable=_optional_bool(row[index["resumable"]], "resumable"),
        line=line,
        submitter=_submitter(row[index["submitter"]]) if "submitter" in index else "",
        utilization=_optional_fraction(row[index["utilization"]], "utilization")
        if "utilization" in index
        else None,
    )


def _submitter(text: str) -> str:
    value = text.strip()
    if len(value) > 150:
        raise ValueError(f"submitter is longer than 150 characters: {value[:20]!r}…")
    return value


def _philly_row(row: list[str], index: dict[str, int], line: int) -> TraceJob:
    return TraceJob(
        id=f"L{line}",  # Philly rows have no id: the line number is stable and unique
        submit_time=parse_time(row[index["timestamp"]], "timestamp"),
        duration=_duration(row[index["duration"]], "duration"),
        gpus=_gpus(row[index["num_gpus"]], "num_gpus"),
        project=_project(row[index["cluster"]], "cluster"),
        line=line,
    )
