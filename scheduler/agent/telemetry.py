"""GPU telemetry for the node agent: sample each GPU, and sum readings per run.

Three sources, tried in this order by ``detect_sampler()``: NVML through ``pynvml`` (the
``nvidia-ml-py`` package), ``nvidia-smi --query-gpu`` on the PATH, and nothing
(``NoTelemetry``: "no GPU telemetry"). A value the GPU does not report is ``None``, never a
guessed number: an unmeasured run must not look idle. ``RunUtilizationMeter`` turns samples
into per-run busy and allocated GPU-seconds. No Django, no HTTP: the agent loop drives it.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

logger = logging.getLogger(__name__)

NO_TELEMETRY = "no GPU telemetry"

# What the agent asks nvidia-smi for, in this order.
QUERY_FIELDS = ("index", "uuid", "utilization.gpu", "memory.used", "memory.total", "power.draw")

# Other names nvidia-smi accepts in --query-gpu for the same columns (its header shows the
# canonical name, so the aliases only matter for output printed without a header).
FIELD_ALIASES = {"gpu_uuid": "uuid", "gpu_name": "name"}

# nvidia-smi prints a bracketed text where it has no value: "[N/A]", "[Not Supported]",
# "[Unknown Error]", "[Insufficient Permissions]"… Older and newer drivers differ in which one
# they print, so every bracketed cell means "no reading". The bare forms appear too.
_MISSING_BARE = {"", "N/A", "NOT SUPPORTED"}

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_HEADER_CELL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(?:\s*\[[^\]]*\])?")

MIB = 1024 * 1024


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU. ``None`` means the GPU did not report that value."""

    index: str
    uuid: str | None = None
    busy_percent: float | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    power_watts: float | None = None


class TelemetryUnavailable(RuntimeError):
    """A telemetry source cannot be used on this machine (the message says why)."""


# --- parsing nvidia-smi --query-gpu --format=csv ----------------------------------------------
def _is_missing(text: str) -> bool:
    return (text.startswith("[") and text.endswith("]")) or text.upper() in _MISSING_BARE


def _number(text: str, unit: str, what: str) -> str | None:
    """The bare number of ``text`` (unit suffix optional), or None when it is a missing mark."""
    text = text.strip()
    if _is_missing(text):
        return None
    if text.endswith(unit):
        text = text[: -len(unit)].rstrip()
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"{text!r} is not {what}")
    return text


def parse_percent(text: str) -> float | None:
    """``"45 %"`` or ``"45"`` → 45.0; a missing mark → None; outside 0-100 is an error."""
    number = _number(text, "%", "a percentage")
    if number is None:
        return None
    value = float(number)
    if value > 100:
        raise ValueError(f"{text.strip()!r} is more than 100 %")
    return value


def parse_mib(text: str) -> int | None:
    """``"1234 MiB"`` or ``"1234"`` → 1234; a missing mark → None. nvidia-smi prints whole MiB."""
    number = _number(text, "MiB", "a whole number of MiB")
    if number is None:
        return None
    if "." in number:
        raise ValueError(f"{text.strip()!r} is not a whole number of MiB")
    return int(number)


def parse_watts(text: str) -> float | None:
    """``"250.12 W"`` or ``"250.12"`` → 250.12; a missing mark → None."""
    number = _number(text, "W", "a power in watts")
    return None if number is None else float(number)


def _parse_index(text: str) -> str | None:
    text = text.strip()
    if _is_missing(text):
        return None
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a GPU index")
    # The runner's indices are "0", "1"…: the same spelling here so the two can be matched.
    return str(int(text))


def _parse_text(text: str) -> str | None:
    text = text.strip()
    return None if _is_missing(text) else text


_PARSERS: dict[str, Callable[[str], Any]] = {
    "index": _parse_index,
    "uuid": _parse_text,
    "utilization.gpu": parse_percent,
    "memory.used": parse_mib,
    "memory.total": parse_mib,
    "power.draw": parse_watts,
}
_SAMPLE_FIELD = {
    "uuid": "uuid",
    "utilization.gpu": "busy_percent",
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "power.draw": "power_watts",
}


def _column_name(cell: str) -> str:
    """``"utilization.gpu [%]"`` → ``"utilization.gpu"`` (aliases mapped to nvidia-smi's name)."""
    name = cell.split("[", 1)[0].strip()
    return FIELD_ALIASES.get(name, name)


def _is_header(cells: list[str]) -> bool:
    # A header is all field names (a value such as "45 %", "[N/A]" or "GeForce GTX 770" is
    # not) and names at least one column this module knows.
    return all(_HEADER_CELL.fullmatch(c) for c in cells) and any(
        _column_name(c) in _PARSERS for c in cells
    )


