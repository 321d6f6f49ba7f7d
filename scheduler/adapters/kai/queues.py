"""The budget tree of one cluster as KAI Scheduler ``Queue`` resources. Pure Python, no Django.

Mapping (docs/kubernetes.md explains it for operators):

- organization → the top queue (``<prefix>``), program → a parent queue
  (``<prefix>-<program>``), project → a leaf queue (``<prefix>-<program>-<project>``):
  workloads name the leaf queue of their project.
- GPU ``quota`` (KAI's *deserved* GPUs) = effective share x the cluster's GPUs, rounded down
  to ``step`` GPUs by the largest-remainder rule at every level, so the quotas of a queue's
  children never sum above the queue's own quota (nor above their exact shares).
- GPU ``overQuotaWeight`` = the node's share of its parent in basis points (share % x 100,
  an integer: KAI documents the weight as an integer; hundredths of a percent are what our
  shares hold). Idle GPUs are then lent in proportion to the budget, as our Fair Tree does.
- GPU ``limit`` = the cluster's GPUs (a team may burst into idle GPUs, as the product's own
  engine allows), or the queue's own quota with ``burst=False``.
- ``priority``: 100 (KAI's default) for budgeted nodes, 50 for nodes with no share, so
  over-quota GPUs go to budgeted siblings first — the product's "projects with no share come
  after every budgeted project".
- CPU and memory: quota and limit ``-1`` (unlimited): only GPUs are governed.
- ``preemptMinRuntime`` / ``reclaimMinRuntime``: the product's minimum runtime is declared per
  workload (0-8 h), not per project, and KAI takes it per queue. With ``min_runtime_seconds``
  set, both are written on the top queue only; KAI's minruntime plugin inherits a queue's
  value down the hierarchy. Unset, KAI's plugin defaults apply (0 s unless the site set them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from scheduler.adapters.kai.names import names_check, queue_name

API_VERSION = "scheduling.run.ai/v2"
KIND = "Queue"
MANAGED_BY = "gpu-budget-governance"
ANNOTATION_PREFIX = "gpu-budget-governance"
BUDGETED_PRIORITY = 100  # KAI's default queue priority (pkg/common/constants)
UNBUDGETED_PRIORITY = 50
UNLIMITED = -1
MAX_MIN_RUNTIME_SECONDS = 8 * 3600
STEPS = (Decimal("1"), Decimal("0.1"), Decimal("0.01"))
HUNDRED = Fraction(100)


class KaiQueueError(ValueError):
    """The tree cannot be turned into queues (no shares, bad option); the message says why."""


@dataclass(frozen=True)
class TreeNode:
    """One node of the budget tree as the generator needs it.

    ``slug`` names it in the queue name, ``name`` is the display name, ``share`` the percent
    of its parent (ignored for the root, which holds 100 %). Children in any order: they are
    sorted by slug, so the output does not depend on how the caller read them. ``id`` is the
    database id when the tree was read from the database (the usage import needs it).
    """

    kind: str  # organization | program | project
    slug: str
    name: str
    share: Decimal = Decimal("100")
    children: tuple[TreeNode, ...] = ()
    id: int | None = None


@dataclass(frozen=True)
class QueueOptions:
    """How to generate: the cluster's GPUs, quota step, name prefix, burst and min runtime."""

    total_gpus: int
    prefix: str
    step: Decimal = Decimal("1")
    burst: bool = True
    min_runtime_seconds: int | None = None

    def check(self) -> None:
        """Refuse options KAI or the product cannot take, naming the option."""
        if self.total_gpus < 1:
            raise KaiQueueError(f"total_gpus: {self.total_gpus} — a cluster has at least 1 GPU")
        if self.step not in STEPS:
            raise KaiQueueError(
                f"step: {self.step} — choose one of {', '.join(str(s) for s in STEPS)}"
            )
        seconds = self.min_runtime_seconds
        if seconds is not None and not 0 <= seconds <= MAX_MIN_RUNTIME_SECONDS:
            raise KaiQueueError(f"min_runtime: {seconds} s is outside 0 s - 8 h")


