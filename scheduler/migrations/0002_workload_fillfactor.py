"""Leave room in workload pages so a cycle's reason/position rewrite is a HOT update.

Every cycle rewrites the reason and queue position of up to every pending workload. None of
those columns is indexed, so with free space on the page PostgreSQL updates the row in place
of its page (heap-only tuple) instead of touching all six indexes of the table.
"""

from django.db import migrations


def set_fillfactor(apps, schema_editor, value: int = 70) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE scheduler_workload SET (fillfactor = {value})")


def reset_fillfactor(apps, schema_editor) -> None:
    set_fillfactor(apps, schema_editor, value=100)


class Migration(migrations.Migration):
    dependencies = [("scheduler", "0001_initial")]

    operations = [migrations.RunPython(set_fillfactor, reset_fillfactor)]
