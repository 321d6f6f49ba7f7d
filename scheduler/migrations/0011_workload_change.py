"""Notes of workload changes for the scheduling cycle (``WorkloadChange``), written by triggers.

On PostgreSQL and SQLite alike, so the quick start keeps its engine between cycles too.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0010_workload_burst_rank"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedulingcycle",
            name="engine",
            field=models.CharField(
                blank=True,
                help_text="how the cycle got its engine: 'kept' (the worker's, brought up to "
                "date with what changed) or why it was built from the database",
                max_length=80,
            ),
        ),
        migrations.CreateModel(
            name="WorkloadChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("cluster_id", models.BigIntegerField()),
                ("workload_id", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["cluster_id"], name="workload_change_by_cluster")],
            },
        ),
    ]


# What a scheduling cycle must see change. A cycle's own rewrite of reasons and queue positions
# is not among them (it knows what it wrote and the engine does not read them), nor is
# accounting's ``accounted_until``: those updates, the bulk of all writes, log nothing.
# Blocked-since and patience are engine memory the cycle writes too, but a workload whose
# copy changed is read again, so the kept engine holds exactly what a rebuild would read.
WORKLOAD_COLUMNS = (
    "state",
    "project_id",
    "cluster_id",
    "gpus",
    "nodes",
    "min_runtime_seconds",
    "resumable",
    "priority",
    "submitted_at",
    "state_changed_at",
    "burst_rank",
    "blocked_since",
    "patient_until",
)
RUN_COLUMNS = (
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


def _changed(columns, distinct):
    return " OR ".join(f"OLD.{c} {distinct} NEW.{c}" for c in columns)


def _postgresql_sql():
    sql = []
    for table, key, columns in (
        ("scheduler_workload", "id", WORKLOAD_COLUMNS),
        ("scheduler_run", "workload_id", RUN_COLUMNS),
    ):
        sql.append(f"""
CREATE OR REPLACE FUNCTION {table}_changed() RETURNS trigger AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        INSERT INTO scheduler_workloadchange (cluster_id, workload_id)
        VALUES (OLD.cluster_id, OLD.{key});
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO scheduler_workloadchange (cluster_id, workload_id)
        VALUES (NEW.cluster_id, NEW.{key});
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER {table}_changed_insert_delete
    AFTER INSERT OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {table}_changed();
CREATE TRIGGER {table}_changed_update
    AFTER UPDATE ON {table}
    FOR EACH ROW WHEN ({_changed(columns, "IS DISTINCT FROM")})
    EXECUTE FUNCTION {table}_changed();
""")
    return sql


def _sqlite_sql():
    sql = []
    for table, key, columns in (
        ("scheduler_workload", "id", WORKLOAD_COLUMNS),
        ("scheduler_run", "workload_id", RUN_COLUMNS),
    ):
        insert = "INSERT INTO scheduler_workloadchange (cluster_id, workload_id) VALUES"
        sql += [
            f"CREATE TRIGGER {table}_changed_insert AFTER INSERT ON {table} "
            f"BEGIN {insert} (NEW.cluster_id, NEW.{key}); END",
            f"CREATE TRIGGER {table}_changed_delete AFTER DELETE ON {table} "
            f"BEGIN {insert} (OLD.cluster_id, OLD.{key}); END",
            f"CREATE TRIGGER {table}_changed_update AFTER UPDATE ON {table} "
            f"FOR EACH ROW WHEN {_changed(columns, 'IS NOT')} "
            f"BEGIN {insert} (OLD.cluster_id, OLD.{key}); {insert} (NEW.cluster_id, NEW.{key}); END",
        ]
    return sql


def _create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"postgresql": _postgresql_sql, "sqlite": _sqlite_sql}.get(vendor)
    for statement in statements() if statements else ():
        schema_editor.execute(statement, params=None)


def _drop_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for table in ("scheduler_workload", "scheduler_run"):
        if vendor == "postgresql":
            schema_editor.execute(
                f"DROP TRIGGER IF EXISTS {table}_changed_insert_delete ON {table}; "
                f"DROP TRIGGER IF EXISTS {table}_changed_update ON {table}; "
                f"DROP FUNCTION IF EXISTS {table}_changed();",
                params=None,
            )
        elif vendor == "sqlite":
            for suffix in ("insert", "delete", "update"):
                schema_editor.execute(
                    f"DROP TRIGGER IF EXISTS {table}_changed_{suffix}", params=None
                )


Migration.operations.append(migrations.RunPython(_create_triggers, _drop_triggers))
