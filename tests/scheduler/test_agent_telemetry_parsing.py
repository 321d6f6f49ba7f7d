"""The node agent's GPU telemetry: parsing nvidia-smi's CSV.

No GPU: recorded nvidia-smi outputs (tests/data/nvidia-smi/README.md names their sources);
expected values are read by hand from the recorded files.
"""

from __future__ import annotations

import pytest

from scheduler.agent.telemetry import (
    GpuSample,
    parse_mib,
    parse_nvidia_smi_csv,
    parse_percent,
    parse_watts,
)
from tests.scheduler.nvidia_smi_recordings import DATA, RECORDED, recorded


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
