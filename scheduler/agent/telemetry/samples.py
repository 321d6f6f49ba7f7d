"""What one GPU read at one moment (``GpuSample``), and the parsing of ``nvidia-smi
--query-gpu --format=csv`` into samples. A value the GPU does not report is ``None``, never a
guessed number."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class GpuSample:
    """One reading of one GPU. ``None`` means the GPU did not report that value."""

    index: str
    uuid: str | None = None
    busy_percent: float | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    power_watts: float | None = None


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
