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
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from scheduler.engine.native import (
    BUILD_DIR,
    MANIFEST,
    ROOT,
    build_matches,
    interpreter,
    source_digest,
)

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
    BUILD_DIR.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=BUILD_DIR.parent, prefix="native-build-") as work:
        _install(_compile(Path(work)), Path(work))


def build_profiled() -> None:
    """Compile again, guided by a profile of the build at work (gcc's ``-fprofile-use``).

    The same C code, laid out and inlined for the paths a replay takes: the whole Philly
    replay 7-10 % faster, the same decisions. An instrumented build replays a slice of
    the shipped Philly trace under two policies in a child process (``train``), then the
    build is compiled again with what that run counted. gcc finds each profile by the path
    of the object it compiles, so both compiles use the same fixed directory.
    """
    work = BUILD_DIR.parent / "native-profile"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        counts = work / "counts"
        instrumented = _compile(
            work, [f"-fprofile-generate={counts}", "-fprofile-update=single"], link=True
        )
        _write_manifest(instrumented, profiled=False)  # the loader checks it
        subprocess.run(
            [sys.executable, "-m", "scheduler.native_build", "--train"],
            cwd=ROOT,
            env={**os.environ, "ENGINE_NATIVE": "1", "ENGINE_NATIVE_DIR": str(instrumented)},
            check=True,
        )
        if not any(counts.rglob("*.gcda")):
            raise RuntimeError("the training run counted nothing")
        shutil.rmtree(work / "tmp")  # compile every object again, with the counts
        flags = [f"-fprofile-use={counts}", "-fprofile-partial-training", "-Wno-missing-profile"]
        optimized = _compile(work, flags, into="lib-profiled")
        _install(optimized, work, profiled=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def train() -> None:
    """What the instrumented build runs (``build_profiled``): the first 20,000 Philly jobs on
    256 GPUs under ``fairshare`` and the first 10,000 on 512 GPUs under ``quota``, with
    the engine loaded from that build (checked: counts of plain Python would be no use)."""
    from scheduler.engine import native, state
    from scheduler.simulator import ReplayConfig, load_budgets, load_trace, replay
    from scheduler.traces import PHILLY_BUDGETS, PHILLY_JOBS

    if not native.loaded(state):
        raise RuntimeError("the instrumented build was not loaded")
    trace = load_trace(PHILLY_JOBS, "philly")
    for policy, gpus, jobs in (("fairshare", 256, 20_000), ("quota", 512, 10_000)):
        head = trace.head(jobs)
        config = ReplayConfig(gpus=gpus, policy=policy)
        replay(head, load_budgets(PHILLY_BUDGETS, head.jobs), config)


def _compile(
    work: Path, flags: Sequence[str] = (), *, link: bool = False, into: str = "lib"
) -> Path:
    """Generate the C code with mypyc under ``work`` and compile it (``flags``: extra compiler
    flags, also passed to the linker with ``link``); the directory of the built modules."""
    from mypyc.build import mypycify  # the build tools are only needed here
    from setuptools import setup

    # setuptools reads our pyproject.toml on the way and calls part of it beta: not news here
    warnings.filterwarnings("ignore", module="setuptools")

    files = sources()
    staged = work / into
    extensions = mypycify(
        [
            f"--cache-dir={work / 'mypy-cache'}",
            "--follow-imports=silent",  # type errors matter only where code is compiled
            *(str(f) for f in files),
        ],
        group_name=GROUP,
        target_dir=str(work / "c"),
        opt_level="3",
    )
    for extension in extensions:
        extension.extra_compile_args = [*extension.extra_compile_args, *flags]
        if link:
            extension.extra_link_args = [*extension.extra_link_args, *flags]
    setup(
        name="scheduler-native",
        ext_modules=extensions,
        script_args=[
            "--quiet",
            "build_ext",
            f"--build-lib={staged}",
            f"--build-temp={work / 'tmp'}",
        ],
    )
    return staged


def _write_manifest(staged: Path, profiled: bool) -> None:
    """Record in ``staged`` the sources it was built from, the Python it was built for, and
    whether with a profile."""
    manifest = {
        "sources": {str(f): source_digest(ROOT / f) for f in sources()},
        "python": interpreter(),
        "profiled": profiled,
    }
    (staged / MANIFEST.name).write_text(json.dumps(manifest, indent=1, sort_keys=True))


def _install(staged: Path, work: Path, profiled: bool = False) -> None:
    """Write the manifest into ``staged`` and put it in place of the old build at once."""
    _write_manifest(staged, profiled)
    old = work / "old"
    if BUILD_DIR.exists():
        BUILD_DIR.rename(old)
    staged.rename(BUILD_DIR)
    shutil.rmtree(old, ignore_errors=True)


def profiled() -> bool:
    """Was the build in place compiled with a profile (``build_profiled``)?"""
    try:
        return json.loads(MANIFEST.read_text()).get("profiled") is True
    except (OSError, ValueError, AttributeError):
        return False


def main(argv: list[str]) -> int:
    """Build unless up to date; with ``--profile``, also compile it again guided by a profile
    (``build_profiled``). Report, and never fail the command that called it."""
    os.chdir(ROOT)  # mypyc names modules by their path from here
    if "--train" in argv:
        train()
        return 0
    force = "--force" in argv
    if force or not up_to_date():
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
    if "--profile" in argv and (force or not profiled()):
        print("Compiling it again, guided by a profile of a replay (about 90 s) ...", flush=True)
        try:
            build_profiled()
        except (Exception, SystemExit) as error:
            # The build from the first compile stays: as fast as before, the same decisions.
            print(f"The profile-guided build failed ({error!r}); keeping the build.", flush=True)
            return 0
        print("Native engine built with a profile: var/native", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
