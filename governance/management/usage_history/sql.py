"""The SQL that writes a usage history in bulk (``manage.py generate_usage_history``).

Each statement reads the ``usage_history_projects`` temporary table (one row per project and
cluster: its figures and its two runs) that ``governance.management.usage_history.tree``
fills, and takes ``start``, ``end`` and ``seed`` as parameters. PostgreSQL only.
"""

# One row per (cluster, project, hour), hour-major. ``p`` holds each project's figures on each
# cluster: entitled GPU-seconds per hour, base appetite, nominal GPUs for demand.
ROLLUP_SQL = """
INSERT INTO scheduler_usagehour
    (project_id, cluster_id, hour, budgeted_gpu_seconds, burst_gpu_seconds, free_gpu_seconds,
     entitled_gpu_seconds, demand_gpu_seconds)
SELECT project_id, cluster_id, hour,
       LEAST(charged, entitled), charged - LEAST(charged, entitled), free, entitled, demand
FROM (
    SELECT p.project_id, p.cluster_id, h.hour, p.entitled,
           d.demand_gpus * 3600 AS demand,
           floor(d.demand_gpus * (0.5 + 0.5 * r.u2))::numeric * 3600 AS charged,
           CASE WHEN r.u3 < 0.3 THEN floor(r.u3 * 20)::numeric * 3600 ELSE 0 END AS free
    FROM generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 hour',
                         interval '1 hour') AS h(hour)
    CROSS JOIN usage_history_projects p
    CROSS JOIN LATERAL (
        SELECT (hashint8extended(k, %(seed)s) & 1048575)::float8 / 1048576 AS u1,
               (hashint8extended(k, %(seed)s + 1) & 1048575)::float8 / 1048576 AS u2,
               (hashint8extended(k, %(seed)s + 2) & 1048575)::float8 / 1048576 AS u3
        FROM (SELECT p.project_id * 1000003 + p.cluster_id * 7919
                     + extract(epoch FROM h.hour)::bigint / 3600 AS k) AS key
    ) r
    CROSS JOIN LATERAL (
        SELECT floor(p.appetite * p.nominal_gpus * 2 * r.u1
                     * (0.75 + 0.25 * sin(2 * pi() * extract(hour FROM h.hour) / 24)))::numeric
               AS demand_gpus
    ) d
    ORDER BY h.hour, p.cluster_id, p.project_id
) AS x
"""

# Ledger pieces of each rollup hour: budgeted from the top of the hour, burst right after it
# (the charged run holds its GPUs the whole hour), free on the project's free-lane run.
LEDGER_SQL = """
INSERT INTO scheduler_usagerecord
    (run_id, source, external_id, project_id, cluster_id, interval_start, interval_end, gpus,
     gpu_seconds, charge, created_at)
SELECT run_id, '', '', project_id, cluster_id, s, e, gpus, amount, charge, now()
FROM (
    SELECT p.charged_run_id AS run_id, u.project_id, u.cluster_id, u.hour AS s,
           u.hour + make_interval(secs => round(u.budgeted_gpu_seconds
               / ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600), 6)) AS e,
           ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600)::int AS gpus,
           u.budgeted_gpu_seconds AS amount, 'budgeted' AS charge
    FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
    WHERE u.budgeted_gpu_seconds > 0 AND u.hour >= %(start)s AND u.hour < %(end)s
    UNION ALL
    SELECT p.charged_run_id, u.project_id, u.cluster_id,
           u.hour + make_interval(secs => round(u.budgeted_gpu_seconds
               / ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600), 6)),
           u.hour + interval '1 hour',
           ((u.budgeted_gpu_seconds + u.burst_gpu_seconds) / 3600)::int,
           u.burst_gpu_seconds, 'burst'
    FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
    WHERE u.burst_gpu_seconds > 0 AND u.hour >= %(start)s AND u.hour < %(end)s
    UNION ALL
    SELECT p.free_run_id, u.project_id, u.cluster_id, u.hour, u.hour + interval '1 hour',
           (u.free_gpu_seconds / 3600)::int, u.free_gpu_seconds, 'free'
    FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
    WHERE u.free_gpu_seconds > 0 AND u.hour >= %(start)s AND u.hour < %(end)s
) AS pieces
ORDER BY s, cluster_id, project_id
"""

ENTITLEMENT_SQL = """
INSERT INTO scheduler_entitlementrecord
    (project_id, cluster_id, interval_start, interval_end, effective_share, healthy_gpus,
     demand_gpus, entitled_gpu_seconds, demand_gpu_seconds)
SELECT u.project_id, u.cluster_id, u.hour, u.hour + interval '1 hour', p.effective_share,
       p.healthy_gpus, (u.demand_gpu_seconds / 3600)::int, u.entitled_gpu_seconds,
       u.demand_gpu_seconds
FROM scheduler_usagehour u JOIN usage_history_projects p USING (project_id, cluster_id)
WHERE u.hour >= %(start)s AND u.hour < %(end)s
ORDER BY u.hour, u.cluster_id, u.project_id
"""

PROJECTS_TABLE_SQL = (
    "CREATE TEMPORARY TABLE usage_history_projects (project_id bigint, "
    "cluster_id bigint, entitled numeric, effective_share numeric, healthy_gpus int, "
    "appetite float8, nominal_gpus float8, charged_run_id bigint, free_run_id bigint)"
    " ON COMMIT DROP"
)
PROJECTS_ROW_SQL = "INSERT INTO usage_history_projects VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
