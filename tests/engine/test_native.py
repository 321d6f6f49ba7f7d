"""The native build of the engine: loaded only for its own sources, and it decides the same.

``make install`` compiles the engine and the replay loop with mypyc (``scheduler.native_build``);
``scheduler.engine.native`` loads that build only while every compiled source is unchanged.
"""

from __future__ import annotations

import importlib
import json

import pytest

from scheduler import native_build
from scheduler.engine import native
from tests.bench.replay_digest import digest
from tests.plain_python import plain_python_process, run_plain_python


def _module_name(relative) -> str:
    return ".".join(relative.with_suffix("").parts)


def test_the_engine_and_the_replay_loop_run_from_the_native_build():
    assert native.enabled(), (
        "the native build is missing or was built from other sources: run `make native` and "
        "read what it prints (it needs a C compiler and mypyc)"
    )
    names = [_module_name(path) for path in native_build.sources()]
    assert "scheduler.engine.walk" in names and "scheduler.simulator.replay" in names
    plain = [name for name in names if not native.loaded(importlib.import_module(name))]
    assert plain == []


@pytest.mark.parametrize("policy", ["fairshare", "quota", "partition", "fifo"])
def test_the_native_build_and_plain_python_take_the_same_decisions(policy):
    """The first 3,000 Philly jobs on 64 GPUs (preemptions, gangs, a backlog), replayed here
    by the native build and in a plain-Python process: every run and preemption hashed."""
    spec = f"{policy}:64:3000"
    script = (
        "import importlib, sys\n"
        "from tests.bench.replay_digest import digest\n"
        "assert importlib.import_module('scheduler.engine.walk').__file__.endswith('.py')\n"
        f"print(digest('{policy}', 64, 3000)[0])\n"
    )
    plain = run_plain_python(script)
    assert native.enabled(), spec
    assert plain.strip() == digest(policy, 64, 3000)[0]


def test_a_build_from_other_sources_is_not_used(tmp_path):
    source = tmp_path / "scheduler" / "engine" / "walk.py"
    source.parent.mkdir(parents=True)
    source.write_text("X = 1\n")
    manifest = tmp_path / "manifest.json"

    assert not native.build_matches(manifest, tmp_path)  # no build at all

    manifest.write_text("{not json")
    assert not native.build_matches(manifest, tmp_path)
    manifest.write_text(json.dumps({"sources": {}}))
    assert not native.build_matches(manifest, tmp_path)

    recorded = {"scheduler/engine/walk.py": native.source_digest(source)}
    manifest.write_text(json.dumps({"sources": recorded, "python": native.interpreter()}))
    assert native.build_matches(manifest, tmp_path)

    source.write_text("X = 2\n")  # edited after the build: plain Python until rebuilt
    assert not native.build_matches(manifest, tmp_path)

    source.unlink()
    assert not native.build_matches(manifest, tmp_path)


def test_a_build_for_another_python_is_not_used(tmp_path):
    """A virtualenv made again from another Python of the same version keeps the extension
    suffix, so the build would load: the manifest says which Python it was compiled for."""
    source = tmp_path / "scheduler" / "engine" / "walk.py"
    source.parent.mkdir(parents=True)
    source.write_text("X = 1\n")
    recorded = {"scheduler/engine/walk.py": native.source_digest(source)}
    manifest = tmp_path / "manifest.json"

    for python in (None, "3.11.7 (main) [GCC 12.2.0] in /opt/another-python"):
        manifest.write_text(json.dumps({"sources": recorded, "python": python}))
        assert not native.build_matches(manifest, tmp_path)
    manifest.write_text(json.dumps(["not", "an", "object"]))
    assert not native.build_matches(manifest, tmp_path)


def test_without_a_build_the_package_path_is_left_alone(monkeypatch, tmp_path):
    monkeypatch.setattr(native, "_verdict", False)
    path = [str(tmp_path)]
    assert native.extend_path(path, "scheduler.engine") == path

    monkeypatch.setattr(native, "_verdict", True)
    monkeypatch.setattr(native, "BUILD_DIR", tmp_path / "nothing-built-here")
    assert native.extend_path(path, "scheduler.engine") == path


def test_make_install_leaves_a_build_compiled_with_a_profile():
    """``make install`` (which ``make test`` runs first) compiles the build again guided by
    the counts of a replay; the decisions test above then checks that build."""
    assert native_build.profiled(), (
        "the native build in var/native was not compiled with a profile: run `make native` "
        "and read what it prints (the profile-guided step needs gcc)"
    )


def test_the_training_run_refuses_an_engine_that_is_not_the_instrumented_build():
    """Counts taken from plain Python would guide nothing: the training run stops at once."""
    done = plain_python_process(["-m", "scheduler.native_build", "--train"])
    assert done.returncode != 0
    assert "the instrumented build was not loaded" in done.stderr
