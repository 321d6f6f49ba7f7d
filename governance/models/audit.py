"""The append-only audit trail of every change."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q

from governance.choices import AuditAction
from governance.models.fields import actor_field
from governance.models.tree import Organization


class AuditEventQuerySet(models.QuerySet):
    """Audit events are append-only: the app has no path that edits or deletes one."""

    def update(self, **kwargs):
        raise TypeError("Audit events are append-only; they are never updated.")

    def delete(self):
        raise TypeError("Audit events are append-only; they are never deleted.")


class AuditEvent(models.Model):
    """One recorded change: who did what to which object, when, and the values before/after.

    Written by ``governance.services.audit.audit_record`` inside the transaction of the change
    it records, so a change that fails (and rolls back) leaves no event, and a change that
    commits always has one. Append-only: ``save()`` refuses to update an existing row, the
    queryset refuses ``update()``/``delete()``, and on PostgreSQL a trigger refuses UPDATE and
    DELETE (migration 0005). ``actor`` is empty when the system acted (applying an approved
    request at its date, a node whose agent went silent). ``organization`` decides who sees
    the event: the org admins of that organization (``governance.selectors.audit``).
    """

    at = models.DateTimeField()
    actor = actor_field(help_text="Empty when the system acted.")
    # The actor's username when the event was written: readable even if the user is renamed.
    actor_label = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=30, choices=AuditAction.choices)
    organization = models.ForeignKey(
        Organization, on_delete=models.PROTECT, related_name="audit_events"
    )
    object_kind = models.CharField(
        max_length=30, help_text="program, project, organization, node, workload, …"
    )
    object_id = models.BigIntegerField()
    object_label = models.CharField(max_length=200)
    before = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    after = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    reason = models.TextField(blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=AuditAction.values), name="audit_event_action_valid"
            ),
        ]
        indexes = [
            # The audit page and API: one organization's events, newest first, optionally
            # narrowed to one action or one actor (the page's filters).
            models.Index(fields=["organization", "-at", "-id"], name="audit_org_newest"),
            models.Index(fields=["organization", "action", "-at"], name="audit_org_action"),
            models.Index(fields=["organization", "actor", "-at"], name="audit_org_actor"),
            # "Everything that happened to this object" (a node's or a request's history).
            models.Index(fields=["object_kind", "object_id"], name="audit_object"),
        ]

    def __str__(self) -> str:
        who = self.actor_label or "system"
        return f"{self.get_action_display()} of {self.object_label} by {who} at {self.at:%Y-%m-%d %H:%M}"

    def save(self, *args, **kwargs):
        """Insert only: an event already stored is never rewritten."""
        if self.pk is not None and not self._state.adding:
            raise TypeError("Audit events are append-only; they are never updated.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        """Refused: the audit trail keeps every event."""
        raise TypeError("Audit events are append-only; they are never deleted.")
