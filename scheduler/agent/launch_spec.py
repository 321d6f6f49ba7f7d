"""What the node agent runs for a workload: the GPUs it was given (``parse_gpu_indices``) and
the command a launch spec names (``command_from_launch_spec``). No Django, no HTTP."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple


class LaunchCommand(NamedTuple):
    """The command line, extra environment and working directory a launch spec asks for."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None


class LaunchSpecError(ValueError):
    """A workload's launch spec cannot be run by the local agent (the message says why)."""


def parse_gpu_indices(text: str) -> list[str]:
    """Parse ``"0,1,2,3"`` or ``"0-3"`` (or a mix, ``"0-3,6"``) into GPU indices as strings.

    An empty string means a machine without GPUs: workloads cannot be placed on it.
    """
    indices: list[str] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        if "-" in part:
            first, _, last = part.partition("-")
            if not (first.isdigit() and last.isdigit()) or int(first) > int(last):
                raise ValueError(f"GPU range {part!r} is not of the form FIRST-LAST")
            indices.extend(str(i) for i in range(int(first), int(last) + 1))
        elif part.isdigit():
            indices.append(str(int(part)))
        else:
            raise ValueError(f"GPU index {part!r} is not a number")
    if len(set(indices)) != len(indices):
        raise ValueError(f"GPU indices {text!r} list a GPU twice")
    return indices


def command_from_launch_spec(spec: Mapping | str | Sequence) -> LaunchCommand:
    """Return ``(argv, extra_env, cwd)`` for a launch spec.

    Accepted shapes: ``{"command": ["python", "train.py"], "args": [...], "env": {...},
    "cwd": "..."}``; ``{"command": "a shell line"}`` (run by ``/bin/sh -c``); a bare list or
    string. Container images (``{"image": ...}``) need a container runtime the local agent
    does not drive: they are refused with a message, and the workload is reported failed.
    """
    if isinstance(spec, str):
        spec = {"command": spec}
    elif isinstance(spec, Sequence):
        spec = {"command": list(spec)}
    if not isinstance(spec, Mapping):
        raise LaunchSpecError("launch spec must be an object with a command")
    command = spec.get("command")
    args = spec.get("args") or []
    if command is None or command == [] or command == "":
        if spec.get("image"):
            raise LaunchSpecError(
                "container images are not run by the local agent; give a command instead"
            )
        raise LaunchSpecError("launch spec has no command")
    if isinstance(command, str):
        argv = ["/bin/sh", "-c", command]
        if args:
            # "$0" is the shell's name; the args become "$1"... for the shell line.
            argv += ["sh", *[str(a) for a in args]]
    elif isinstance(command, Sequence) and all(isinstance(c, str) for c in command):
        argv = [*command, *[str(a) for a in args]]
    else:
        raise LaunchSpecError("command must be a string or a list of strings")
    env = spec.get("env") or {}
    if not isinstance(env, Mapping):
        raise LaunchSpecError("env must be an object of names to values")
    cwd = spec.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise LaunchSpecError("cwd must be a string")
    return LaunchCommand(argv, {str(k): str(v) for k, v in env.items()}, cwd)
