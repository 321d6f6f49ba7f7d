"""GPU telemetry summed per cluster, project and UTC day (``UtilizationDay``), kept by triggers.

The pages sum telemetry over whole days (cluster health over 30 days, owed vs delivered, the
month's usage report); read from the hour rows that is some 80,000 rows per cluster and
month, most of a page's time. Triggers on ``scheduler_utilizationhour`` add every insert,
update and delete of an hour row to its day row in the same transaction, so the day rows are
exact at every moment, late telemetry included, and no Python code path can forget them.
The rows already stored are summed into the new table once.
"""

import django.db.models.deletion
from django.db import migrations, models

COLUMNS = "cluster_id, project_id, day, allocated_gpu_seconds, busy_gpu_seconds"
POSTGRESQL = f"""
CREATE OR REPLACE FUNCTION scheduler_utilizationhour_to_day() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO scheduler_utilizationday ({COLUMNS})
        VALUES (OLD.cluster_id, OLD.project_id, (OLD.hour AT TIME ZONE 'UTC')::date,
                -OLD.allocated_gpu_seconds, -OLD.busy_gpu_seconds)
        ON CONFLICT (cluster_id, day, project_id) DO UPDATE SET
            allocated_gpu_seconds =
                scheduler_utilizationday.allocated_gpu_seconds + EXCLUDED.allocated_gpu_seconds,
            busy_gpu_seconds =
                scheduler_utilizationday.busy_gpu_seconds + EXCLUDED.busy_gpu_seconds;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO scheduler_utilizationday ({COLUMNS})
        VALUES (NEW.cluster_id, NEW.project_id, (NEW.hour AT TIME ZONE 'UTC')::date,
                NEW.allocated_gpu_seconds, NEW.busy_gpu_seconds)
        ON CONFLICT (cluster_id, day, project_id) DO UPDATE SET
            allocated_gpu_seconds =
                scheduler_utilizationday.allocated_gpu_seconds + EXCLUDED.allocated_gpu_seconds,
            busy_gpu_seconds =
                scheduler_utilizationday.busy_gpu_seconds + EXCLUDED.busy_gpu_seconds;
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER scheduler_utilizationhour_day_insert_delete
    AFTER INSERT OR DELETE ON scheduler_utilizationhour
    FOR EACH ROW EXECUTE FUNCTION scheduler_utilizationhour_to_day();
CREATE TRIGGER scheduler_utilizationhour_day_update
    AFTER UPDATE ON scheduler_utilizationhour
    FOR EACH ROW WHEN (
        OLD.allocated_gpu_seconds IS DISTINCT FROM NEW.allocated_gpu_seconds
        OR OLD.busy_gpu_seconds IS DISTINCT FROM NEW.busy_gpu_seconds
        OR OLD.cluster_id IS DISTINCT FROM NEW.cluster_id
        OR OLD.project_id IS DISTINCT FROM NEW.project_id
        OR OLD.hour IS DISTINCT FROM NEW.hour
    )
    EXECUTE FUNCTION scheduler_utilizationhour_to_day();
INSERT INTO scheduler_utilizationday ({COLUMNS})
SELECT cluster_id, project_id, (hour AT TIME ZONE 'UTC')::date,
       SUM(allocated_gpu_seconds), SUM(busy_gpu_seconds)
FROM scheduler_utilizationhour GROUP BY 1, 2, 3;
ANALYZE scheduler_utilizationday;
"""
POSTGRESQL_DROP = """
DROP TRIGGER IF EXISTS scheduler_utilizationhour_day_insert_delete ON scheduler_utilizationhour;
DROP TRIGGER IF EXISTS scheduler_utilizationhour_day_update ON scheduler_utilizationhour;
DROP FUNCTION IF EXISTS scheduler_utilizationhour_to_day();
"""


def _sqlite_upsert(row: str, sign: str) -> str:
    return (
        f"INSERT INTO scheduler_utilizationday ({COLUMNS}) VALUES ({row}.cluster_id, "
        f"{row}.project_id, date({row}.hour), {sign}{row}.allocated_gpu_seconds, "
        f"{sign}{row}.busy_gpu_seconds) ON CONFLICT (cluster_id, day, project_id) DO UPDATE SET "
        "allocated_gpu_seconds = allocated_gpu_seconds + excluded.allocated_gpu_seconds, "
        "busy_gpu_seconds = busy_gpu_seconds + excluded.busy_gpu_seconds;"
    )


SQLITE = [
    "CREATE TRIGGER scheduler_utilizationhour_day_insert AFTER INSERT ON "
    f"scheduler_utilizationhour BEGIN {_sqlite_upsert('NEW', '')} END",
    "CREATE TRIGGER scheduler_utilizationhour_day_delete AFTER DELETE ON "
    f"scheduler_utilizationhour BEGIN {_sqlite_upsert('OLD', '-')} END",
    "CREATE TRIGGER scheduler_utilizationhour_day_update AFTER UPDATE ON "
    f"scheduler_utilizationhour BEGIN {_sqlite_upsert('OLD', '-')} "
    f"{_sqlite_upsert('NEW', '')} END",
    f"INSERT INTO scheduler_utilizationday ({COLUMNS}) SELECT cluster_id, project_id, "
    "date(hour), SUM(allocated_gpu_seconds), SUM(busy_gpu_seconds) "
    "FROM scheduler_utilizationhour GROUP BY 1, 2, 3",
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS scheduler_utilizationhour_day_{name}"
    for name in ("insert", "delete", "update")
]


def _create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": [POSTGRESQL], "sqlite": SQLITE}.get(vendor, [])
    for statement in statements:
        schema_editor.execute(statement, params=None)


def _drop_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": [POSTGRESQL_DROP], "sqlite": SQLITE_DROP}.get(vendor, [])
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0009_idle_rule_kinds"),
        ("scheduler", "0014_run_idle_change_note"),
    ]

    operations = [
        migrations.CreateModel(
            name="UtilizationDay",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField(help_text="UTC day.")),
                (
                    "allocated_gpu_seconds",
                    models.DecimalField(decimal_places=6, default=0, max_digits=24),
                ),
                (
                    "busy_gpu_seconds",
                    models.DecimalField(decimal_places=6, default=0, max_digits=24),
                ),
                (
                    "cluster",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="governance.cluster",
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="governance.project",
                    ),
                ),
            ],
            options={
                "ordering": ["day", "cluster_id", "project_id"],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("cluster", "day", "project"), name="utilization_day_unique"
                    )
                ],
            },
        ),
        migrations.RunPython(_create_triggers, _drop_triggers),
    ]
