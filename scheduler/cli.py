"""``python -m scheduler.cli``: submit (one or a sweep), list, show and cancel workloads via the API.

A thin wrapper: the API is the contract (``/api/workloads/``, see ``/api/docs/``). The server
and token come from ``--server``/``--token`` or ``GOVERNANCE_SERVER``/``GOVERNANCE_TOKEN``;
``token`` exchanges a username and password for one. Standard library only.

    python -m scheduler.cli submit --project vision --gpus 8 --min-runtime 30m -- python train.py
    python -m scheduler.cli submit-many sweep.json
    python -m scheduler.cli list --state pending
    python -m scheduler.cli show 42
    python -m scheduler.cli cancel 42
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8000"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([hms])")


class CLIError(Exception):
    """A refusal or failure to show the user; the process exits with status 1."""


def parse_duration(text: str) -> int:
    """``"30m"``, ``"2h"``, ``"1h30m"``, ``"90s"`` or plain seconds (``"45"``) → seconds."""
    value = text.strip().lower()
    if value.isdigit():
        return int(value)
    parts = _DURATION.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 2h, 1h30m or 90s")
    factor = {"h": 3600, "m": 60, "s": 1}
    return round(sum(float(n) * factor[u] for n, u in parts))


def format_duration(seconds: float | None) -> str:
    """Seconds as ``1h30m`` (or ``—``)."""
    if seconds is None:
        return "—"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "")
    return text + (f"{secs}s" if secs or not text else "")


class APIClient:
    """Minimal JSON-over-HTTP client with token authentication."""

    def __init__(self, server: str, token: str = "", timeout: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    def request(self, method: str, path: str, payload: Any = None) -> Any:
        """Call the API; return the decoded JSON, or raise ``CLIError`` with its message."""
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(
            f"{self.server}{path}", data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise CLIError(_error_text(exc.code, exc.read())) from None
        except OSError as exc:
            raise CLIError(f"cannot reach {self.server}: {getattr(exc, 'reason', exc)}") from None
        return json.loads(body) if body else None


def _error_text(status: int, body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return f"HTTP {status}"
    lines = [f"HTTP {status}: {data.get('detail', '')}" if isinstance(data, dict) else str(data)]
    if isinstance(data, dict):
        for field, messages in (data.get("errors") or {}).items():
            lines.extend(f"  {field}: {m}" for m in messages)
    return "\n".join(lines)


# --- commands -----------------------------------------------------------------------------


def cmd_submit(api: APIClient, options) -> Any:
    """Submit a workload; the command after ``--`` is its launch spec."""
    command = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
    if not command:
        raise CLIError("give the command to run after --, e.g. -- python train.py")
    payload = {
        "project": options.project,
        "gpus": options.gpus,
        "nodes": options.nodes,
        "min_runtime_seconds": options.min_runtime,
        "priority": options.priority,
        "resumable": not options.not_resumable,
        "launch_spec": {"command": command},
    }
    if options.cluster:
        payload["cluster"] = options.cluster
    if options.name:
        payload["name"] = options.name
    if options.duration is not None:
        payload["declared_duration_seconds"] = options.duration
    return api.request("POST", "/api/workloads/", payload)


def cmd_submit_many(api: APIClient, options) -> Any:
    """Submit a sweep: a JSON file ("-": standard input) with the workloads of
    ``POST /api/workloads/bulk/`` (``{"workloads": [...]}`` or the list). All or none."""
    try:
        text = sys.stdin.read() if options.file == "-" else Path(options.file).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {options.file}: {exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CLIError(f"{options.file} is not JSON: {exc}") from None
    return api.request(
        "POST", "/api/workloads/bulk/", {"workloads": data} if isinstance(data, list) else data
    )


def cmd_list(api: APIClient, options) -> Any:
    """List the workloads the caller may see (newest first)."""
    query = {"limit": options.limit}
    if options.state:
        query["state"] = options.state
    if options.project:
        query["project"] = options.project
    return api.request("GET", f"/api/workloads/?{urllib.parse.urlencode(query)}")


def cmd_show(api: APIClient, options) -> Any:
    """One workload with its queue position, reason and run history."""
    return api.request("GET", f"/api/workloads/{options.id}/")


def cmd_cancel(api: APIClient, options) -> Any:
    """Cancel one of your workloads."""
    return api.request("POST", f"/api/workloads/{options.id}/cancel/", {})


def cmd_token(api: APIClient, options) -> Any:
    """Exchange a username and password for an API token."""
    password = options.password or getpass.getpass(f"Password for {options.username}: ")
    return api.request("POST", "/api/token/", {"username": options.username, "password": password})


def render(command: str, data: Any) -> str:
    """Plain-text output for a person."""
    if command == "token":
        return data["token"]
    if command == "submit-many":
        ids = data["ids"]
        return f"Queued {data['count']} workloads (ids {ids[0]} … {ids[-1]})."
    if command == "list":
        rows = data.get("results", data) if isinstance(data, dict) else data
        lines = [f"{'ID':>6}  {'STATE':<10} {'GPUS':>4}  {'MIN RUN':>7}  {'POS':>4}  NAME / REASON"]
        for w in rows:
            position = w.get("queue_position") or ""
            lines.append(
                f"{w['id']:>6}  {w['state']:<10} {w['gpus']:>4}  "
                f"{format_duration(w['min_runtime_seconds']):>7}  {position!s:>4}  {w['name']}"
            )
            if w.get("engine_reason") and w["state"] == "pending":
                lines.append(f"{'':>6}  ↳ {w['engine_reason']}")
        return "\n".join(lines)
    w = data
    lines = [
        f"Workload {w['id']}: {w['name']} — {w['state']}",
        f"  project {w['project']['name']} on {w['cluster']['name']}; {w['gpus']} GPUs"
        + (f" on {w['nodes']} whole nodes" if w["nodes"] > 1 else ""),
        f"  minimum runtime {format_duration(w['min_runtime_seconds'])}"
        + ("" if w["resumable"] else "; not resumable"),
    ]
    if w.get("queue_position"):
        lines.append(f"  position {w['queue_position']} in the fair-share order")
    if w.get("engine_reason"):
        lines.append(f"  reason: {w['engine_reason']}")
    for run in w.get("runs", []):
        end = run.get("end_reason") or "running"
        by = f" by workload {run['preempted_by']}" if run.get("preempted_by") else ""
        lines.append(
            f"  run {run['attempt']}: {run['started_at']} → {run.get('ended_at') or '…'} "
            f"({end}{by}) on {', '.join(f'{n}:{g}' for n, g in run['placement'].items())}"
        )
    return "\n".join(lines)


COMMANDS = {
    "submit": cmd_submit,
    "submit-many": cmd_submit_many,
    "list": cmd_list,
    "show": cmd_show,
    "cancel": cmd_cancel,
    "token": cmd_token,
}


def build_parser() -> argparse.ArgumentParser:
    """The CLI's options."""
    parser = argparse.ArgumentParser(
        prog="python -m scheduler.cli",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--server", default=os.environ.get("GOVERNANCE_SERVER", DEFAULT_SERVER))
    parser.add_argument("--token", default=os.environ.get("GOVERNANCE_TOKEN", ""))
    parser.add_argument("--json", action="store_true", help="Print the API's JSON answer.")
    sub = parser.add_subparsers(dest="action", required=True)

    submit = sub.add_parser("submit", help="Submit a workload: … -- command args")
    submit.add_argument("--project", required=True, help="Project id or slug.")
    submit.add_argument("--cluster", help="Cluster id or slug (default: the project's only one).")
    submit.add_argument("--gpus", type=int, required=True)
    submit.add_argument("--nodes", type=int, default=1, help="Whole nodes for a gang.")
    submit.add_argument(
        "--min-runtime", type=parse_duration, default=0, help="0 … 8h; 0 is the free lane."
    )
    submit.add_argument("--priority", type=int, default=0)
    submit.add_argument("--not-resumable", action="store_true")
    submit.add_argument("--name")
    submit.add_argument(
        "--duration", type=parse_duration, help="Declared duration (simulated executor)."
    )
    submit.add_argument("argv", nargs=argparse.REMAINDER, help="-- command and its arguments")

    many = sub.add_parser(
        "submit-many", help="Submit a sweep of up to 1,000 workloads from a JSON file, all or none."
    )
    many.add_argument("file", help='JSON file ("-": standard input), as POST /api/workloads/bulk/.')

    listing = sub.add_parser("list", help="List workloads you may see.")
    listing.add_argument("--state")
    listing.add_argument("--project")
    listing.add_argument("--limit", type=int, default=50)

    for name in ("show", "cancel"):
        one = sub.add_parser(name, help=f"{name.capitalize()} one workload.")
        one.add_argument("id", type=int)

    token = sub.add_parser("token", help="Get an API token for a username and password.")
    token.add_argument("--username", required=True)
    token.add_argument("--password", help="Prompted for when not given.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one CLI command; 0 on success, 1 when the API refused it."""
    options = build_parser().parse_args(argv)
    name = options.action
    api = APIClient(options.server, options.token)
    try:
        data = COMMANDS[name](api, options)
    except CLIError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(json.dumps(data, indent=2) if options.json else render(name, data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
