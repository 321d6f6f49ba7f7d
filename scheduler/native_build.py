"""Compile the engine and the replay loop with mypyc into ``var/native`` (``make native``).

The modules stay plain Python; the build is an accelerator that ``scheduler.engine.native``
loads only while every compiled source is unchanged. Nothing here is needed at run time: a
machine without a C compiler or mypyc runs the same code as plain Python. Run from the
repository root: ``python -m scheduler.native_build`` (``--force`` rebuilds even when up to
date). It exits 0 when the build fails, after saying why, so ``make run`` carries on in plain
Python; the test suite checks that the build is loaded.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from scheduler.engine.native import BUILD_DIR, MANIFEST, ROOT, build_matches, source_digest

#: The shared library's module name (it lives inside the engine package).
GROUP = "scheduler.engine.native_lib"

#: Modules that are never compiled: package files, and the loader itself.
NOT_COMPILED = {"__init__.py", "native.py"}

#: The simulator's modules on the replay's hot path (the rest reads files and writes reports).
SIMULATOR_MODULES = ("replay.py", "replay_loop.py", "replay_records.py", "ledger.py", "contract.py")


def sources() -> list[Path]:
    """Every source file the build compiles, relative to the repository root."""
    engine = sorted(
        p.relative_to(ROOT)
        for p in (ROOT / "scheduler" / "engine").glob("*.py")
        if p.name not in NOT_COMPILED
    )
    simulator = [Path("scheduler", "simulator", name) for name in SIMULATOR_MODULES]
    return [*engine, *simulator]


def up_to_date() -> bool:
    """The manifest matches the sources and the shared library exists for this Python."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    library = BUILD_DIR.joinpath(*f"{GROUP}__mypyc".split(".")).with_suffix(suffix)
    if not library.is_file() or not build_matches():
        return False
    recorded = json.loads(MANIFEST.read_text())["sources"]
    return sorted(recorded) == sorted(str(p) for p in sources())


def build() -> None:
    """Compile into a fresh directory, then put it in place of the old build at once."""
    from mypyc.build import mypycify  # the build tools are only needed here
    from setuptools import setup

    # setuptools reads our pyproject.toml on the way and calls part of it beta: not news here
    warnings.filterwarnings("ignore", module="setuptools")

    files = sources()
    BUILD_DIR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD_DIR.parent, prefix="native-build-") as work:
        staged = Path(work) / "lib"
        extensions = mypycify(
            [
                f"--cache-dir={Path(work) / 'mypy-cache'}",
                "--follow-imports=silent",  # type errors matter only where code is compiled
                *(str(f) for f in files),
            ],
            group_name=GROUP,
            target_dir=str(Path(work) / "c"),
            opt_level="3",
        )
        setup(
            name="scheduler-native",
            ext_modules=extensions,
            script_args=[
                "--quiet",
                "build_ext",
                f"--build-lib={staged}",
                f"--build-temp={Path(work) / 'tmp'}",
            ],
        )
        manifest = {"sources": {str(f): source_digest(ROOT / f) for f in files}}
        (staged / MANIFEST.name).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        old = Path(work) / "old"
        if BUILD_DIR.exists():
            BUILD_DIR.rename(old)
        staged.rename(BUILD_DIR)


def main(argv: list[str]) -> int:
    """Build unless up to date; report, and never fail the command that called it."""
    os.chdir(ROOT)  # mypyc names modules by their path from here
    if "--force" not in argv and up_to_date():
        return 0
    print("Compiling the engine with mypyc into var/native (about 30 s) ...", flush=True)
    try:
        build()
    except (Exception, SystemExit) as error:  # mypy's type errors end in SystemExit
        shutil.rmtree(BUILD_DIR, ignore_errors=True)
        print(
            f"The native build failed ({error!r}); the engine runs as plain Python (same "
            "decisions, about half the speed). `make native` tries again.",
            file=sys.stderr,
        )
        return 0
    print("Native engine built: var/native", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
