"""A run marked idle or busy again is a change the scheduling cycle must see.

The engine a worker keeps between cycles hears of a workload only through the change notes
the database writes (0011). The idle rule sets ``Run.idle_since``, which orders the victims
(idle runs first), so the update trigger of ``scheduler_run`` now also fires on that column.
"""

from django.db import migrations

# The run columns a cycle must see change (0011's list, plus ``idle_since``).
BEFORE = (
    "workload_id",
    "cluster_id",
    "placement",
    "started_at",
    "loan_for_id",
    "stop_requested_at",
    "preempted_by_id",
    "ended_at",
    "end_reason",
)
AFTER = (*BEFORE, "idle_since")
INSERT = "INSERT INTO scheduler_workloadchange (cluster_id, workload_id) VALUES"


def _changed(columns, distinct):
    return " OR ".join(f"OLD.{c} {distinct} NEW.{c}" for c in columns)


def _update_trigger(columns):
    def apply(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(
                "DROP TRIGGER IF EXISTS scheduler_run_changed_update ON scheduler_run; "
                "CREATE TRIGGER scheduler_run_changed_update AFTER UPDATE ON scheduler_run "
                f"FOR EACH ROW WHEN ({_changed(columns, 'IS DISTINCT FROM')}) "
                "EXECUTE FUNCTION scheduler_run_changed();",
                params=None,
            )
        elif vendor == "sqlite":
            schema_editor.execute("DROP TRIGGER IF EXISTS scheduler_run_changed_update", params=None)
            schema_editor.execute(
                "CREATE TRIGGER scheduler_run_changed_update AFTER UPDATE ON scheduler_run "
                f"FOR EACH ROW WHEN {_changed(columns, 'IS NOT')} "
                f"BEGIN {INSERT} (OLD.cluster_id, OLD.workload_id); "
                f"{INSERT} (NEW.cluster_id, NEW.workload_id); END",
                params=None,
            )

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0013_utilization"),
    ]

    operations = [migrations.RunPython(_update_trigger(AFTER), _update_trigger(BEFORE))]
