"""Where each project stands in its cluster's scheduling order, kept once per project
(``ProjectStanding``), and a flag on each workload whose reason continues it.

The flag is added with ``ALTER TABLE … ADD COLUMN`` on every database: Django's own way on
SQLite rebuilds the whole table, which would drop the change-note triggers of 0011 and
leave the quick start's kept engine blind to every change.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('governance', '0009_idle_rule_kinds'),
        ('scheduler', '0016_what_if_run'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name='workload',
                    name='reason_follows_standing',
                    field=models.BooleanField(default=False),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE scheduler_workload "
                    "ADD COLUMN reason_follows_standing boolean NOT NULL DEFAULT false",
                    "ALTER TABLE scheduler_workload DROP COLUMN reason_follows_standing",
                ),
            ],
        ),
        migrations.CreateModel(
            name='ProjectStanding',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('phrase', models.TextField()),
                ('updated_at', models.DateTimeField()),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='governance.cluster')),
                ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='governance.project')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('cluster', 'project'), name='standing_per_project')],
            },
        ),
    ]
