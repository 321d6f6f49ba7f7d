"""The direction of dependencies inside the project, read from the source's imports.

- The engine (``scheduler/engine``) is pure Python: the standard library and itself.
- The simulator (``scheduler/simulator``) adds the engine and plotting libraries, nothing of
  Django, Celery or the live loop.
- Domain modules (models, choices, selectors, services, engine, simulator, parsing) never
  import an entry point (views, API, tasks, admin, management commands, URLs, forms, filters)
  nor an adapter to an outside scheduler (``scheduler/adapters``): entry points call the
  domain, adapters translate between the domain and Slurm or KAI Scheduler, and only entry
  points wire an adapter in. One exception: a service may enqueue its own Celery task (a
  task is a thin wrapper that calls the service back), imported inside the function.

``docs/design.md`` ("Which way dependencies go") states the same rules in words.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("governance", "scheduler")
ENTRY_PARTS = {
    "views",
    "api",
    "tasks",
    "admin",
    "management",
    "urls",
    "web_urls",
    "api_urls",
    "forms",
    "filters",
    "preemption_views",
    "cli",
    "agent",
}
DOMAIN_PARTS = {
    "models",
    "choices",
    "selectors",
    "services",
    "engine",
    "simulator",
    "parsing",
}


def _modules() -> dict[str, set[str]]:
    """Every project module (migrations aside) → the absolute module names it imports.

    A package is named like the module it replaces (``governance.models``, not
    ``governance.models.__init__``), as Python names it.
    """
    out: dict[str, set[str]] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            if "migrations" in relative.parts:
                continue
            imported: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    imported.add(node.module)
                elif isinstance(node, ast.Import):
                    imported.update(alias.name for alias in node.names)
            parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
            out[".".join(parts)] = imported
    return out


MODULES = _modules()


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violations(package: str, allowed) -> list[tuple[str, str]]:
    return sorted(
        (module, name)
        for module, names in MODULES.items()
        if _in(module, package)
        for name in names
        if not allowed(name)
    )


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names or name == "__future__"


def test_the_modules_were_found():
    assert "scheduler.engine.state" in MODULES and "governance.models" in MODULES


def test_the_engine_imports_only_the_standard_library_and_itself():
    assert _violations("scheduler.engine", lambda n: _stdlib(n) or _in(n, "scheduler.engine")) == []


def test_the_simulator_imports_nothing_of_django_or_the_live_loop():
    forbidden = ("django", "rest_framework", "celery", "governance", "scheduler")
    allowed = ("scheduler.engine", "scheduler.simulator")

    def ok(name: str) -> bool:
        if any(_in(name, p) for p in allowed):
            return True
        return not any(_in(name, p) for p in forbidden)

    assert _violations("scheduler.simulator", ok) == []


@pytest.mark.parametrize("layer", sorted(DOMAIN_PARTS))
def test_domain_modules_import_no_entry_point_and_no_adapter(layer):
    def layer_of(module: str) -> bool:
        return any(part == layer for part in module.split(".")[1:])

    def outward(name: str) -> bool:
        parts = name.split(".")
        if parts[0] not in APPS:
            return False
        if layer == "services" and parts[1:] == ["tasks"]:
            return False  # a service enqueues its own task
        return bool(ENTRY_PARTS & set(parts[1:])) or _in(name, "scheduler.adapters")

    bad = sorted(
        (module, name)
        for module, names in MODULES.items()
        if layer_of(module)
        for name in names
        if outward(name)
    )
    assert bad == []
