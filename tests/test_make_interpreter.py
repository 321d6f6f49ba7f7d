"""The interpreter ``make`` makes the virtualenv from (the Makefile's ``PYTHON``).

The rule: the operating system's Python (``/usr/bin/python3``) when it is 3.11 or newer and
has what a virtualenv and the native build need (``venv`` with ``ensurepip``, ``Python.h``),
else ``python3`` from PATH; ``PYTHON`` given on the command line or in the environment wins.
"""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"

# What the test itself asks of an interpreter, written apart from the Makefile's rule.
_ABILITIES = """
import importlib.util, json, os, sys, sysconfig
print(json.dumps({
    "version": list(sys.version_info[:2]),
    "venv": all(importlib.util.find_spec(m) is not None for m in ("venv", "ensurepip")),
    "headers": os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
}))
"""


_SHOW = "chosen-python: ; @echo $(PYTHON)"  # a target that prints the Makefile's choice


def _chosen(*make_args: str, env: dict[str, str] | None = None) -> str:
    """The ``PYTHON`` the Makefile settles on, given these arguments and environment."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", _SHOW, "chosen-python", *make_args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _can_make_the_virtualenv(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", _ABILITIES], capture_output=True, text=True)
    except OSError:
        return False
    if done.returncode:
        return False
    abilities = json.loads(done.stdout)
    return tuple(abilities["version"]) >= (3, 11) and abilities["venv"] and abilities["headers"]


def test_the_systems_python_is_chosen_when_it_can_make_the_virtualenv():
    chosen = _chosen()
    if _can_make_the_virtualenv(SYSTEM_PYTHON):
        assert chosen == SYSTEM_PYTHON
    else:
        assert chosen == "python3"


def test_python_named_on_the_command_line_or_in_the_environment_wins():
    assert _chosen("PYTHON=/opt/elsewhere/python3.12") == "/opt/elsewhere/python3.12"
    assert _chosen(env={"PYTHON": "/opt/other/python3.13"}) == "/opt/other/python3.13"
