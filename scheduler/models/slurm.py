"""How the product reaches the Slurm of a cluster it governs (``SlurmConnection``)."""

from __future__ import annotations

from django.db import models


class SlurmConnection(models.Model):
    """How the product reaches the Slurm that schedules one of its clusters.

    ``slurm_sync`` reconciles the cluster's budget tree into this Slurm's accounts,
    associations and QOS; ``slurm_import_usage`` charges its jobs (read from ``sacct``) to
    the usage ledger. Both run the Slurm client commands on this host: ``bin_dir`` is where
    ``sacctmgr``/``sacct``/``sshare`` live (empty = ``PATH``) and ``slurm_conf`` is exported as
    ``SLURM_CONF`` (empty = the host's default). Account names are ``account_prefix`` +
    the tree's slugs, made safe for Slurm (``scheduler.adapters.slurm.names``).
    ``usage_imported_until`` is the import cursor: the next scheduled import reads
    ``sacct`` from a little before it. See docs/slurm.md.
    """

    cluster = models.OneToOneField(
        "governance.Cluster", on_delete=models.CASCADE, related_name="slurm_connection"
    )
    slurm_cluster = models.CharField(
        max_length=64, help_text="ClusterName in slurm.conf (sacctmgr's cluster=)."
    )
    bin_dir = models.CharField(
        max_length=300, blank=True, help_text="Directory of sacctmgr/sacct; empty = PATH."
    )
    slurm_conf = models.CharField(
        max_length=300, blank=True, help_text="Path exported as SLURM_CONF; empty = default."
    )
    account_prefix = models.CharField(
        max_length=20, blank=True, help_text="Prepended to every account name we manage."
    )
    parent_account = models.CharField(
        max_length=64, default="root", help_text="The Slurm account the organization sits under."
    )
    enabled = models.BooleanField(default=True, help_text="Scheduled sync and import run.")
    remove_unknown = models.BooleanField(
        default=False,
        help_text="Scheduled syncs delete accounts under the organization that the tree lacks.",
    )
    usage_imported_until = models.DateTimeField(null=True, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync_summary = models.TextField(blank=True)
    last_import_at = models.DateTimeField(null=True, blank=True)
    last_import_summary = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster_id"]
        constraints = [
            models.UniqueConstraint(fields=["slurm_cluster"], name="slurm_connection_unique"),
        ]

    def __str__(self) -> str:
        return f"Slurm {self.slurm_cluster} for {self.cluster}"
