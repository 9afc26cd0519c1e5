-- A DAG run's failure reason names every dead task with its error, root cause
-- first: ordered by when each task died (failed_at, then key), tolerated
-- deaths (every dependent ignores dead deps) included and marked, each error
-- cut to 500 characters. Compensation tasks ('comp:*') are left out: their
-- deaths are reported in their own clause. NULL when no task is dead.
-- One function so the failure policy and the completion pass say the same.
CREATE FUNCTION azync_dag_dead_reason(run uuid) RETURNS text
    LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT 'dead tasks: ' || string_agg(
               x.task_key
               || CASE WHEN EXISTS (SELECT 1 FROM azync_dag_deps e
                                    WHERE e.dag_id = x.dag_id AND e.depends_on_key = x.task_key)
                        AND NOT EXISTS (SELECT 1 FROM azync_dag_deps e
                                        JOIN azync_jobs y
                                          ON y.dag_id = e.dag_id AND y.task_key = e.task_key
                                        WHERE e.dag_id = x.dag_id
                                          AND e.depends_on_key = x.task_key
                                          AND NOT y.ignore_dead_deps)
                       THEN ' [tolerated]' ELSE '' END
               || CASE WHEN x.last_error = '' THEN ''
                       WHEN length(x.last_error) > 500
                       THEN ': ' || left(x.last_error, 497) || '...'
                       ELSE ': ' || x.last_error END,
               '; ' ORDER BY x.failed_at NULLS LAST, x.updated_at, x.task_key)
    FROM azync_jobs x
    WHERE x.dag_id = run AND x.state = 'dead' AND x.task_key NOT LIKE 'comp:%'
$$;
