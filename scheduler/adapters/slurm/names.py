"""Slurm account names derived from the budget tree, deterministically and collision-checked.

Slurm stores account names in lower case and its commands split on ``,``, ``=`` and spaces,
so a name is lower-cased and every character outside ``[a-z0-9_-]`` becomes ``-``. A name
longer than ``MAX_NAME`` keeps its start and ends with ``-`` + 6 hex digits of a hash of the
full name, so two long names that share a start still differ and the same tree always gives
the same names. Two nodes of the tree that still end up with one name are refused
(``SlurmNameError`` names both), never silently merged.

Scheme: organization ``<prefix><org slug>``; program ``<prefix><org slug>_<program slug>``;
project ``<prefix><program slug>_<project slug>`` — the name researchers type in
``sbatch --account=``, short and unique in the organization. The QOS are
``<prefix><org slug>-free`` and ``<prefix><org slug>-min<N>h``.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 40
_UNSAFE = re.compile(r"[^a-z0-9_-]")


class SlurmNameError(ValueError):
    """The tree gives an account name Slurm cannot take or two nodes the same name."""


def slurm_safe_name(raw: str, *, max_length: int = MAX_NAME) -> str:
    """``raw`` as a name Slurm can take: lower case, ``[a-z0-9_-]``, at most ``max_length``."""
    name = _UNSAFE.sub("-", raw.strip().lower()).strip("-")
    if not name:
        raise SlurmNameError(f"name: {raw!r} has no character Slurm can use in a name.")
    if len(name) > max_length:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:6]
        name = f"{name[: max_length - 7].rstrip('-_')}-{digest}"
    return name


def unique_names(raw_by_key: dict, *, reserved: dict[str, str] | None = None) -> dict:
    """Map each key to ``slurm_safe_name(raw)``; refuse two keys (or a reserved name) sharing one.

    ``reserved`` maps names the result may not use to what holds them (e.g. the parent
    account). The error lists every collision, so one run shows them all.
    """
    reserved = dict(reserved or {})
    names: dict = {}
    holders: dict[str, list[str]] = {}
    for key, raw in raw_by_key.items():
        name = slurm_safe_name(raw)
        names[key] = name
        holders.setdefault(name, []).append(f"{key} ({raw!r})")
    problems = [
        f"{name}: {' and '.join(who)}" for name, who in sorted(holders.items()) if len(who) > 1
    ]
    problems += [
        f"{name}: {holders[name][0]} and {what}"
        for name, what in sorted(reserved.items())
        if name in holders
    ]
    if problems:
        raise SlurmNameError(
            "account names: these nodes of the tree would share one Slurm name — rename a "
            "slug or set another account prefix: " + "; ".join(problems)
        )
    return names
