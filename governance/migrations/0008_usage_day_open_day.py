"""The daily usage cache also keeps the day in progress, up to the last hour accounting will
not change (``UsageDay.through``; whole days leave it empty), and each cluster's cursor says
which of those rows readers take (``UsageDayCursor.open_through``) and which generation of
the cached figures is current (``generation``, new after any late write). Rows already
cached are whole days: they keep an empty ``through`` and stay unique per cluster, project
and day."""

import uuid
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_notifications"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="usageday",
            name="usage_day_unique",
        ),
        migrations.AddField(
            model_name="usageday",
            name="through",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="usagedaycursor",
            name="generation",
            field=models.UUIDField(default=uuid.uuid4),
        ),
        migrations.AddField(
            model_name="usagedaycursor",
            name="open_through",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="usageday",
            constraint=models.UniqueConstraint(
                condition=models.Q(("through__isnull", True)),
                fields=("cluster", "project", "day"),
                name="usage_day_unique",
            ),
        ),
        migrations.AddConstraint(
            model_name="usageday",
            constraint=models.UniqueConstraint(
                condition=models.Q(("through__isnull", False)),
                fields=("cluster", "project", "day", "through"),
                name="usage_day_part_unique",
            ),
        ),
    ]
