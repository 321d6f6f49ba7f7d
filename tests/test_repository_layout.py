"""The repository's shape, read from its tracked files: small parts, self-contained, mapped.

- No module over ``MODULE_LINES`` lines and no function over ``FUNCTION_LINES`` lines outside
  migrations, tests included, unless a one-line reason stands beside it: a comment line
  ``# size: <reason>`` among a module's first lines, or directly above a function's ``def``
  (above its decorators). A long piece is split into named steps; the reason is for the rare
  one a split would make harder to read.
- Nothing tracked points outside the repository (a sibling checkout, a tool folder, an
  absolute path of one machine) or at an issue tracker's numbers: a person with only a clone
  can follow every reference.
- The README's "Where things live" names paths that exist.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_LINES = 400
FUNCTION_LINES = 80
REASON = re.compile(r"^\s*# size: \S")
# How far into a module its reason may stand (after the docstring and the imports' heading).
MODULE_REASON_WITHIN = 40


def tracked(*patterns: str) -> list[Path]:
    """Tracked files matching git pathspecs, as they are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", *patterns],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in listed.split("\0") if name and (ROOT / name).is_file()]


def python_sources() -> list[Path]:
    """Every tracked Python file outside migrations."""
    return [p for p in tracked("*.py") if "migrations" not in p.relative_to(ROOT).parts]


def _function_reason(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``# size:`` comment on the line above the function's first decorator or ``def``."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first >= 2 and bool(REASON.match(lines[first - 2]))


def oversized() -> list[str]:
    """Modules and functions over the limits without a reason, as ``path[:line] name (n)``."""
    found = []
    for path in python_sources():
        text = path.read_text()
        lines = text.splitlines()
        name = path.relative_to(ROOT)
        if len(lines) > MODULE_LINES and not any(
            REASON.match(line) for line in lines[:MODULE_REASON_WITHIN]
        ):
            found.append(f"{name} ({len(lines)} lines)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES and not _function_reason(lines, node):
                    found.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_module_or_function_over_the_limits_without_a_reason():
    assert oversized() == []


# A sibling checkout or tool folder, a machine's absolute working paths, an issue number.
OUTSIDE = re.compile(
    r"\.\./(shared|\.library)\b|/work/(main|shared|\.library)\b|DESIGN\.md"
    r"|\b[Ii]ssues? #?\d+\b|\(#\d+\)"
)


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for path in tracked("*.py", "*.md", "*.html", "*.txt", "*.toml", "*.cfg", "*.sh", "Makefile"):
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert found == []


def test_where_things_live_names_existing_paths():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    named = set()
    for row in section.splitlines():
        if not row.startswith("| `"):
            continue
        first_cell = row.split("|")[1]
        named.update(re.findall(r"`([\w./-]+/)`|`([\w./-]+\.\w+)`", first_cell))
    paths = {p for pair in named for p in pair if p}
    assert paths, "the table names no path"
    missing = sorted(p for p in paths if not (ROOT / p).exists())
    assert missing == []
