"""A pending workload's stored place becomes a sort key a cycle rewrites only where the order
changed (``scheduler.services.queue_keys``); the positions already stored sort like the order,
so they are kept as the first keys.

SQLite changes a column's type by building the table again, which drops its triggers: they
are made again as migration 0011 made them.
"""

from importlib import import_module

from django.db import migrations, models

_CHANGE_NOTES = import_module("scheduler.migrations.0011_workload_change")


def _sqlite_triggers_again(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        _CHANGE_NOTES._drop_triggers(apps, schema_editor)
        _CHANGE_NOTES._create_triggers(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0011_workload_change")]

    operations = [
        migrations.RenameField(
            model_name="workload", old_name="queue_position", new_name="queue_key"
        ),
        migrations.AlterField(
            model_name="workload",
            name="queue_key",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(_sqlite_triggers_again, _sqlite_triggers_again),
    ]
