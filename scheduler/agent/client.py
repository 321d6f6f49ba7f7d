"""HTTP client for the node agent API (standard library only: the agent needs no Django).

Every call sends ``Authorization: Token <agent token>``. Failures come back as two kinds:
``TransientError`` (server unreachable, timeouts, 5xx, 429) — retry later, with backoff —
and ``RequestRefused`` (any other 4xx) — retrying the same request will not help.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

API_PREFIX = "/api/agent"


class AgentAPIError(Exception):
    """A call to the agent API did not succeed."""

    def __init__(self, message: str, status: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class TransientError(AgentAPIError):
    """The server could not be reached or answered 5xx/429: try again later."""


class RequestRefused(AgentAPIError):
    """The server refused the request (4xx): the same request will be refused again."""


class AgentClient:
    """The agent's view of the server: register, heartbeat, orders, acknowledgements, exits."""

    def __init__(self, server: str, token: str, *, timeout: float = 10.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    # --- the protocol (see docs/agents.md) -----------------------------------------------
    def register(self, *, node: str, gpus: int, gpu_indices: list[str], version: str) -> dict:
        """Announce this agent; the server ends runs it believed were on this node."""
        return self._call(
            "POST",
            "/register/",
            {"node": node, "gpus": gpus, "gpu_indices": gpu_indices, "version": version},
        )

    def heartbeat(self, *, running: list[str]) -> dict:
        """Tell the server this agent is alive and which start orders it is running."""
        return self._call("POST", "/heartbeat/", {"running": running})

    def fetch_orders(self) -> list[dict]:
        """Orders for this node not yet acknowledged (the server marks them delivered)."""
        return self._call("POST", "/orders/fetch/", {})["orders"]

    def acknowledge(self, order_id: str | int, *, status: str, message: str = "") -> dict:
        """Acknowledge an order: ``started``, ``stopped`` or ``rejected``. Idempotent."""
        return self._call(
            "POST", f"/orders/{order_id}/ack/", {"status": status, "message": message}
        )

    def report_exit(
        self,
        run_id: str | int,
        *,
        outcome: str,
        exit_code: int | None,
        message: str = "",
    ) -> dict:
        """Report how this node's process of a run ended. Idempotent."""
        return self._call(
            "POST",
            f"/runs/{run_id}/exit/",
            {"outcome": outcome, "exit_code": exit_code, "message": message},
        )

    def report_utilization(self, reports: list[dict]) -> dict:
        """Store periods of GPU use of this node's runs (at most 1,000; all or none)."""
        return self._call("POST", "/utilization/", {"reports": reports})

    # --- transport -----------------------------------------------------------------------
    def _call(self, method: str, path: str, payload: Mapping | None) -> Any:
        url = f"{self.server}{API_PREFIX}{path}"
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            url,
            data=data,
            method=method,
            headers={
                "Authorization": f"Token {self.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            body = _decode(exc.read())
            text = f"{method} {path}: HTTP {exc.code} {_summary(body)}"
            if exc.code >= 500 or exc.code == 429:
                raise TransientError(text, exc.code, body) from None
            raise RequestRefused(text, exc.code, body) from None
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out
            reason = getattr(exc, "reason", exc)
            raise TransientError(f"{method} {path}: {reason}") from None
        return _decode(body) if body else {}


def _decode(body: bytes) -> Any:
    try:
        return json.loads(body.decode() or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {"detail": body[:200].decode(errors="replace")}


def _summary(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("detail") or body.get("errors") or body)[:300]
    return str(body)[:300]
