-- A workflow-task lease says whether it left due tasks behind. A worker whose
-- lease came back short leased again at once to learn it was caught up: one
-- empty lease per workflow when results are awaited one by one. A short batch
-- alone does not prove it (a concurrent lease holds the lock of due tasks it
-- skipped, and may not take them all), so the lease looks, in its own
-- snapshot, for a due task it did not take: more_due is false only when there
-- is none, and the worker then sleeps until woken.
DROP FUNCTION azync_workflow_task_lease_load(
    timestamptz, text, int, interval, uuid[], bigint[], boolean, text[], text[], uuid[]);

CREATE FUNCTION azync_workflow_task_lease_load(p_now timestamp with time zone, p_kind text, p_limit integer, p_lease interval, p_known_ids uuid[], p_known_after bigint[], p_first boolean, p_queues text[], p_names text[], p_exclude uuid[])
 RETURNS TABLE(job azync_jobs, load_stale boolean, after_seq bigint, ex azync_workflow_executions, h_seq bigint[], h_type text[], h_payload bytea[], h_created timestamp with time zone[], s_id bigint[], s_name text[], s_message_id text[], s_payload bytea[], due_timer_seqs bigint[], more_due boolean)
 LANGUAGE plpgsql
 SET search_path FROM CURRENT
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_hashjoin TO 'off'
 SET enable_mergejoin TO 'off'
 SET enable_seqscan TO 'off'
AS $function$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH pairs AS (
        SELECT q.q, n.n FROM unnest(p_queues) AS q(q), unnest(p_names) AS n(n)
        UNION
        SELECT j.task_queue, j.workflow_name FROM azync_jobs j
        WHERE (p_queues IS NULL OR p_names IS NULL)
          AND j.source = 'workflow' AND j.task_key = '$wft' AND j.state IN ('pending', 'scheduled')
          AND (p_queues IS NULL OR j.task_queue = ANY(p_queues))
          AND (p_names IS NULL OR j.workflow_name = ANY(p_names))
    ), due AS (
        SELECT c.* FROM pairs p
        CROSS JOIN LATERAL (
            SELECT j.id, j.first_pass, azync_due_order(j.run_at, j.priority) AS o,
                   j.xmin::text AS v FROM azync_jobs j
            WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'pending'
              AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
              AND j.first_pass <= p_first
              AND j.run_at <= coalesce(p_now, now())
              AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
              AND NOT EXISTS (
                  SELECT 1 FROM azync_jobs a
                  WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                    AND a.state = 'active')
            ORDER BY j.first_pass, azync_due_order(j.run_at, j.priority), j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
    ), timed AS (
        SELECT c.* FROM pairs p
        CROSS JOIN LATERAL (
            SELECT j.id, j.first_pass, azync_due_order(j.run_at, j.priority) AS o,
                   j.xmin::text AS v FROM azync_jobs j
            WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
              AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
              AND j.run_at <= coalesce(p_now, now())
              AND j.first_pass <= p_first
              AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
              AND NOT EXISTS (
                  SELECT 1 FROM azync_jobs a
                  WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                    AND a.state = 'active')
            ORDER BY j.run_at, j.id
            LIMIT p_limit
            FOR UPDATE OF j SKIP LOCKED
        ) c
    ), picked AS (
        SELECT c.id, c.v FROM (SELECT * FROM due UNION ALL SELECT * FROM timed) c
        ORDER BY c.first_pass, c.o, c.id
        LIMIT p_limit
    ), left_due AS (
        -- Asked only when the lease came back short, in the lease's snapshot:
        -- a due task it did not take (another lease holds its lock, or it is
        -- not yet committed as taken) means the caller should lease again.
        SELECT CASE WHEN (SELECT count(*) FROM picked) < p_limit THEN EXISTS (
            SELECT 1 FROM pairs p
            CROSS JOIN LATERAL (
                SELECT 1 FROM azync_jobs j
                WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'pending'
                  AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
                  AND j.first_pass <= p_first
                  AND j.run_at <= coalesce(p_now, now())
                  AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
                  AND NOT (j.id = ANY(ARRAY(SELECT picked.id FROM picked)))
                  AND NOT EXISTS (
                      SELECT 1 FROM azync_jobs a
                      WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                        AND a.state = 'active')
            ) c) OR EXISTS (
            SELECT 1 FROM pairs p
            CROSS JOIN LATERAL (
                SELECT 1 FROM azync_jobs j
                WHERE j.source = 'workflow' AND j.task_key = '$wft' AND j.state = 'scheduled'
                  AND j.task_queue = p.q AND j.workflow_name = p.n AND j.kind = p_kind
                  AND j.run_at <= coalesce(p_now, now())
                  AND j.first_pass <= p_first
                  AND NOT (j.run_id = ANY(coalesce(p_exclude, '{}')))
                  AND NOT (j.id = ANY(ARRAY(SELECT picked.id FROM picked)))
                  AND NOT EXISTS (
                      SELECT 1 FROM azync_jobs a
                      WHERE a.run_id = j.run_id AND a.source = 'workflow' AND a.task_key = '$wft'
                        AND a.state = 'active')
            ) c) ELSE true END AS more
    ), leased AS (
        UPDATE azync_jobs j
        SET state = 'active',
            attempt = j.attempt + 1,
            lease_token = azync_lease_token(),
            lease_until = coalesce(p_now, now()) + p_lease,
            started_at = coalesce(p_now, now()),
            updated_at = coalesce(p_now, now())
        FROM picked
        WHERE j.id = picked.id
        RETURNING j AS job, picked.v AS locked_version
    ), known AS (
        SELECT k.id, k.after FROM unnest(p_known_ids, p_known_after) AS k(id, after)
    )
    SELECT l.job,
           (SELECT x.xmin::text FROM azync_jobs x WHERE x.id = (l.job).id)
               IS DISTINCT FROM l.locked_version,
           coalesce((SELECT k.after FROM known k WHERE k.id = (l.job).run_id), 0),
           e,
           h.h_seq, h.h_type, h.h_payload, h.h_created, s.s_id, s.s_name, s.s_message_id, s.s_payload,
           ARRAY(SELECT t.seq FROM azync_workflow_timers t
                 WHERE t.workflow_id = e.id AND t.fired_at IS NULL
                   AND t.fire_at <= coalesce(p_now, now())
                 ORDER BY t.fire_at, t.seq),
           (SELECT m.more FROM left_due m)
    FROM leased l
    JOIN azync_workflow_executions e ON e.id = (l.job).run_id
    CROSS JOIN LATERAL (
        SELECT array_agg(x.seq ORDER BY x.seq) AS h_seq, array_agg(x.type ORDER BY x.seq) AS h_type,
               array_agg(x.payload ORDER BY x.seq) AS h_payload,
               array_agg(x.created_at ORDER BY x.seq) AS h_created
        FROM azync_workflow_history x
        WHERE x.workflow_id = e.id
          AND x.seq > coalesce((SELECT k.after FROM known k WHERE k.id = (l.job).run_id), 0)
    ) h
    CROSS JOIN LATERAL (
        SELECT array_agg(g.id ORDER BY g.id) AS s_id, array_agg(g.name ORDER BY g.id) AS s_name,
               array_agg(g.message_id ORDER BY g.id) AS s_message_id,
               array_agg(g.payload ORDER BY g.id) AS s_payload
        FROM azync_workflow_signals g
        WHERE g.workflow_id = e.id AND g.consumed_seq IS NULL
    ) s;
END
$function$;
