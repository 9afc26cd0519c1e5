-- Change hints (ChangeNotifier): a cheap "did anything change" probe.

-- name: change_counters
-- $2 schema. Rows inserted, updated or deleted so far in the tables whose
-- changes admin surfaces track (cumulative statistics; a backend publishes
-- its counts within about a second of commit, at most ~10 s when idle).
SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint AS changes
FROM pg_stat_user_tables
WHERE schemaname = $2
  AND relname IN ('azync_jobs', 'azync_dags', 'azync_events', 'azync_workflow_executions')
  AND ($1::timestamptz IS NULL OR true)
