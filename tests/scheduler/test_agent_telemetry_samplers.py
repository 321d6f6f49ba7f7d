"""The node agent's GPU telemetry: the samplers (nvidia-smi, NVML) and their detection.

No GPU: recorded nvidia-smi outputs, fake command runners and a fake NVML module.
"""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

import pytest

from scheduler.agent.telemetry import (
    NO_TELEMETRY,
    GpuSample,
    NoTelemetry,
    NvidiaSmiSampler,
    NvmlSampler,
    TelemetryUnavailable,
    detect_sampler,
)
from tests.scheduler.nvidia_smi_recordings import RECORDED, recorded


# --- samplers -------------------------------------------------------------------------------
def test_no_telemetry_says_so_and_reports_nothing():
    sampler = NoTelemetry()
    assert sampler.status == "no GPU telemetry" == NO_TELEMETRY
    assert sampler.sample() == []


def fake_runner(stdout: str = "", returncode: int = 0, stderr: str = "", calls=None):
    def run(argv, timeout):
        if calls is not None:
            calls.append((list(argv), timeout))
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)

    return run


def test_nvidia_smi_sampler_parses_what_the_command_prints():
    calls = []
    sampler = NvidiaSmiSampler(
        executable="/usr/bin/nvidia-smi",
        timeout=3.0,
        runner=fake_runner(recorded("geforce-1080ti-1060-header-units.csv"), calls=calls),
    )
    assert sampler.sample() == RECORDED["geforce-1080ti-1060-header-units.csv"][1]
    assert sampler.last_error == ""
    assert sampler.status == "nvidia-smi (/usr/bin/nvidia-smi)"
    argv, timeout = calls[0]
    assert timeout == 3.0
    assert argv == [
        "/usr/bin/nvidia-smi",
        "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total,power.draw",
        "--format=csv,nounits",
    ]


def test_nvidia_smi_sampler_on_a_timeout_reports_the_failure_and_no_numbers():
    def hangs(argv, timeout):
        raise subprocess.TimeoutExpired(argv, timeout)

    sampler = NvidiaSmiSampler(timeout=2.0, runner=hangs)
    assert sampler.sample() == []
    assert sampler.last_error == "timed out after 2 s"
    assert sampler.status == "nvidia-smi (nvidia-smi): timed out after 2 s"


def test_nvidia_smi_sampler_on_a_failing_exit_keeps_its_message():
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    sampler = NvidiaSmiSampler(runner=fake_runner(said, returncode=9))
    assert sampler.sample() == []
    assert sampler.last_error == f"exit code 9: {said.strip()}"
    # The next good read clears the error.
    sampler.runner = fake_runner("0, GPU-a, 45, 1, 2, 3\n")
    assert sampler.sample() == [GpuSample("0", "GPU-a", 45.0, 1, 2, 3.0)]
    assert sampler.last_error == ""


def test_nvidia_smi_sampler_on_a_missing_program_or_garbage_output():
    def missing(argv, timeout):
        raise FileNotFoundError(2, "No such file or directory")

    sampler = NvidiaSmiSampler(runner=missing)
    assert sampler.sample() == []
    assert sampler.last_error == "could not run: No such file or directory"
    sampler.runner = fake_runner("index, utilization.gpu [%]\n0, lots\n")
    assert sampler.sample() == []
    assert sampler.last_error.startswith("unreadable output: line 2: field 'utilization.gpu'")
    sampler.runner = fake_runner("", returncode=6)
    assert sampler.sample() == []
    assert sampler.last_error == "exit code 6"


def test_nvml_is_unavailable_here_so_detection_falls_back_to_no_telemetry():
    try:
        NvmlSampler.open().close()
    except TelemetryUnavailable as exc:
        assert str(exc).startswith("NVML: ")
    else:
        pytest.skip("this machine has a working NVIDIA driver")
    sampler, status = detect_sampler(which=lambda name: None)
    assert isinstance(sampler, NoTelemetry)
    assert status == "no GPU telemetry"
    assert sampler.sample() == []
    assert sampler.reasons[0].startswith("NVML: ")
    assert sampler.reasons[1] == "nvidia-smi: not on the PATH"


