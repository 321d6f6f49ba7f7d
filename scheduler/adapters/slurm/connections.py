"""Finding the ``SlurmConnection`` a command or task names."""

from __future__ import annotations

from scheduler.models import SlurmConnection


class ConnectionNotFound(LookupError):
    """No (or no single) Slurm connection matches the name given."""


def slurm_connection_lookup(*, name: str) -> SlurmConnection:
    """The connection whose Slurm cluster is ``name``, or whose product cluster is ``name``.

    The product cluster may be given as ``<cluster slug>`` or ``<org slug>/<cluster slug>``.
    """
    connections = SlurmConnection.objects.select_related("cluster__organization")
    found = list(connections.filter(slurm_cluster=name)[:2])
    if not found:
        org_slug, _, slug = name.rpartition("/")
        by_cluster = connections.filter(cluster__slug=slug)
        if org_slug:
            by_cluster = by_cluster.filter(cluster__organization__slug=org_slug)
        found = list(by_cluster[:2])
    if not found:
        known = ", ".join(
            f"{c.slurm_cluster} ({c.cluster.organization.slug}/{c.cluster.slug})"
            for c in connections.order_by("slurm_cluster")[:20]
        )
        raise ConnectionNotFound(
            f"--cluster: no Slurm connection for {name!r}. Configured: {known or 'none'} "
            "(add one in the admin: Scheduler > Slurm connections)."
        )
    if len(found) > 1:
        raise ConnectionNotFound(
            f"--cluster: {name!r} matches several clusters; write <org slug>/<cluster slug>."
        )
    return found[0]
