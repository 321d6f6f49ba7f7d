"""The audit trail is append-only: the app and the database refuse edits and deletes; only
deleting an organization purges its events."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection, transaction

from governance.models import AuditEvent
from governance.services.allocations import allocation_split
from governance.services.audit import audit_events_purge, audit_record

pytestmark = pytest.mark.django_db


# --- Append-only -----------------------------------------------------------------------------


def test_events_cannot_be_edited_or_deleted_by_the_app_or_in_the_database(personas):
    p = personas
    allocation_split(
        actor=p.program_manager,
        parent=p.program_a,
        cluster=p.cluster,
        percents={p.project_a1: Decimal("55")},
        reason="Deadline.",
    )
    event = AuditEvent.objects.get()
    event.reason = "Rewritten."
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=event.pk).update(reason="Rewritten.")
    with pytest.raises(TypeError):
        AuditEvent.objects.all().delete()
    for sql in (
        "UPDATE governance_auditevent SET reason = 'Rewritten.'",
        "DELETE FROM governance_auditevent",
    ):
        with (
            pytest.raises(Exception, match="append-only"),
            transaction.atomic(),
            connection.cursor() as cursor,
        ):
            cursor.execute(sql)
    assert AuditEvent.objects.get(pk=event.pk).reason == "Deadline."


def test_deleting_the_organization_purges_its_events_only(personas):
    from tests.factories import OrganizationFactory

    p = personas
    other = OrganizationFactory(name="Elsewhere", slug="elsewhere")
    for org in (p.organization, other):
        audit_record(
            action="share_change",
            organization_id=org.pk,
            actor=None,
            object_kind="organization",
            object_id=org.pk,
            object_label=str(org),
        )
    assert audit_events_purge(organization=p.organization) == 1
    assert list(AuditEvent.objects.values_list("organization_id", flat=True)) == [other.pk]
    # The purge's setting ended with it: a plain delete is refused again.
    with (
        pytest.raises(Exception, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute("DELETE FROM governance_auditevent")