def parse_nvidia_smi_csv(text: str, fields: Sequence[str] = QUERY_FIELDS) -> list[GpuSample]:
    """Parse the output of ``nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]``.

    With a header line, columns are found by their names (``utilization.gpu [%]``), in any
    order; columns this module does not use (``name``, ``temperature.gpu``…) are skipped.
    Without one, ``fields`` names the columns in order (what was passed to ``--query-gpu``).
    Values may carry their units (``45 %``, ``1234 MiB``, ``250.12 W``) or not; ``[N/A]``,
    ``[Not Supported]`` and ``N/A`` give ``None``. Blank lines and Windows line endings are
    fine. Without an ``index`` column a GPU's index is its row's position: nvidia-smi lists
    GPUs in index order. A malformed line raises ``ValueError`` naming its line number (from
    1) and the field.
    """
    columns: list[str] | None = None
    samples: list[GpuSample] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if columns is None:
            if _is_header(cells):
                columns = [_column_name(c) for c in cells]
                continue
            columns = [FIELD_ALIASES.get(f, f) for f in fields]
        if len(cells) != len(columns):
            raise ValueError(
                f"line {number}: expected {len(columns)} fields ({', '.join(columns)}), "
                f"got {len(cells)}"
            )
        values: dict[str, Any] = {}
        for name, cell in zip(columns, cells, strict=True):
            parser = _PARSERS.get(name)
            if parser is None:
                continue
            try:
                values[name] = parser(cell)
            except ValueError as exc:
                raise ValueError(f"line {number}: field {name!r}: {exc}") from None
        index = values.pop("index", None)
        if index is None:
            if "index" in columns:
                raise ValueError(f"line {number}: field 'index': no GPU index")
            index = str(len(samples))
        samples.append(GpuSample(index=index, **{_SAMPLE_FIELD[k]: v for k, v in values.items()}))
    return samples


# --- samplers -------------------------------------------------------------------------------
class Sampler(Protocol):
    """A source of GPU readings. ``sample()`` never raises for the node's own failures."""

    status: str
    last_error: str

    def sample(self) -> list[GpuSample]:
        """Read every GPU now; an empty list when nothing could be read (see ``last_error``)."""
        ...


@dataclass
class NoTelemetry:
    """The node has no NVIDIA GPU telemetry: no readings, and the status says so."""

    reasons: tuple[str, ...] = ()
    status: str = NO_TELEMETRY
    last_error: str = ""

    def sample(self) -> list[GpuSample]:
        """No readings, ever: an empty list, never a made-up number."""
        return []


