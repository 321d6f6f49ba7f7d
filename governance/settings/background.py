"""Celery, the live scheduling loop, the simulated executor and demo replay, and the periodic
tasks (beat schedule)."""

from __future__ import annotations

from celery.schedules import crontab

from governance.settings.core import DEBUG
from governance.settings.environment import env_bool, env_int, env_list, env_str

# --- Celery -----------------------------------------------------------------------------
# Without a broker, tasks run in-process (eager) so the quick start needs no services.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 240)
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_TASK_DEFAULT_QUEUE", "governance")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
# The live scheduling loop (docs/live-loop.md).
SCHEDULER_CYCLE_SECONDS = env_int("SCHEDULER_CYCLE_SECONDS", 5)
SCHEDULER_ACCOUNT_SECONDS = env_int("SCHEDULER_ACCOUNT_SECONDS", 60)
SCHEDULER_HEARTBEAT_CHECK_SECONDS = env_int("SCHEDULER_HEARTBEAT_CHECK_SECONDS", 15)
SCHEDULER_AGENT_TIMEOUT_SECONDS = env_int("SCHEDULER_AGENT_TIMEOUT_SECONDS", 60)
SCHEDULER_STOP_GRACE_SECONDS = env_int("SCHEDULER_STOP_GRACE_SECONDS", 30)
SCHEDULER_WINDOW_SECONDS = env_int("SCHEDULER_WINDOW_SECONDS", 7 * 86400)
SCHEDULER_POLICY = env_str("SCHEDULER_POLICY", "fairshare")
# A worker keeps the engine between a cluster's cycles and reads only what changed
# (scheduler/services/cycle_kept.py); it rebuilds it from the database at least this often.
SCHEDULER_KEEP_ENGINE = env_bool("SCHEDULER_KEEP_ENGINE", True)
SCHEDULER_REBUILD_SECONDS = env_int("SCHEDULER_REBUILD_SECONDS", 600)
# Enqueued cycles are coalesced to one queued per cluster by a Redis flag; its lifetime
# bounds how long a lost task's flag can hold back enqueues (scheduler/services/cycle_queue.py).
SCHEDULER_CYCLE_QUEUED_TTL_SECONDS = env_int(
    "SCHEDULER_CYCLE_QUEUED_TTL_SECONDS", 4 * SCHEDULER_CYCLE_SECONDS
)
# Fault injection for the failure tests only (a cycle sleeps this long holding its lock).
SCHEDULER_CYCLE_PAUSE_SECONDS = env_int("SCHEDULER_CYCLE_PAUSE_SECONDS", 0)
CELERY_BEAT_SCHEDULE = {
    "apply-due-allocations": {
        "task": "governance.tasks.allocations_apply_due",
        "schedule": env_int("ALLOCATIONS_APPLY_EVERY_SECONDS", 60),
    },
    "scheduler-cycle": {
        "task": "scheduler.tasks.scheduler_cycle_all",
        "schedule": SCHEDULER_CYCLE_SECONDS,
        # A cycle older than two periods is stale: the next one supersedes it.
        "options": {"expires": 2 * SCHEDULER_CYCLE_SECONDS},
    },
    "usage-account": {
        "task": "scheduler.tasks.usage_account",
        "schedule": SCHEDULER_ACCOUNT_SECONDS,
    },
    "nodes-expire-heartbeats": {
        "task": "scheduler.tasks.nodes_expire_heartbeats",
        "schedule": SCHEDULER_HEARTBEAT_CHECK_SECONDS,
    },
    # Runs whose GPUs stay allocated but nearly unused are marked idle, owners told once.
    "idle-rule": {
        "task": "scheduler.tasks.idle_rule_apply_all",
        "schedule": 60,
        "options": {"expires": 120},
    },
}
# The simulated executor and the demo replay (docs/agents.md).
# A developer's machine (`make run`) runs the demo's simulated nodes; a server only when asked.
SIMULATED_EXECUTOR_ENABLED = env_bool("SIMULATED_EXECUTOR_ENABLED", DEBUG)
SIMULATED_EXECUTOR_CLUSTERS = env_list("SIMULATED_EXECUTOR_CLUSTERS", ["philly/h100"])
SIMULATED_EXECUTOR_SPEEDUP = env_int("SIMULATED_EXECUTOR_SPEEDUP", 1)
SIMULATED_EXECUTOR_SECONDS = env_int("SIMULATED_EXECUTOR_SECONDS", 2)
SIMULATED_EXECUTOR_DEFAULT_DURATION_SECONDS = env_int(
    "SIMULATED_EXECUTOR_DEFAULT_DURATION_SECONDS", 3600
)
DEMO_REPLAY_ENABLED = env_bool("DEMO_REPLAY_ENABLED", DEBUG)
DEMO_REPLAY_MAX_PENDING = env_int("DEMO_REPLAY_MAX_PENDING", 300)
# The finance usage report for the previous month, mailed on the 1st (docs/reports.md).
CELERY_BEAT_SCHEDULE["reports-send-monthly"] = {
    "task": "governance.tasks.reports_send_monthly",
    "schedule": crontab(minute=0, hour=6, day_of_month=1),  # 06:00 on the 1st
}
# Roll closed days into the daily usage cache (reports and dashboards read whole days from it).
# Notification e-mails whose worker stopped mid-send are marked failed (never sent twice), and
# queued ones whose task was lost (the broker was away) are sent (docs/notifications.md).
CELERY_BEAT_SCHEDULE["notification-emails-sweep"] = {
    "task": "governance.tasks.notification_emails_sweep",
    "schedule": 300,
}
# A team that got less than this share of the GPU-hours it was owed over the last 24 hours
# has its PIs and program managers told (at most once a day; docs/notifications.md).
DELIVERY_ALERT_RATIO = float(env_str("DELIVERY_ALERT_RATIO", "0.9"))
# Shares of a month's entitlement whose passing (by charged GPU-hours) a team is told about.
MONTH_USAGE_THRESHOLDS = [float(x) for x in env_list("MONTH_USAGE_THRESHOLDS", ["0.8", "1.0"])]
CELERY_BEAT_SCHEDULE["delivery-alerts"] = {
    "task": "scheduler.tasks.delivery_alerts_check",
    "schedule": crontab(minute=15),  # every hour
}
CELERY_BEAT_SCHEDULE["notification-digests-send"] = {
    "task": "governance.tasks.notification_digests_send",
    "schedule": crontab(minute=10),  # every hour; each person gets at most one a day
}
CELERY_BEAT_SCHEDULE["usage-days-refresh"] = {
    "task": "governance.tasks.usage_days_refresh",
    "schedule": crontab(minute=5),  # five past every hour
}
CELERY_BEAT_SCHEDULE["simulated-executor"] = {
    "task": "scheduler.executors.tasks.simulated_executor_tick",
    "schedule": SIMULATED_EXECUTOR_SECONDS,
    "options": {"expires": 4 * SIMULATED_EXECUTOR_SECONDS},
}
# Slurm sites (docs/slurm.md): every enabled SlurmConnection is synced and its usage imported;
# with no connection configured both entries do nothing.
CELERY_BEAT_SCHEDULE["slurm-sync"] = {
    "task": "scheduler.tasks.slurm_sync_all",
    "schedule": env_int("SLURM_SYNC_SECONDS", 600),
}
CELERY_BEAT_SCHEDULE["slurm-import-usage"] = {
    "task": "scheduler.tasks.slurm_import_usage_all",
    "schedule": env_int("SLURM_IMPORT_SECONDS", 300),
}