@dataclass
class KaiQueue:
    """One generated queue; ``manifest()`` is the Kubernetes object.

    ``quota`` and ``limit`` are in GPUs (multiples of the step), ``effective_share`` is the
    exact percent of the cluster, ``share`` the percent of the parent.
    """

    name: str
    kind: str
    path: str
    display_name: str
    parent: str | None
    share: Decimal
    effective_share: Fraction
    quota: Decimal
    limit: Decimal | int
    over_quota_weight: int
    priority: int
    min_runtime: str | None = None
    children: list[str] = field(default_factory=list)

    def manifest(self) -> dict:
        """The ``Queue`` resource as a plain dict (field order as KAI's docs show it)."""
        spec: dict = {"displayName": self.display_name}
        if self.parent:
            spec["parentQueue"] = self.parent
        spec["priority"] = self.priority
        if self.min_runtime is not None:
            spec["preemptMinRuntime"] = self.min_runtime
            spec["reclaimMinRuntime"] = self.min_runtime
        spec["resources"] = {
            "gpu": {
                "quota": _number(self.quota),
                "overQuotaWeight": self.over_quota_weight,
                "limit": _number(self.limit),
            },
            "cpu": {"quota": UNLIMITED, "overQuotaWeight": 1, "limit": UNLIMITED},
            "memory": {"quota": UNLIMITED, "overQuotaWeight": 1, "limit": UNLIMITED},
        }
        return {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {
                "name": self.name,
                "labels": {
                    "app.kubernetes.io/managed-by": MANAGED_BY,
                    f"{ANNOTATION_PREFIX}/kind": self.kind,
                },
                "annotations": {
                    f"{ANNOTATION_PREFIX}/path": self.path,
                    f"{ANNOTATION_PREFIX}/share-percent": str(self.share),
                    f"{ANNOTATION_PREFIX}/effective-share-percent": _percent(self.effective_share),
                },
            },
            "spec": spec,
        }


def _number(value: Decimal | int) -> int | float:
    """A quota as YAML shows it: ``12`` for whole GPUs, ``2.5`` for fractions."""
    value = Decimal(value)
    return int(value) if value == value.to_integral_value() else float(value)


def _percent(value: Fraction) -> str:
    """An exact percent shown to 4 decimals (annotations are for people)."""
    return f"{float(value):.4f}"


def go_duration(seconds: int) -> str:
    """Seconds as a Go ``time.Duration`` string (what ``metav1.Duration`` parses): ``1h30m``."""
    if seconds == 0:
        return "0s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return "".join(
        f"{amount}{unit}" for amount, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if amount
    )


def apportion(ideal: Sequence[Fraction], cap: int) -> list[int]:
    """Whole units for each ideal amount: largest remainder, never above ``cap`` in total.

    The total handed out is ``min(cap, floor(sum(ideal)))``; each amount first gets its floor,
    then the leftover units go one each to the largest fractional remainders (ties to the
    earlier item, so the result is deterministic). Every amount ends within one unit of its
    ideal and the sum never exceeds ``cap`` nor the ideal sum. If the floors alone exceed
    ``cap`` (a parent rounded below its children's floors — not reachable from shares that
    sum to at most 100 %), units are taken back from the smallest remainders first.
    """
    if cap < 0:
        raise KaiQueueError(f"cap: {cap} is negative")
    floors = [math.floor(x) for x in ideal]
    target = min(cap, math.floor(sum(ideal, Fraction(0))))
    by_remainder = sorted(range(len(ideal)), key=lambda i: (-(ideal[i] - floors[i]), i))
    units = list(floors)
    leftover = target - sum(floors)
    for i in by_remainder:
        if leftover <= 0:
            break
        units[i] += 1
        leftover -= 1
    for i in reversed(by_remainder):
        if leftover >= 0:
            break
        if units[i] > 0:
            units[i] -= 1
            leftover += 1
    return units


