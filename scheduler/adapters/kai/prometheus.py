"""A small client for Prometheus' range queries (``GET /api/v1/query_range``), standard library only.

Only what the KAI usage import needs: one PromQL expression over ``[start, end]`` at a fixed
step, split into requests of at most ``MAX_POINTS`` points per series (Prometheus refuses
more than 11,000), the matrix parsed into plain values. Every failure — unreachable server,
HTTP error, a Prometheus ``"status": "error"``, a body that is not the documented format — is
a ``PrometheusError`` whose message names the URL and what went wrong.
"""

from __future__ import annotations

import contextlib
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

MAX_POINTS = 10_000
TIMEOUT_SECONDS = 30


class PrometheusError(RuntimeError):
    """Prometheus could not be queried or answered something we cannot read."""


@dataclass
class Series:
    """One time series of a range query: its labels and ``(instant, value)`` samples.

    Samples whose value is not a finite number (Prometheus writes ``"NaN"``, ``"+Inf"``) are
    dropped: they mean "unknown", and unknown is never charged.
    """

    labels: dict[str, str]
    samples: list[tuple[datetime, Decimal]] = field(default_factory=list)


def _get(url: str, params: dict, timeout: float) -> dict:
    query = urllib.parse.urlencode(params)
    full = f"{url.rstrip('/')}/api/v1/query_range?{query}"
    request = urllib.request.Request(full, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        # Prometheus answers 400/422/503 with a JSON error body: show its message.
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        raise PrometheusError(f"{url}: HTTP {exc.code}: {detail}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise PrometheusError(f"{url}: cannot reach Prometheus ({reason})") from exc
    try:
        payload = json.loads(body)
    except ValueError as exc:
        raise PrometheusError(f"{url}: the answer is not JSON") from exc
    if not isinstance(payload, dict) or payload.get("status") != "success":
        message = payload.get("error") if isinstance(payload, dict) else None
        raise PrometheusError(f"{url}: Prometheus refused the query: {message or payload!r}")
    return payload


def _parse_matrix(url: str, payload: dict) -> list[tuple[dict, list]]:
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "matrix":
        raise PrometheusError(f"{url}: expected a matrix result, got {data!r:.200}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError(f"{url}: the matrix has no result list")
    parsed = []
    for item in result:
        try:
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            values = [(float(ts), str(value)) for ts, value in item["values"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PrometheusError(f"{url}: a series is not in the documented format") from exc
        parsed.append((labels, values))
    return parsed


def prometheus_query_range(
    *,
    url: str,
    query: str,
    start: datetime,
    end: datetime,
    step_seconds: int,
    timeout: float = TIMEOUT_SECONDS,
) -> list[Series]:
    """Samples of ``query`` at ``start``, ``start + step``, … up to ``end`` (inclusive).

    Long ranges are fetched in chunks of ``MAX_POINTS`` steps and joined per label set, so
    the caller sees one series per label set, samples in time order and none twice.
    """
    if step_seconds <= 0:
        raise PrometheusError(f"step: {step_seconds} s must be positive")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        # urllib also opens file:// and ftp:// URLs; only a Prometheus server is asked.
        raise PrometheusError(f"{url!r} is not an http(s)://host[:port] URL")
    step = timedelta(seconds=step_seconds)
    by_labels: dict[tuple, Series] = {}
    chunk_start = start
    while chunk_start <= end:
        chunk_end = min(end, chunk_start + step * (MAX_POINTS - 1))
        payload = _get(
            url,
            {
                "query": query,
                "start": f"{chunk_start.timestamp():.3f}",
                "end": f"{chunk_end.timestamp():.3f}",
                "step": f"{step_seconds}s",
            },
            timeout,
        )
        for labels, values in _parse_matrix(url, payload):
            series = by_labels.setdefault(tuple(sorted(labels.items())), Series(labels))
            for ts, raw in values:
                at = datetime.fromtimestamp(ts, tz=UTC)
                if not chunk_start <= at <= chunk_end:
                    continue  # a server that returns more than asked: never count twice
                try:
                    value = Decimal(raw)
                except InvalidOperation:
                    continue
                if value.is_finite() and math.isfinite(float(value)):
                    series.samples.append((at, value))
        chunk_start = chunk_end + step
    for series in by_labels.values():
        series.samples.sort(key=lambda sample: sample[0])
    return [by_labels[key] for key in sorted(by_labels)]
