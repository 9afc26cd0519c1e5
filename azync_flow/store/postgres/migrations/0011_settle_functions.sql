-- One home for the three steps every job verb repeated: counting into the
-- stats, settling a leased job, and scheduling an execution's one runnable
-- workflow task. Each named query that needs one calls the function.

-- One counter delta of a (source, kind): what azync_job_count adds.
CREATE TYPE azync_job_delta AS (
    source    text,
    kind      text,
    enqueued  bigint,
    processed bigint,
    failed    bigint,
    reaped    bigint
);

-- The one stats write: the deltas summed per (source, kind) and added to one
-- random shard of the day of p_at, rows written in (source, kind) order, so
-- a transaction counting several kinds locks their rows in one global order
-- (two transactions never wait on each other's stats rows). Returns the
-- number of rows written (NULL for NULL deltas: nothing to count). A caller that must lock stats rows after every
-- other row calls it from the last step of its statement.
CREATE FUNCTION azync_job_count(p_at timestamptz, p_deltas azync_job_delta[])
    RETURNS bigint
    LANGUAGE plpgsql STRICT SET search_path FROM CURRENT AS $$
DECLARE
    written bigint;
BEGIN
    WITH d AS (
        SELECT u.source, u.kind, sum(coalesce(u.enqueued, 0))::bigint AS enq,
               sum(coalesce(u.processed, 0))::bigint AS proc,
               sum(coalesce(u.failed, 0))::bigint AS failed,
               sum(coalesce(u.reaped, 0))::bigint AS reaped
        FROM unnest(p_deltas) AS u
        GROUP BY u.source, u.kind
    ), w AS (
        INSERT INTO azync_job_stats AS s (source, kind, day, shard, enqueued, processed,
                                          failed, reaped)
        SELECT d.source, d.kind, (p_at AT TIME ZONE 'UTC')::date, (random() * 7)::int,
               d.enq, d.proc, d.failed, d.reaped
        FROM d
        ORDER BY d.source, d.kind
        ON CONFLICT (source, kind, day, shard) DO UPDATE
            SET enqueued = s.enqueued + EXCLUDED.enqueued,
                processed = s.processed + EXCLUDED.processed,
                failed = s.failed + EXCLUDED.failed,
                reaped = s.reaped + EXCLUDED.reaped
        RETURNING 1
    )
    SELECT count(*) INTO written FROM w;
    RETURN written;
END
$$;

-- The terminal settle of leased jobs: each active job of p_ids still holding
-- its token in p_tokens becomes p_state ('succeeded', 'skipped' or 'dead').
-- succeeded stores p_result when given; skipped and dead store p_error as
-- last_error; dead also records the attempt's failure. With p_count the
-- settle is counted (processed, or failed when dead); without, the caller
-- counts it in its own last stats write. Returns the jobs settled.
CREATE FUNCTION azync_job_settle(
    p_at timestamptz, p_ids uuid[], p_tokens uuid[], p_state text, p_error text,
    p_result bytea, p_count boolean
) RETURNS TABLE (id uuid, source text, kind text, attempt int)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH done AS (
        UPDATE azync_jobs j
        SET state = p_state,
            result = CASE WHEN p_result IS NOT NULL THEN p_result ELSE j.result END,
            last_error = CASE WHEN p_state = 'succeeded' THEN j.last_error ELSE p_error END,
            completed_at = CASE WHEN p_state = 'dead' THEN j.completed_at ELSE p_at END,
            failed_at = CASE WHEN p_state = 'dead' THEN p_at ELSE j.failed_at END,
            lease_until = NULL, updated_at = p_at
        FROM unnest(p_ids, p_tokens) AS s(id, token)
        WHERE j.id = s.id AND j.lease_token = s.token AND j.state = 'active'
        RETURNING j.id, j.source, j.kind, j.attempt
    ), a AS (
        INSERT INTO azync_job_attempts (job_id, attempt, error, at)
        SELECT d.id, d.attempt, p_error, p_at FROM done d WHERE p_state = 'dead'
    ), stat AS (
        SELECT azync_job_count(p_at, array_agg(ROW(
                   d.source, d.kind, 0, (p_state <> 'dead')::int, (p_state = 'dead')::int, 0
               )::azync_job_delta)) AS n
        FROM done d
        WHERE p_count
    )
    SELECT d.id, d.source, d.kind, d.attempt FROM done d
    WHERE (SELECT count(*) FROM stat) >= 0;
END
$$;

-- Make the execution p_run runnable at p_run_at (NULL = p_at): insert its
-- one runnable workflow task of kind p_kind, or move the existing one to
-- least(run_at, p_run_at); wake the workers of the kind when it is due.
-- The caller holds the execution row lock (see workflow.sql). Returns the
-- task and whether it was inserted (an insert counts as an enqueue).
CREATE FUNCTION azync_schedule_workflow_task(
    p_run uuid, p_kind text, p_run_at timestamptz, p_at timestamptz, p_channel text
) RETURNS TABLE (id uuid, state text, kind text, inserted boolean)
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY WITH up AS (
        INSERT INTO azync_jobs AS j (id, source, kind, state, run_at, run_id, task_key,
                                     enqueued_at, updated_at)
        VALUES (gen_random_uuid(), 'workflow', p_kind,
                CASE WHEN coalesce(p_run_at, p_at) > p_at THEN 'scheduled' ELSE 'pending' END,
                coalesce(p_run_at, p_at), p_run, '$wft', p_at, p_at)
        ON CONFLICT (run_id)
            WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled')
            DO UPDATE SET
                run_at = least(j.run_at, EXCLUDED.run_at),
                state = CASE WHEN least(j.run_at, EXCLUDED.run_at) > EXCLUDED.updated_at
                             THEN 'scheduled' ELSE 'pending' END,
                updated_at = EXCLUDED.updated_at
        RETURNING j.id, j.state, j.kind, (j.xmax = 0) AS inserted
    ), wake AS (
        SELECT pg_notify(p_channel, 'workflow:' || u.kind) FROM up u WHERE u.state = 'pending'
    )
    SELECT u.id, u.state, u.kind, u.inserted FROM up u
    WHERE (SELECT count(*) FROM wake) >= 0;
END
$$;

-- The child-workflow wake (migration 0009) is the same merge-insert made due
-- now: one home for it.
CREATE OR REPLACE FUNCTION azync_workflow_wake_task(p_id uuid, p_at timestamptz, p_channel text)
RETURNS void
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM azync_schedule_workflow_task(p_id, '$wft', p_at, p_at, p_channel);
END
$$;
