"""Use the native build of the engine when there is one for exactly these sources.

The engine and the simulator's replay loop are plain Python. ``make native`` (part of ``make
install``) also compiles them with mypyc into ``var/native/`` — the same source, the same
decisions, about twice as fast. A package that has native modules calls ``extend_path`` from
its ``__init__``: the build directory then comes first on the package's search path, so its
submodules load from the build.

The build is used only when every source it was compiled from is unchanged (a SHA-256 per
file, written by the build in ``manifest.json``) and this process runs the Python it was
compiled for (``interpreter``: a virtualenv made again from another Python keeps the same
extension suffix): after an edit or a new interpreter the engine runs as plain Python until
``make native`` runs again, never a stale binary. ``ENGINE_NATIVE=0`` in the
environment turns the build off (to compare, or to debug in plain Python).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# ``ENGINE_NATIVE_DIR``: a build elsewhere (the profile-guided build's training run uses it).
BUILD_DIR = Path(os.environ.get("ENGINE_NATIVE_DIR") or ROOT / "var" / "native")
MANIFEST = BUILD_DIR / "manifest.json"

logger = logging.getLogger(__name__)

_verdict: bool | None = None  # one verdict per process: all native modules or none


def source_digest(path: Path) -> str:
    """SHA-256 of a source file, as the build records it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def interpreter() -> str:
    """The Python a build is compiled for and used with: its version and build, and where
    it is installed (a virtualenv names the Python it was made from)."""
    return f"{sys.version} in {sys.base_prefix}"


def build_matches(manifest: Path = MANIFEST, root: Path = ROOT) -> bool:
    """True when ``manifest`` exists, was written for this process's Python, and every
    source it lists is unchanged under ``root``."""
    try:
        built = json.loads(manifest.read_text())
        recorded = built["sources"]
        python = built.get("python")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False
    if not isinstance(recorded, dict) or not recorded:
        return False
    if python != interpreter():
        logger.warning(
            "The native engine was built for another Python (%s): running plain Python. "
            "`make native` rebuilds it.",
            python,
        )
        return False
    for relative, digest in recorded.items():
        path = root / relative
        if not path.is_file() or source_digest(path) != digest:
            logger.warning(
                "The native engine was built from other sources (%s changed): running plain "
                "Python. `make native` rebuilds it.",
                relative,
            )
            return False
    return True


def enabled() -> bool:
    """Whether this process loads the native modules (decided once, on first use)."""
    global _verdict
    if _verdict is None:
        _verdict = os.environ.get("ENGINE_NATIVE", "1") != "0" and build_matches()
    return _verdict


def extend_path(path: list[str], package: str) -> list[str]:
    """``path`` with the package's build directory first when the native build is used."""
    if not enabled():
        return path
    built = BUILD_DIR.joinpath(*package.split("."))
    if not built.is_dir():
        return path
    return [str(built), *path]


def loaded(module) -> bool:
    """True when ``module`` was loaded from the native build (a compiled extension)."""
    return not str(getattr(module, "__file__", "")).endswith(".py")
