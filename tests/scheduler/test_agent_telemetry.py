"""The node agent's GPU telemetry: nvidia-smi parsing, samplers and per-run GPU-seconds.

No database, no GPU: recorded nvidia-smi outputs (tests/data/nvidia-smi/README.md names their
sources), fake command runners and a fake NVML module. Expected values are read by hand
from the recorded files and worked out by hand for the meter's timeline.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.agent.telemetry import (
    NO_TELEMETRY,
    GpuSample,
    NoTelemetry,
    NvidiaSmiSampler,
    NvmlSampler,
    RunUtilizationMeter,
    TelemetryUnavailable,
    detect_sampler,
    parse_mib,
    parse_nvidia_smi_csv,
    parse_percent,
    parse_watts,
)

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


# --- the recorded files ---------------------------------------------------------------------
def test_every_recorded_file_is_covered_and_named_in_the_readme():
    files = {p.name for p in DATA.glob("*.csv")}
    assert files == set(RECORDED)
    readme = (DATA / "README.md").read_text()
    for name in files:
        assert f"`{name}`" in readme
    assert len(files) >= 3


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_parser_reads_each_recorded_file(name):
    fields, expected = RECORDED[name]
    text = recorded(name)
    got = parse_nvidia_smi_csv(text, fields) if fields else parse_nvidia_smi_csv(text)
    assert got == expected


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_windows_line_endings_and_blank_lines_change_nothing(name):
    fields, expected = RECORDED[name]
    text = "\r\n" + recorded(name).replace("\n", "\r\n\r\n") + "\r\n"
    got = parse_nvidia_smi_csv(text, fields) if fields else parse_nvidia_smi_csv(text)
    assert got == expected


def test_headerless_output_needs_the_query_list():
    with pytest.raises(ValueError, match=r"line 1: expected 6 fields .* got 19"):
        parse_nvidia_smi_csv(recorded("geforce-rtx2080-440.64-noheader-nounits.csv"))


def test_the_agents_own_query_with_and_without_header_and_units():
    noheader_nounits = "0, GPU-aaaa, 45, 1234, 81559, 250.12\n1, GPU-bbbb, [N/A], 0, 81559, [N/A]\n"
    with_everything = (
        "index, uuid, utilization.gpu [%], memory.used [MiB], memory.total [MiB], power.draw [W]\n"
        "0, GPU-aaaa, 45 %, 1234 MiB, 81559 MiB, 250.12 W\n"
        "1, GPU-bbbb, [N/A], 0 MiB, 81559 MiB, [Not Supported]\n"
    )
    reordered = (
        "power.draw [W], memory.used [MiB], index, utilization.gpu [%]\n"
        "250.12, 1234, 0, 45\n"
        "N/A, 0, 1, Not Supported\n"
    )
    expected = [
        GpuSample("0", "GPU-aaaa", 45.0, 1234, 81559, 250.12),
        GpuSample("1", "GPU-bbbb", None, 0, 81559, None),
    ]
    assert parse_nvidia_smi_csv(noheader_nounits) == expected
    assert parse_nvidia_smi_csv(with_everything) == expected
    assert parse_nvidia_smi_csv(reordered) == [
        GpuSample("0", None, 45.0, 1234, None, 250.12),
        GpuSample("1", None, None, 0, None, None),
    ]


def test_empty_output_and_a_lone_header_give_no_samples():
    assert parse_nvidia_smi_csv("") == []
    assert parse_nvidia_smi_csv("\r\n\n") == []
    assert parse_nvidia_smi_csv("index, utilization.gpu [%]\n") == []


# --- one parser per kind of value -----------------------------------------------------------
def test_value_parsers():
    assert parse_percent("45 %") == 45.0
    assert parse_percent("100") == 100.0
    assert parse_percent("[Not Supported]") is None
    assert parse_mib("1234 MiB") == 1234
    assert parse_mib(" 0 ") == 0
    assert parse_mib("[N/A]") is None
    assert parse_watts("250.12 W") == 250.12
    assert parse_watts("N/A") is None
    for bad_percent in ("101", "-1", "45 W", "nan", "1e2", "forty"):
        with pytest.raises(ValueError):
            parse_percent(bad_percent)
    for bad_mib in ("12.5", "1234 MB", "-3", "inf"):
        with pytest.raises(ValueError):
            parse_mib(bad_mib)
    for bad_watts in ("250.12 %", "-5", "inf", "1,2"):
        with pytest.raises(ValueError):
            parse_watts(bad_watts)


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("0, GPU-a, 45, 1234, 81559, 250\n1, GPU-b, 450, 1234, 81559, 250\n", 2, "utilization.gpu"),
        ("0, GPU-a, 45, 12.5, 81559, 250\n", 1, "memory.used"),
        ("\n\n0, GPU-a, 45, 1234, 81559, 250 %\n", 3, "power.draw"),
        ("zero, GPU-a, 45, 1234, 81559, 250\n", 1, "index"),
        ("[N/A], GPU-a, 45, 1234, 81559, 250\n", 1, "index"),
        ("index, memory.total [MiB]\n0, 80 GB\n", 2, "memory.total"),
        ("0, GPU-a, 45, 1234, 81559, 250; rm -rf /\n", 1, "power.draw"),
    ],
)
def test_a_malformed_line_names_its_number_and_field(text, line, field):
    with pytest.raises(ValueError, match=rf"^line {line}: field '{field}': "):
        parse_nvidia_smi_csv(text)


@pytest.mark.parametrize(
    "text",
    [
        "0, GPU-a, 45, 1234\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        "0, GPU-a, 45, 1234, 81559, 250, extra\n",
    ],
)
def test_a_line_with_the_wrong_number_of_fields_names_its_number(text):
    with pytest.raises(ValueError, match=r"^line 1: expected 6 fields"):
        parse_nvidia_smi_csv(text)


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


# --- RunUtilizationMeter --------------------------------------------------------------------
def s(index, busy=None, mem=None, power=None):
    return GpuSample(index=index, busy_percent=busy, memory_used_mib=mem, power_watts=power)


def test_meter_hand_worked_timeline():
    meter = RunUtilizationMeter()
    meter.start_run("A", ["0", "1"], now=0.0)
    meter.start_run("C", ["3"], now=0.0)
    # t=0: GPU 2 belongs to no run yet: its reading is not B's.
    meter.add_samples(
        [s("0", 50, 1000, 100.0), s("1", 100, 2000, 200.0), s("2", 80, 500), s("3", None, 700)],
        now=0.0,
    )
    meter.start_run("B", ["2"], now=4.0)
    meter.add_samples(
        [s("0", 0, 1500, 50.0), s("1", None, 1800), s("2", 60, 900, 300.0), s("3", None, 800)],
        now=5.0,
    )
    first = meter.take(now=10.0)
    # A: 2 GPUs x 10 s = 20. GPU 0: 0.5 x 5 + 0 x 5 = 2.5; GPU 1: 1.0 x 5, then no reading.
    a = first["A"]
    assert a.period_seconds == 10.0
    assert a.allocated_gpu_seconds == 20.0
    assert a.busy_gpu_seconds == pytest.approx(7.5)
    assert a.observed_gpu_seconds == 15.0
    assert a.sample_count == 4
    assert a.max_memory_used_mib == 2000
    assert a.mean_power_watts == pytest.approx((100 + 200 + 50) / 3)
    # B: held from t=4: 6 GPU-seconds; its first reading at t=5 (0.6) holds 5 s = 3.0.
    b = first["B"]
    assert (b.period_seconds, b.allocated_gpu_seconds) == (6.0, 6.0)
    assert b.busy_gpu_seconds == pytest.approx(3.0)
    assert b.observed_gpu_seconds == 5.0
    assert (b.sample_count, b.max_memory_used_mib, b.mean_power_watts) == (1, 900, 300.0)
    # C: its GPU never gave a busy reading: no telemetry, not "idle".
    c = first["C"]
    assert c.allocated_gpu_seconds == 10.0
    assert c.busy_gpu_seconds is None
    assert c.observed_gpu_seconds == 0.0
    assert (c.sample_count, c.max_memory_used_mib, c.mean_power_watts) == (2, 800, None)

    meter.add_samples([s("0", 100), s("1", 20), s("2", None)], now=12.0)
    meter.stop_run("B", now=14.0)
    meter.stop_run("C", now=10.0)  # late news: counts as the last time seen (14)
    second = meter.take(now=15.0)
    # A over [10, 15]: GPU 0: 0 x 2 + 1.0 x 3 = 3; GPU 1: none x 2 + 0.2 x 3 = 0.6.
    assert second["A"].allocated_gpu_seconds == 10.0
    assert second["A"].busy_gpu_seconds == pytest.approx(3.6)
    assert second["A"].observed_gpu_seconds == 8.0
    assert second["A"].max_memory_used_mib is None
    # B over [10, 14]: 0.6 (from t=5) x 2 s, then no reading until it stopped.
    assert second["B"].period_seconds == 4.0
    assert second["B"].allocated_gpu_seconds == 4.0
    assert second["B"].busy_gpu_seconds == pytest.approx(1.2)
    assert second["B"].observed_gpu_seconds == 2.0
    assert second["C"].period_seconds == 4.0  # stopped at 14, not 10
    assert second["C"].busy_gpu_seconds is None

    third = meter.take(now=20.0)
    assert set(third) == {"A"}  # stopped runs are reported once, then dropped
    assert third["A"].allocated_gpu_seconds == 10.0
    assert third["A"].busy_gpu_seconds == pytest.approx(6.0)  # 1.0 x 5 + 0.2 x 5
    assert third["A"].sample_count == 0
    assert third["A"].mean_power_watts is None


def test_meter_refuses_a_gpu_held_twice_and_repeats_a_start_harmlessly():
    meter = RunUtilizationMeter()
    meter.start_run("A", ["0"], now=0.0)
    meter.start_run("A", ["0"], now=1.0)
    with pytest.raises(ValueError, match="held by run A"):
        meter.start_run("B", ["0"], now=1.0)
    with pytest.raises(ValueError, match="already holds"):
        meter.start_run("A", ["1"], now=1.0)
    assert meter.take(now=2.0)["A"].allocated_gpu_seconds == 2.0


def test_a_new_run_gets_no_credit_for_its_predecessors_reading():
    meter = RunUtilizationMeter()
    meter.start_run("old", ["0"], now=0.0)
    meter.add_samples([s("0", 100)], now=0.0)
    meter.stop_run("old", now=3.0)
    meter.start_run("new", ["0"], now=3.0)
    got = meter.take(now=5.0)
    assert got["old"].busy_gpu_seconds == pytest.approx(3.0)
    assert got["new"].allocated_gpu_seconds == 2.0
    assert got["new"].busy_gpu_seconds is None


# A timeline: per step, a time increment and what happens then.
EVENTS = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=10, allow_nan=False),
        st.one_of(
            st.tuples(st.just("start"), st.sampled_from("abc"), st.integers(1, 3)),
            st.tuples(st.just("stop"), st.sampled_from("abc"), st.just(0)),
            st.tuples(
                st.just("sample"),
                st.sampled_from(["0", "1", "2", "3", "4"]),
                st.one_of(st.none(), st.integers(0, 100)),
            ),
        ),
    ),
    max_size=40,
)


def play(meter, events, split_at=None):
    """Feed ``events``; with ``split_at``, take once after that many events. Return takes."""
    takes = []
    now = 0.0
    free = ["0", "1", "2", "3", "4"]
    held: dict[str, list[str]] = {}
    for i, (dt, (kind, key, value)) in enumerate(events):
        if i == split_at:
            takes.append(meter.take(now))
        now += dt
        if kind == "start" and key not in held and len(free) >= value:
            held[key], free = free[:value], free[value:]
            meter.start_run(key, held[key], now)
        elif kind == "stop" and key in held:
            free += held.pop(key)
            meter.stop_run(key, now)
        elif kind == "sample":
            meter.add_samples([s(key, value, 100, 5.0)], now)
    if split_at is not None and split_at >= len(events):
        takes.append(meter.take(now))
    takes.append(meter.take(now + 1.0))
    return takes


def totals(takes):
    out: dict[str, list[float]] = {}
    for take in takes:
        for run_id, u in take.items():
            row = out.setdefault(run_id, [0.0, 0.0, 0.0, 0.0, 0])
            row[0] += u.period_seconds
            row[1] += u.allocated_gpu_seconds
            row[2] += u.busy_gpu_seconds or 0.0
            row[3] += u.observed_gpu_seconds
            row[4] += u.sample_count
    return out


@settings(max_examples=200, deadline=None)
@given(events=EVENTS, split=st.integers(0, 45))
def test_meter_properties(events, split):
    whole = play(RunUtilizationMeter(), events)
    parts = play(RunUtilizationMeter(), events, split_at=split)
    for take in whole + parts:
        for u in take.values():
            busy = u.busy_gpu_seconds or 0.0
            assert 0 <= busy <= u.observed_gpu_seconds + 1e-9
            assert u.observed_gpu_seconds <= u.allocated_gpu_seconds + 1e-9
            assert (u.busy_gpu_seconds is None) == (u.observed_gpu_seconds == 0)
    one, two = totals(whole), totals(parts)
    assert one.keys() == two.keys()
    for run_id in one:
        assert two[run_id] == pytest.approx(one[run_id])


def test_nvidia_smi_sampler_with_the_real_runner_and_no_such_program(tmp_path):
    sampler = NvidiaSmiSampler(executable=str(tmp_path / "nvidia-smi"), timeout=2.0)
    assert sampler.sample() == []
    assert sampler.last_error == "could not run: No such file or directory"
