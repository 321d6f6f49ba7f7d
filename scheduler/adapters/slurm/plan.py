"""Desired vs current Slurm associations and QOS → an ordered list of ``sacctmgr`` changes.

Pure Python (no Django, no I/O) so every rule is unit-tested without a Slurm. The order keeps
Slurm consistent after any prefix of the list (a refused change stops the apply):

1. QOS are added or repaired first (accounts reference them);
2. accounts are added parents before children, then existing ones are repaired
   (parent, fairshare, the organization's QOS list and default);
3. user associations are added, default accounts moved away from associations about to go,
   then user associations removed;
4. unknown accounts (only with ``remove_unknown``) are removed children before parents.

What is managed (and therefore repaired when someone changes it by hand): every account of
the organization's subtree — its parent and ``Fairshare``; the organization account's QOS
list and default QOS (children inherit them); the QOS' ``UsageFactor``, ``PreemptExemptTime``
and ``Preempt``; the user associations under project accounts. The organization account's own
``Fairshare`` (how it competes with the site's other root accounts) and user associations'
fairshare are the site's to set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

ADD_QOS = "add qos"
MODIFY_QOS = "modify qos"
ADD_ACCOUNT = "add account"
MODIFY_ACCOUNT = "modify account"
ADD_USER = "add user"
MODIFY_USER = "modify user"
REMOVE_USER = "remove user"
REMOVE_ACCOUNT = "remove account"


@dataclass(frozen=True)
class Qos:
    """One QOS: ``usage_factor`` (0 = free), ``preempt_exempt_seconds``, QOS it may preempt."""

    name: str
    usage_factor: Decimal = Decimal(1)
    preempt_exempt_seconds: int | None = None
    preempt: tuple[str, ...] = ()


@dataclass(frozen=True)
class Account:
    """One account association on the cluster: its parent and ``Fairshare``.

    ``qos``/``default_qos`` are set only on the organization account (``None`` elsewhere:
    inherited). ``description`` is used when the account is created.
    """

    name: str
    parent: str
    fairshare: int | None
    qos: frozenset[str] | None = None
    default_qos: str | None = None
    description: str = ""


@dataclass
class Desired:
    """What the tree says Slurm should hold for one cluster.

    ``accounts`` lists parents before children. ``users`` maps ``(user, account)`` pairs
    of project members; ``skipped_users`` explains members left out (no valid login name).
    """

    cluster: str
    organization_account: str
    accounts: list[Account]
    users: set[tuple[str, str]]
    qos: list[Qos]
    skipped_users: list[str] = field(default_factory=list)


@dataclass
class Current:
    """What ``sacctmgr show`` returned for one cluster.

    ``accounts`` maps account name → its association (``fairshare`` ``None`` when Slurm
    shows ``parent`` or nothing); ``users`` the ``(user, account)`` associations;
    ``default_accounts`` each user's default account on the cluster; ``qos`` every QOS.
    """

    accounts: dict[str, Account]
    users: set[tuple[str, str]]
    default_accounts: dict[str, str]
    qos: dict[str, Qos]


@dataclass(frozen=True)
class Change:
    """One ``sacctmgr`` command: ``args`` follow ``sacctmgr -i``; ``why`` is for people."""

    kind: str
    target: str
    args: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        return f"{self.kind} {self.target}: {self.why}"


@dataclass
class Plan:
    """The ordered changes and what was found but left alone."""

    changes: list[Change]
    unknown_accounts: list[str]
    skipped_users: list[str]

    @property
    def empty(self) -> bool:
        """Nothing to change."""
        return not self.changes


def format_duration(seconds: int) -> str:
    """Seconds as Slurm writes a duration (``[D-]HH:MM:SS``)."""
    days, rest = divmod(int(seconds), 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def parse_duration(text: str) -> int | None:
    """Slurm's ``[D-]HH:MM:SS`` / ``MM:SS`` as seconds; ``None`` for empty or unset."""
    text = text.strip()
    if not text or text.lower() in {"unknown", "none", "invalid"}:
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
    parts = [int(p) for p in text.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, minutes, seconds = parts
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def _qos_changes(desired: list[Qos], current: dict[str, Qos]) -> list[Change]:
    changes = []
    for qos in desired:
        settings = [f"UsageFactor={qos.usage_factor}"]
        if qos.preempt_exempt_seconds is not None:
            settings.append(f"PreemptExemptTime={format_duration(qos.preempt_exempt_seconds)}")
        settings.append(f"Preempt={','.join(qos.preempt)}" if qos.preempt else "Preempt=")
        have = current.get(qos.name)
        if have is None:
            add = [s for s in settings if s != "Preempt="]
            changes.append(Change(ADD_QOS, qos.name, ("add", "qos", qos.name, *add), "new QOS"))
            continue
        drift = []
        if Decimal(have.usage_factor) != Decimal(qos.usage_factor):
            drift.append(f"UsageFactor {have.usage_factor} → {qos.usage_factor}")
        if (have.preempt_exempt_seconds or 0) != (qos.preempt_exempt_seconds or 0):
            drift.append(
                f"PreemptExemptTime {have.preempt_exempt_seconds} → {qos.preempt_exempt_seconds}"
            )
        if set(have.preempt) != set(qos.preempt):
            drift.append(f"Preempt {','.join(have.preempt)} → {','.join(qos.preempt)}")
        if drift:
            changes.append(
                Change(
                    MODIFY_QOS,
                    qos.name,
                    ("modify", "qos", f"name={qos.name}", "set", *settings),
                    "; ".join(drift),
                )
            )
    return changes


def _subtree(current: Current, root: str) -> list[str]:
    """Accounts under ``root`` in ``current`` (``root`` first), parents before children."""
    children: dict[str, list[str]] = {}
    for account in current.accounts.values():
        children.setdefault(account.parent, []).append(account.name)
    order, stack = [], [root] if root in current.accounts else []
    while stack:
        name = stack.pop(0)
        order.append(name)
        stack.extend(sorted(children.get(name, [])))
    return order


def _account_additions(desired: Desired, current: Current, cluster: str) -> list[Change]:
    """``add account`` for every account of the tree Slurm lacks, parents before children."""
    changes = []
    for account in desired.accounts:
        have = current.accounts.get(account.name)
        if have is not None:
            continue
        args = ["add", "account", account.name, cluster, f"parent={account.parent}"]
        if account.description:
            args.append(f"description={account.description}")
        if account.fairshare is not None:
            args.append(f"fairshare={account.fairshare}")
        if account.qos is not None:
            args.append(f"qos={','.join(sorted(account.qos))}")
        if account.default_qos:
            args.append(f"defaultqos={account.default_qos}")
        why = f"under {account.parent}"
        if account.fairshare is not None:
            why += f", Fairshare {account.fairshare}"
        changes.append(Change(ADD_ACCOUNT, account.name, tuple(args), why))
    return changes


def _account_repairs(desired: Desired, current: Current, cluster: str) -> list[Change]:
    """``modify account`` for every existing account whose managed settings drifted."""
    changes = []
    for account in desired.accounts:
        have = current.accounts.get(account.name)
        if have is None:
            continue
        settings, drift = [], []
        if have.parent != account.parent:
            settings.append(f"parent={account.parent}")
            drift.append(f"parent {have.parent or '-'} → {account.parent}")
        if account.fairshare is not None and have.fairshare != account.fairshare:
            settings.append(f"fairshare={account.fairshare}")
            drift.append(f"Fairshare {have.fairshare} → {account.fairshare}")
        if account.qos is not None and set(have.qos or ()) != set(account.qos):
            settings.append(f"qos={','.join(sorted(account.qos))}")
            drift.append(
                f"QOS {','.join(sorted(have.qos or ())) or '-'} → {','.join(sorted(account.qos))}"
            )
        if account.default_qos and have.default_qos != account.default_qos:
            settings.append(f"defaultqos={account.default_qos}")
            drift.append(f"DefaultQOS {have.default_qos or '-'} → {account.default_qos}")
        if settings:
            changes.append(
                Change(
                    MODIFY_ACCOUNT,
                    account.name,
                    ("modify", "account", f"name={account.name}", cluster, "set", *settings),
                    "; ".join(drift),
                )
            )
    return changes


def _user_changes(
    desired: Desired, current: Current, wanted: set[str], cluster: str
) -> list[Change]:
    """User associations added, default accounts moved off associations about to go, then
    the associations of the tree's accounts that no member holds removed."""
    changes = []
    # One command per account: sacctmgr adds a list of users at once.
    joining: dict[str, list[str]] = {}
    for user, account in sorted(desired.users - current.users):
        joining.setdefault(account, []).append(user)
    for account, names in sorted(joining.items()):
        changes.append(
            Change(
                ADD_USER,
                f"{','.join(names)}@{account}",
                ("add", "user", ",".join(names), f"account={account}", cluster),
                "project member" + ("s" if len(names) > 1 else ""),
            )
        )
    going = sorted(
        (user, account) for user, account in current.users - desired.users if account in wanted
    )
    staying: dict[str, list[str]] = {}
    for user, account in sorted(desired.users):
        staying.setdefault(user, []).append(account)
    for user in sorted({user for user, _ in going}):
        default = current.default_accounts.get(user)
        if (user, default) in going and staying.get(user):
            target = staying[user][0]
            changes.append(
                Change(
                    MODIFY_USER,
                    user,
                    ("modify", "user", f"name={user}", cluster, "set", f"defaultaccount={target}"),
                    f"default account {default} → {target} (its association goes)",
                )
            )
    for user, account in going:
        changes.append(
            Change(
                REMOVE_USER,
                f"{user}@{account}",
                ("remove", "user", f"name={user}", f"account={account}", cluster),
                "no longer a member of the project",
            )
        )
    return changes


def plan_sync(desired: Desired, current: Current, *, remove_unknown: bool = False) -> Plan:
    """The changes that make ``current`` what ``desired`` says, in a safe order.

    Accounts under the organization account that the tree does not hold are *unknown*: they
    are reported, and removed (children first, with their users) only with
    ``remove_unknown``. Accounts elsewhere in Slurm are never touched.
    """
    cluster = f"cluster={desired.cluster}"
    wanted = {a.name for a in desired.accounts}
    changes = [
        *_qos_changes(desired.qos, current.qos),
        *_account_additions(desired, current, cluster),
        *_account_repairs(desired, current, cluster),
        *_user_changes(desired, current, wanted, cluster),
    ]
    subtree = _subtree(current, desired.organization_account)
    unknown = [name for name in subtree if name not in wanted]
    if remove_unknown:
        for name in reversed(unknown):
            changes.append(
                Change(
                    REMOVE_ACCOUNT,
                    name,
                    ("remove", "account", f"name={name}", cluster),
                    "not in the budget tree (--remove-unknown)",
                )
            )
    return Plan(changes=changes, unknown_accounts=unknown, skipped_users=desired.skipped_users)
