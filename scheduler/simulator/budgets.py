"""Budget trees for a replay: read and validate a JSON tree, or derive a proportional one.

A tree is ``{"name": ..., "share": percent, "children": [...]}``; the root's share is 100 and
leaves are trace project names. Projects in no leaf are *unbudgeted*: they run only on what
budgeted teams leave idle. ``proportional`` builds a flat tree whose shares follow each
project's GPU-hours in the trace — a neutral baseline when no real budget exists.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.simulator.traces import TraceJob

# Shares are percents written by people; sums like 33.33 + 33.33 + 33.34 must not be refused
# for floating-point noise.
_SUM_TOLERANCE = 1e-6


class BudgetError(ValueError):
    """A budgets file that cannot be used, with a message naming the node and field."""


@dataclass
class Budget:
    """One node of the budget tree: ``share`` is a percent of the parent's share."""

    name: str
    share: float
    children: list[Budget] = field(default_factory=list)

    def leaves(self) -> list[Budget]:
        """Leaf nodes (the budgeted projects), depth first."""
        if not self.children:
            return [self]
        return [leaf for child in self.children for leaf in child.leaves()]

    def effective_shares(self) -> dict[str, float]:
        """Fraction of the cluster (0-1) each leaf project holds: the product of shares from
        the root down (the root's own 100 % included)."""
        result: dict[str, float] = {}

        def walk(node: Budget, fraction: float) -> None:
            fraction *= node.share / 100.0
            if not node.children:
                result[node.name] = fraction
            for child in node.children:
                walk(child, fraction)

        walk(self, 1.0)
        return result

    def to_dict(self) -> dict:
        """The JSON form (as accepted by ``parse_budgets``)."""
        data: dict = {"name": self.name, "share": self.share}
        if self.children:
            data["children"] = [c.to_dict() for c in self.children]
        return data


def load_budgets(spec: str | Path, jobs: Iterable[TraceJob] = ()) -> Budget:
    """Budget tree from ``spec``: ``"proportional"`` (derived from ``jobs``) or a JSON file path.

    Raises ``BudgetError`` for a missing/unreadable file, invalid JSON or an invalid tree.
    """
    if str(spec) == "proportional":
        return proportional_budgets(jobs)
    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BudgetError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BudgetError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
    try:
        return parse_budgets(data)
    except BudgetError as exc:
        raise BudgetError(f"{path}: {exc}") from None


def parse_budgets(data: object) -> Budget:
    """Validate a decoded JSON tree and return it as ``Budget`` nodes.

    Rules: every node is an object with a non-empty string ``name`` and a numeric ``share``
    in 0-100 (the root's may be omitted and must be 100); ``children`` is a list; siblings'
    shares sum to at most 100; no name appears twice.
    """
    seen: set[str] = set()
    root = _parse_node(data, "root", seen, is_root=True)
    if not root.children:
        raise BudgetError("the root has no children: there is nothing to budget")
    return root


def _parse_node(data: object, where: str, seen: set[str], is_root: bool = False) -> Budget:
    if not isinstance(data, dict):
        raise BudgetError(f"{where}: a node must be a JSON object, found {type(data).__name__}")
    unknown = set(data) - {"name", "share", "children"}
    if unknown:
        raise BudgetError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise BudgetError(f"{where}: 'name' must be a non-empty string")
    name = name.strip()
    where = f"node {name!r}"
    if name in seen:
        raise BudgetError(f"{where}: the name appears twice in the tree")
    seen.add(name)
    share = data.get("share", 100.0 if is_root else None)
    if isinstance(share, bool) or not isinstance(share, int | float) or not math.isfinite(share):
        raise BudgetError(f"{where}: 'share' must be a number (percent of the parent)")
    if not 0 <= share <= 100:
        raise BudgetError(f"{where}: share {share} is outside 0-100")
    if is_root and share != 100:
        raise BudgetError(f"{where}: the root's share must be 100, found {share}")
    children_data = data.get("children", [])
    if not isinstance(children_data, list):
        raise BudgetError(f"{where}: 'children' must be a list")
    children = [
        _parse_node(child, f"child {i} of {where}", seen) for i, child in enumerate(children_data)
    ]
    total = sum(c.share for c in children)
    if total > 100 + _SUM_TOLERANCE:
        raise BudgetError(
            f"{where}: children's shares sum to {total:g} %, past 100 % "
            f"({', '.join(f'{c.name}={c.share:g}' for c in children)})"
        )
    return Budget(name=name, share=float(share), children=children)


def proportional_budgets(jobs: Iterable[TraceJob]) -> Budget:
    """A flat tree: each project's share ∝ its GPU-hours in the trace (sum exactly ≤ 100)."""
    gpu_seconds: dict[str, float] = {}
    for job in jobs:
        gpu_seconds[job.project] = gpu_seconds.get(job.project, 0.0) + job.gpus * job.duration
    total = sum(gpu_seconds.values())
    if total <= 0:
        raise BudgetError("proportional budgets need a trace with some GPU time")
    children = [
        # Floor to 1e-6 % so rounding can never push the siblings past 100 %.
        Budget(name=p, share=math.floor(100.0 * s / total * 1e6) / 1e6)
        for p, s in sorted(gpu_seconds.items())
    ]
    return Budget(name="proportional", share=100.0, children=children)