def _run_command(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class NvidiaSmiSampler:
    """Readings from ``nvidia-smi --query-gpu`` (for nodes with the tool but without NVML).

    The header is kept (``--format=csv,nounits``) so columns are matched by name, not by a
    position a future nvidia-smi might change. ``runner(argv, timeout)`` returns a
    ``CompletedProcess``; tests give a fake one.
    """

    executable: str = "nvidia-smi"
    timeout: float = 5.0
    runner: Callable[[Sequence[str], float], subprocess.CompletedProcess] = _run_command
    last_error: str = ""

    @property
    def argv(self) -> list[str]:
        """The command run at each sample."""
        return [self.executable, f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,nounits"]

    @property
    def status(self) -> str:
        """``nvidia-smi`` and its path, with the last failure if the last read failed."""
        base = f"nvidia-smi ({self.executable})"
        return f"{base}: {self.last_error}" if self.last_error else base

    def sample(self) -> list[GpuSample]:
        """Run nvidia-smi once; on a timeout, an exit code or bad output: [] and ``last_error``."""
        try:
            done = self.runner(self.argv, self.timeout)
        except subprocess.TimeoutExpired:
            return self._failed(f"timed out after {self.timeout:g} s")
        except OSError as exc:
            return self._failed(f"could not run: {exc.strerror or exc}")
        if done.returncode != 0:
            # nvidia-smi prints its reason ("couldn't communicate with the NVIDIA driver") on
            # stdout, not stderr: keep whichever has it.
            said = (done.stderr or "").strip() or (done.stdout or "").strip()
            first = said.splitlines()[0] if said else ""
            return self._failed(f"exit code {done.returncode}" + (f": {first}" if first else ""))
        try:
            samples = parse_nvidia_smi_csv(done.stdout or "")
        except ValueError as exc:
            return self._failed(f"unreadable output: {exc}")
        self.last_error = ""
        return samples

    def _failed(self, message: str) -> list[GpuSample]:
        if message != self.last_error:
            logger.warning("GPU telemetry: nvidia-smi %s", message)
        self.last_error = message
        return []


@dataclass
class NvmlSampler:
    """Readings through NVML (``pynvml``), the driver's own library: no process per sample.

    Open it with ``NvmlSampler.open()``, which raises ``TelemetryUnavailable`` where NVML
    cannot start (no driver, no GPU). A value the device does not support is None.
    """

    nvml: Any
    driver_version: str = ""
    last_error: str = ""

    @classmethod
    def open(cls, nvml: Any = None) -> NvmlSampler:
        """Import ``pynvml`` (unless a module is given) and initialise NVML."""
        if nvml is None:
            try:
                nvml = importlib.import_module("pynvml")
            except ImportError as exc:
                raise TelemetryUnavailable("NVML: pynvml (nvidia-ml-py) is not installed") from exc
        try:
            nvml.nvmlInit()
            version = nvml.nvmlSystemGetDriverVersion()
        except nvml.NVMLError as exc:
            raise TelemetryUnavailable(f"NVML: {exc}") from exc
        return cls(nvml=nvml, driver_version=_text(version))

    @property
    def status(self) -> str:
        """``NVML`` and the driver version, with the last failure if the last read failed."""
        base = f"NVML (driver {self.driver_version})"
        return f"{base}: {self.last_error}" if self.last_error else base

    def sample(self) -> list[GpuSample]:
        """Read every device; an NVML failure other than "not supported" gives [] and a reason."""
        nvml = self.nvml
        try:
            samples = []
            for i in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                utilization = self._supported(nvml.nvmlDeviceGetUtilizationRates, handle)
                memory = self._supported(nvml.nvmlDeviceGetMemoryInfo, handle)
                milliwatts = self._supported(nvml.nvmlDeviceGetPowerUsage, handle)
                samples.append(
                    GpuSample(
                        index=str(i),
                        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                        busy_percent=None if utilization is None else float(utilization.gpu),
                        memory_used_mib=None if memory is None else memory.used // MIB,
                        memory_total_mib=None if memory is None else memory.total // MIB,
                        power_watts=None if milliwatts is None else milliwatts / 1000,
                    )
                )
        except nvml.NVMLError as exc:
            if str(exc) != self.last_error:
                logger.warning("GPU telemetry: NVML %s", exc)
            self.last_error = str(exc)
            return []
        self.last_error = ""
        return samples

    def _supported(self, call: Callable[[Any], Any], handle: Any) -> Any:
        # Consumer boards and unified-memory devices leave some readings out: that one value
        # is None, the others still count.
        try:
            return call(handle)
        except self.nvml.NVMLError_NotSupported:
            return None

    def close(self) -> None:
        """Shut NVML down (the agent's exit)."""
        with contextlib.suppress(self.nvml.NVMLError):
            self.nvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes for strings.
    return value.decode() if isinstance(value, bytes) else str(value)


def detect_sampler(
    *,
    nvml: Any = None,
    which: Callable[[str], str | None] = shutil.which,
    runner: Callable[[Sequence[str], float], subprocess.CompletedProcess] | None = None,
) -> tuple[Sampler, str]:
    """Pick this node's telemetry source: NVML, else nvidia-smi on the PATH, else none.

    Returns the sampler and a human-readable status. nvidia-smi is tried once before it is
    chosen: a node with the tool installed but no working driver gets ``NoTelemetry`` (whose
    ``reasons`` say why each source was passed over), not a sampler that always fails.
    """
    reasons: list[str] = []
    try:
        sampler = NvmlSampler.open(nvml)
    except TelemetryUnavailable as exc:
        reasons.append(str(exc))
    else:
        count = len(sampler.sample())
        return sampler, f"{sampler.status}: {count} GPU(s)"
    path = which("nvidia-smi")
    if path is None:
        reasons.append("nvidia-smi: not on the PATH")
    else:
        smi = NvidiaSmiSampler(executable=path, **({"runner": runner} if runner else {}))
        samples = smi.sample()
        if samples:
            return smi, f"{smi.status}: {len(samples)} GPU(s)"
        reasons.append(f"nvidia-smi: {smi.last_error or 'no GPUs listed'}")
    logger.info("%s (%s)", NO_TELEMETRY, "; ".join(reasons))
    return NoTelemetry(reasons=tuple(reasons)), NO_TELEMETRY


# --- per-run aggregation --------------------------------------------------------------------
@dataclass(frozen=True)
class RunUtilization:
    """One run's GPU use over one period (between two ``take`` calls, or part of it).

    ``busy_gpu_seconds`` is None when no busy reading covered any of the period ("no
    telemetry"), never 0. ``observed_gpu_seconds`` is the part of ``allocated_gpu_seconds``
    a busy reading covered: busy / observed is the busy fraction of what was measured.
    """

    period_seconds: float
    allocated_gpu_seconds: float
    busy_gpu_seconds: float | None
    observed_gpu_seconds: float
    sample_count: int
    max_memory_used_mib: int | None
    mean_power_watts: float | None


@dataclass
class _RunTotals:
    seconds: float = 0.0
    allocated: float = 0.0
    busy: float = 0.0
    observed: float = 0.0
    samples: int = 0
    max_memory: int | None = None
    power_sum: float = 0.0
    power_count: int = 0


@dataclass
class RunUtilizationMeter:
    """Busy and allocated GPU-seconds per run, from the samples the agent feeds it.

    Integration rule: a GPU's busy reading holds from its sample's time until the next sample
    of that GPU (or until the run lets the GPU go). Busy GPU-seconds are the sum over the
    run's GPUs of busy fraction x seconds held. A GPU's reading is forgotten when a run
    starts on it, so a run is never credited with its predecessor's work: until its first
    sample, a GPU counts as allocated but not observed. A reading of None (the GPU did not
    report) holds in the same way and covers nothing. Periods end at ``take(now)``; a reading
    held across a ``take`` is split between the two periods, so one take or two over the
    same time give the same sums. Memory (max) and power (mean per GPU) come from the samples
    taken while the run held the GPU. Times are ``time.monotonic()`` seconds; a time earlier
    than the last one seen counts as that last one (a late sample does not rewrite a period
    already taken).
    """

    _now: float | None = None
    _gpus: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _holder: dict[str, str] = field(default_factory=dict)
    _busy: dict[str, float | None] = field(default_factory=dict)
    _totals: dict[str, _RunTotals] = field(default_factory=dict)

    def start_run(self, run_id: str, gpus: Sequence[str], now: float) -> None:
        """The run's process started on ``gpus`` at ``now``. Idempotent for the same GPUs."""
        gpus = tuple(str(g) for g in gpus)
        if run_id in self._gpus:
            if self._gpus[run_id] != gpus:
                raise ValueError(f"run {run_id} already holds GPUs {list(self._gpus[run_id])}")
            return
        taken = [g for g in gpus if g in self._holder]
        if taken:
            raise ValueError(f"GPUs {taken} are held by run {self._holder[taken[0]]}")
        self._advance(now)
        self._gpus[run_id] = gpus
        self._totals.setdefault(run_id, _RunTotals())
        for g in gpus:
            self._holder[g] = run_id
            self._busy[g] = None

    def stop_run(self, run_id: str, now: float) -> None:
        """The run's process ended at ``now``; its last part is in the next ``take``."""
        if run_id not in self._gpus:
            return
        self._advance(now)
        for g in self._gpus.pop(run_id):
            del self._holder[g]

    def add_samples(self, samples: Iterable[GpuSample], now: float) -> None:
        """Record readings taken at ``now``; GPUs no run holds are not counted."""
        self._advance(now)
        for s in samples:
            busy = s.busy_percent
            if busy is not None and not 0 <= busy <= 100:
                logger.warning("GPU %s reported busy %s %%: ignored", s.index, busy)
                busy = None
            self._busy[s.index] = None if busy is None else busy / 100
            run_id = self._holder.get(s.index)
            if run_id is None:
                continue
            totals = self._totals[run_id]
            totals.samples += 1
            if s.memory_used_mib is not None:
                totals.max_memory = max(totals.max_memory or 0, s.memory_used_mib)
            if s.power_watts is not None:
                totals.power_sum += s.power_watts
                totals.power_count += 1

    def take(self, now: float) -> dict[str, RunUtilization]:
        """Each run's use since the last take (runs stopped meanwhile included, then dropped)."""
        self._advance(now)
        out = {
            run_id: RunUtilization(
                period_seconds=t.seconds,
                allocated_gpu_seconds=t.allocated,
                busy_gpu_seconds=t.busy if t.observed > 0 else None,
                observed_gpu_seconds=t.observed,
                sample_count=t.samples,
                max_memory_used_mib=t.max_memory,
                mean_power_watts=t.power_sum / t.power_count if t.power_count else None,
            )
            for run_id, t in self._totals.items()
        }
        self._totals = {run_id: _RunTotals() for run_id in self._gpus}
        return out

    def _advance(self, now: float) -> None:
        """Credit the time since the last event to the runs, with the readings then held."""
        if self._now is None or now <= self._now:
            self._now = now if self._now is None else self._now
            return
        dt = now - self._now
        self._now = now
        for run_id, gpus in self._gpus.items():
            totals = self._totals[run_id]
            totals.seconds += dt
            totals.allocated += dt * len(gpus)
            for g in gpus:
                busy = self._busy.get(g)
                if busy is not None:
                    totals.observed += dt
                    totals.busy += busy * dt
