"""Where the agent reads its GPUs from: NVML through ``pynvml`` (``NvmlSampler``),
``nvidia-smi`` on the PATH (``NvidiaSmiSampler``), or nothing (``NoTelemetry``), tried in
this order by ``detect_sampler()``."""

from __future__ import annotations

import contextlib
import importlib
import logging
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from scheduler.agent.telemetry.samples import QUERY_FIELDS, GpuSample, parse_nvidia_smi_csv

logger = logging.getLogger(__name__)

NO_TELEMETRY = "no GPU telemetry"
MIB = 1024 * 1024


class TelemetryUnavailable(RuntimeError):
    """A telemetry source cannot be used on this machine (the message says why)."""


# --- parsing nvidia-smi --query-gpu --format=csv ----------------------------------------------


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
