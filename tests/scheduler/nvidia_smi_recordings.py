"""Recorded ``nvidia-smi --query-gpu`` outputs (tests/data/nvidia-smi) and the samples read
from them by hand, shared by the agent telemetry tests."""

from __future__ import annotations

from pathlib import Path

from scheduler.agent.telemetry import GpuSample

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"

GTX770_QUERY = [
    "gpu_name",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "fan.speed",
    "pstate",
    "clocks.current.graphics",
    "clocks.current.memory",
    "power.max_limit",
    "power.default_limit",
]
RTX2080_QUERY = [
    "power.limit",
    "power.min_limit",
    "power.max_limit",
    "memory.total",
    "vbios_version",
    "driver_version",
    "name",
    "gpu_uuid",
    "power.draw",
    "temperature.gpu",
    "temperature.memory",
    "clocks.current.graphics",
    "clocks.sm",
    "clocks.mem",
    "utilization.gpu",
    "utilization.memory",
    "fan.speed",
    "pcie.link.width.current",
    "pstate",
]
TWO_GB_QUERY = [
    "memory.total",
    "memory.free",
    "memory.used",
    "temperature.gpu",
    "fan.speed",
    "utilization.gpu",
    "utilization.memory",
]

# file → (the --query-gpu list for files without a header, the samples read by hand)
RECORDED = {
    "geforce-1080ti-1060-header-units.csv": (
        None,
        [
            GpuSample("0", None, 36.0, 2856, 11175, 106.56),
            GpuSample("1", None, 0.0, 4, 6078, 5.68),
        ],
    ),
    "geforce-gtx770-noheader-not-supported.csv": (
        GTX770_QUERY,
        [GpuSample("0", None, None, None, None, None)],
    ),
    "geforce-rtx2080-440.64-noheader-nounits.csv": (
        RTX2080_QUERY,
        [GpuSample("0", "GPU-22b2c6ac-2d49-4863-197c-9c469071178a", 86.0, None, 7979, 176.98)],
    ),
    "geforce-5gpu-index-uuid.csv": (
        None,
        [
            GpuSample("0", "GPU-f3da2e71-6e43-729a-e3ae-f731ed96d50c"),
            GpuSample("1", "GPU-15ea7bf9-1a0e-2d7f-9c62-c28e5ca1aaf1"),
            GpuSample("2", "GPU-3dc4f2b0-6e1b-c088-c342-4367c334795a"),
            GpuSample("3", "GPU-03ddeff3-19c4-6676-d02d-6942bd80630d"),
            GpuSample("4", "GPU-ff3318a7-f0dd-dc57-1fb8-cc95ba35c56e"),
        ],
    ),
    "gb10-memory-na.csv": (None, [GpuSample("0", None, None, None, None, None)]),
    "geforce-gtx650-410.78-utilization-not-supported.csv": (None, [GpuSample("0")]),
    "2gb-gpu-noheader-nounits-na.csv": (TWO_GB_QUERY, [GpuSample("0", None, 0.0, 0, 2004)]),
    "2gb-gpu-noheader-nounits-not-supported.csv": (
        TWO_GB_QUERY,
        [GpuSample("0", None, 0.0, 0, 2004)],
    ),
}


def recorded(name: str) -> str:
    return (DATA / name).read_text()