def queues_build(*, root: TreeNode, options: QueueOptions) -> list[KaiQueue]:
    """Every queue of the tree, parents before children, siblings by slug.

    Raises ``KaiQueueError`` when no project holds a share (there would be nothing to
    guarantee: every quota 0), when options are out of range, and ``QueueNameError`` (a
    ``ValueError``) when two nodes would get the same queue name.
    """
    options.check()
    _shares_check(root)
    if not _has_budgeted_project(root, root_level=True):
        raise KaiQueueError(
            f"no project of {root.name!r} holds a share on this cluster: every GPU quota "
            "would be 0. Split the cluster among programs and projects first."
        )
    step = Fraction(options.step)
    total = Fraction(options.total_gpus)
    queues: list[KaiQueue] = []

    def add(
        node: TreeNode,
        parent: KaiQueue | None,
        slugs: tuple[str, ...],
        effective: Fraction,
        units: int,
        budgeted: bool,
    ) -> None:
        quota = Decimal(units) * options.step
        queue = KaiQueue(
            name=queue_name((options.prefix, *slugs)),
            kind=node.kind,
            path="/".join(slugs) or node.slug,
            display_name=node.name,
            parent=parent.name if parent else None,
            share=Decimal(100) if parent is None else node.share,
            effective_share=effective,
            quota=quota,
            limit=quota if not options.burst else options.total_gpus,
            over_quota_weight=_weight(node.share) if budgeted and parent else 1,
            priority=BUDGETED_PRIORITY if budgeted else UNBUDGETED_PRIORITY,
            min_runtime=(
                go_duration(options.min_runtime_seconds)
                if parent is None and options.min_runtime_seconds is not None
                else None
            ),
        )
        queues.append(queue)
        if parent is not None:
            parent.children.append(queue.name)
        children = sorted(node.children, key=lambda c: c.slug)
        child_effective = [effective * Fraction(c.share) / HUNDRED for c in children]
        child_units = apportion([e * total / HUNDRED / step for e in child_effective], units)
        for child, eff, child_unit in zip(children, child_effective, child_units, strict=True):
            add(child, queue, (*slugs, child.slug), eff, child_unit, budgeted and child.share > 0)

    # The top queue's name is the prefix alone; its children's names start with it.
    root_units = math.floor(total / step)
    add(root, None, (), HUNDRED, root_units, True)
    names_check([(q.name, f"{q.kind} {q.path}") for q in queues])
    return queues


def queue_names(*, root: TreeNode, prefix: str) -> dict[str, TreeNode]:
    """Every node's queue name → node, exactly as ``queues_build`` names them.

    Shares play no part in names, so this works for any tree (also one with no shares) and
    is how usage read back from KAI (labelled by queue name) finds its project.
    """
    found: list[tuple[str, TreeNode, str]] = []

    def walk(node: TreeNode, slugs: tuple[str, ...]) -> None:
        found.append((queue_name((prefix, *slugs)), node, "/".join(slugs) or node.slug))
        for child in sorted(node.children, key=lambda c: c.slug):
            walk(child, (*slugs, child.slug))

    walk(root, ())
    names_check([(name, f"{node.kind} {path}") for name, node, path in found])
    return {name: node for name, node, _ in found}


def _shares_check(node: TreeNode) -> None:
    """Refuse a tree in which some node's children hold more than 100 % of it (the
    database never stores one; a quota above its parent's would make KAI refuse the set)."""
    held = sum((child.share for child in node.children), Decimal(0))
    if held > 100:
        raise KaiQueueError(f"shares: the children of {node.name!r} hold {held} %, more than 100 %")
    for child in node.children:
        _shares_check(child)


def _weight(share: Decimal) -> int:
    """Over-quota weight of a budgeted node: its share in basis points (at least 1)."""
    return max(1, int(share * 100))


def _has_budgeted_project(node: TreeNode, *, root_level: bool = False) -> bool:
    if not root_level and node.share <= 0:
        return False
    if node.kind == "project":
        return True
    return any(_has_budgeted_project(child) for child in node.children)
