-- The job lease plans once per connection, as the workflow-task lease does
-- (0043): its statement moves into a function whose statements use the
-- generic plan, joins and scans pinned to index nested loops (a generic plan
-- takes the LIMIT for a tenth of the candidates). The named query job_dequeue
-- calls it.
CREATE FUNCTION azync_job_lease(
    p_at timestamptz, p_source text, p_kind text, p_limit int, p_lease interval,
    p_default_max int, p_override boolean, p_queues text[], p_channel text)
RETURNS SETOF azync_jobs
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
SET enable_hashjoin = off
SET enable_mergejoin = off
SET enable_seqscan = off
AS $function$
BEGIN
    RETURN QUERY
    WITH limited AS (
        SELECT EXISTS (SELECT 1 FROM azync_limit_scopes s WHERE s.source = p_source AND s.kind = p_kind) AS yes
    ), qlim AS (
        SELECT coalesce(array_agg(q.q), '{}') AS qs FROM unnest(p_queues) AS q(q)
        WHERE (p_source = 'queue' OR p_kind LIKE '$op:%')
          AND EXISTS (SELECT 1 FROM azync_limit_scopes s
                      WHERE s.source = 'task_queue' AND s.kind = q.q)
    ), lim AS (
        SELECT l.* FROM azync_job_lease_limited(
            p_at, p_source, p_kind,
            CASE WHEN (SELECT yes FROM limited) THEN p_queues ELSE (SELECT qs FROM qlim) END,
            p_limit, p_lease, p_default_max, p_override, p_channel) l
        WHERE (SELECT yes FROM limited) OR cardinality((SELECT qs FROM qlim)) > 0
    ), picked AS (
        SELECT c.id FROM unnest(p_queues) AS q(q)
        CROSS JOIN LATERAL (
            SELECT j.id, azync_due_order(j.run_at, j.priority) AS o FROM azync_jobs j
            WHERE j.state = 'pending' AND j.source = p_source AND j.kind = p_kind AND j.task_queue = q.q
              AND j.run_at <= p_at
              -- past a deadline it is the timeouts step's, not a new attempt's
              AND (j.start_deadline IS NULL OR j.attempt > 0
                   OR j.start_deadline > p_at)
              AND (j.close_deadline IS NULL OR j.close_deadline > p_at)
            ORDER BY azync_due_order(j.run_at, j.priority), j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
        WHERE NOT (SELECT yes FROM limited) AND q.q <> ALL ((SELECT qs FROM qlim)::text[])
        ORDER BY c.o, c.id
        LIMIT p_limit - (SELECT count(*) FROM lim)
    ), up AS (
    UPDATE azync_jobs j
    SET state = 'active',
        attempt = j.attempt + 1,
        lease_token = azync_lease_token(),
        lease_until = p_at + p_lease,
        started_at = p_at,
        updated_at = p_at,
        max_attempts = CASE
            WHEN j.max_attempts_explicit THEN j.max_attempts
            WHEN j.started_at IS NULL AND p_override THEN p_default_max
            WHEN j.max_attempts <= 0 THEN p_default_max
            ELSE j.max_attempts END
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*
    )
    SELECT * FROM up
    UNION ALL
    SELECT * FROM lim;
END
$function$;