def test_detection_uses_nvidia_smi_when_nvml_cannot_start():
    text = recorded("geforce-1080ti-1060-header-units.csv")
    sampler, status = detect_sampler(
        nvml=FakeNvml(init_error="Driver Not Loaded"),
        which=lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None,
        runner=fake_runner(text),
    )
    assert isinstance(sampler, NvidiaSmiSampler)
    assert status == "nvidia-smi (/usr/bin/nvidia-smi): 2 GPU(s)"


def test_detection_passes_over_an_nvidia_smi_that_cannot_reach_a_driver():
    said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    sampler, status = detect_sampler(
        nvml=FakeNvml(init_error="Driver Not Loaded"),
        which=lambda name: "/usr/bin/nvidia-smi",
        runner=fake_runner(said, returncode=9),
    )
    assert isinstance(sampler, NoTelemetry)
    assert status == NO_TELEMETRY
    assert sampler.reasons == ("NVML: Driver Not Loaded", f"nvidia-smi: exit code 9: {said}")


# A stand-in for pynvml with the same names, exceptions and units (bytes, milliwatts).
class FakeNvml:
    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # pynvml's own name
        pass

    def __init__(self, devices=(), init_error: str | None = None):
        self.devices = list(devices)
        self.init_error = init_error
        self.shut = False

    def nvmlInit(self):
        if self.init_error:
            raise self.NVMLError(self.init_error)

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return b"550.90.07"

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.devices[i]

    def _read(self, handle, key):
        value = handle[key]
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlDeviceGetUUID(self, handle):
        return self._read(handle, "uuid")

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self._read(handle, "gpu"), memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle):
        used, total = self._read(handle, "memory")
        return SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._read(handle, "milliwatts")


def test_nvml_sampler_converts_units_and_leaves_unsupported_values_out():
    nvml = FakeNvml(
        devices=[
            {
                "uuid": "GPU-h100",
                "gpu": 97,
                "memory": (72790 * 1024 * 1024 + 5, 81559 * 1024 * 1024),
                "milliwatts": 145250,
            },
            {
                "uuid": b"GPU-gb10",
                "gpu": 12,
                "memory": FakeNvml.NVMLError_NotSupported(),
                "milliwatts": FakeNvml.NVMLError_NotSupported(),
            },
        ]
    )
    sampler = NvmlSampler.open(nvml)
    assert sampler.status == "NVML (driver 550.90.07)"
    assert sampler.sample() == [
        GpuSample("0", "GPU-h100", 97.0, 72790, 81559, 145.25),
        GpuSample("1", "GPU-gb10", 12.0, None, None, None),
    ]
    sampler.close()
    assert nvml.shut


def test_nvml_sampler_on_a_lost_gpu_reports_the_error_and_no_numbers():
    nvml = FakeNvml(
        devices=[{"uuid": "GPU-a", "gpu": FakeNvml.NVMLError("GPU is lost"), "memory": (0, 1)}]
    )
    sampler = NvmlSampler.open(nvml)
    assert sampler.sample() == []
    assert sampler.last_error == "GPU is lost"
    assert sampler.status == "NVML (driver 550.90.07): GPU is lost"


def test_detection_prefers_nvml():
    nvml = FakeNvml(devices=[{"uuid": "GPU-a", "gpu": 5, "memory": (0, 1), "milliwatts": 1}])
    sampler, status = detect_sampler(nvml=nvml, which=lambda name: "/usr/bin/nvidia-smi")
    assert isinstance(sampler, NvmlSampler)
    assert status == "NVML (driver 550.90.07): 1 GPU(s)"


def test_nvidia_smi_sampler_with_the_real_runner_and_no_such_program(tmp_path):
    sampler = NvidiaSmiSampler(executable=str(tmp_path / "nvidia-smi"), timeout=2.0)
    assert sampler.sample() == []
    assert sampler.last_error == "could not run: No such file or directory"
