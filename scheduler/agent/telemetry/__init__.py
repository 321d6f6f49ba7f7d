"""GPU telemetry for the node agent: sample each GPU, and sum readings per run.

Three sources, tried in this order by ``detect_sampler()``: NVML through ``pynvml`` (the
``nvidia-ml-py`` package), ``nvidia-smi --query-gpu`` on the PATH, and nothing
(``NoTelemetry``: "no GPU telemetry"). A value the GPU does not report is ``None``, never a
guessed number: an unmeasured run must not look idle. ``RunUtilizationMeter`` turns samples
into per-run busy and allocated GPU-seconds. No Django, no HTTP: the agent loop drives it.

``samples`` holds a reading and the nvidia-smi CSV parser, ``samplers`` the sources,
``meter`` the per-run sums; every name is importable from here.
"""

from scheduler.agent.telemetry.meter import RunUtilization, RunUtilizationMeter
from scheduler.agent.telemetry.samplers import (
    MIB,
    NO_TELEMETRY,
    NoTelemetry,
    NvidiaSmiSampler,
    NvmlSampler,
    Sampler,
    TelemetryUnavailable,
    detect_sampler,
)
from scheduler.agent.telemetry.samples import (
    FIELD_ALIASES,
    QUERY_FIELDS,
    GpuSample,
    parse_mib,
    parse_nvidia_smi_csv,
    parse_percent,
    parse_watts,
)

__all__ = [
    "FIELD_ALIASES",
    "MIB",
    "NO_TELEMETRY",
    "QUERY_FIELDS",
    "GpuSample",
    "NoTelemetry",
    "NvidiaSmiSampler",
    "NvmlSampler",
    "RunUtilization",
    "RunUtilizationMeter",
    "Sampler",
    "TelemetryUnavailable",
    "detect_sampler",
    "parse_mib",
    "parse_nvidia_smi_csv",
    "parse_percent",
    "parse_watts",
]
