-- Calls past their schedule-to-close deadline, and the slots of attempts
-- ended from outside.
--
-- 1. A completion (active -> succeeded, or a final failure: active -> dead,
--    under the attempt's own lease token) that arrives once the operation's
--    schedule-to-close deadline has passed is refused, whichever statement
--    carries it (the plain completion, a completion folded into a pass, a
--    transactional step): the statement fails with SQLSTATE AZ408 (the store
--    raises NotFoundError), nothing of it is written, and the call is timed
--    out by the timeouts maintenance step as if the report had never come.
--    The maintenance step itself clears the lease token, so it passes.
-- 2. A running call timed out by schedule-to-close (dead, its lease token
--    cleared while its lease lasts) keeps its slots held until that lease's
--    end, like a cancelled one (0036): its attempt runs on until its worker
--    notices.
-- 3. A worker that knows its attempt stopped (its report was refused, or
--    its lease was found gone and the attempt was cancelled) frees the slots
--    that attempt still holds at once (azync_limit_release_stopped), waking
--    the workers waiting on them, instead of leaving them held until the
--    lease's end. The release and its wake-up are moved out of the release
--    trigger into azync_limit_free, which both use.

CREATE FUNCTION azync_op_refuse_late_completion() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.close_deadline <= coalesce(NEW.updated_at, now()) THEN
        RAISE EXCEPTION 'operation % (%) reported its outcome after its schedule-to-close '
                        'deadline (%): the report is refused and the call times out',
                        OLD.id, OLD.task_key, OLD.close_deadline
            USING ERRCODE = 'AZ408';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER azync_jobs_refuse_late_completion BEFORE UPDATE OF state ON azync_jobs
    FOR EACH ROW
    WHEN (OLD.state = 'active' AND OLD.close_deadline IS NOT NULL
          AND NEW.state IN ('succeeded', 'dead')
          AND NEW.lease_token IS NOT DISTINCT FROM OLD.lease_token)
    EXECUTE FUNCTION azync_op_refuse_late_completion();

-- Free the concurrency slots (p_job, p_token) holds and, when that limit was
-- full for the key, wake the workers waiting on it (NOTIFY on the channel of
-- the lease that took the slot; for a task queue's limit, every limited kind
-- with a backlog on that queue). Returns the slots freed.
CREATE FUNCTION azync_limit_free(
    p_job uuid, p_token uuid, p_source text, p_kind text, p_task_queue text
) RETURNS int
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    r record;
    n int := 0;
BEGIN
    FOR r IN
        UPDATE azync_limit_slots s SET holder = NULL, holder_token = NULL, holder_channel = NULL,
                                       held_until = NULL
        FROM azync_limit_slots o
        WHERE s.holder = p_job AND s.holder_token = p_token
          AND o.limit_name = s.limit_name AND o.key = s.key AND o.slot = s.slot
        RETURNING s.limit_name, s.key, s.slot, o.holder_channel AS channel
    LOOP
        n := n + 1;
        IF r.channel IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM azync_limit_slots f JOIN azync_limits l ON l.name = f.limit_name
            WHERE f.limit_name = r.limit_name AND f.key = r.key AND f.slot <> r.slot
              AND f.slot <= l.capacity AND f.holder IS NULL) THEN
            IF EXISTS (SELECT 1 FROM azync_limit_scopes sc
                       WHERE sc.source = 'task_queue' AND sc.kind = p_task_queue
                         AND sc.limit_name = r.limit_name) THEN
                -- a task queue's limit: whatever kind waits on that queue (a
                -- skip scan of azync_jobs_limit_ready: one probe per limited
                -- kind with a backlog, not one row per waiting job)
                PERFORM count(*) FROM (
                    WITH RECURSIVE sk AS (
                        (SELECT j.source, j.kind FROM azync_jobs j
                         WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                         ORDER BY j.source, j.kind LIMIT 1)
                        UNION ALL
                        SELECT nx.source, nx.kind FROM sk CROSS JOIN LATERAL (
                            SELECT j.source, j.kind FROM azync_jobs j
                            WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                              AND (j.source, j.kind) > (sk.source, sk.kind)
                            ORDER BY j.source, j.kind LIMIT 1) nx
                    )
                    SELECT pg_notify(r.channel, sk.source || ':' || sk.kind) FROM sk
                    WHERE EXISTS (SELECT 1 FROM azync_jobs j
                                  WHERE j.state = 'pending' AND j.limit_key IS NOT NULL
                                    AND j.source = sk.source AND j.kind = sk.kind
                                    AND j.task_queue = p_task_queue)
                ) w;
            ELSE
                PERFORM pg_notify(r.channel, p_source || ':' || p_kind);
            END IF;
        END IF;
    END LOOP;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION azync_limit_release() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    -- ended from outside while its lease lasts (cancelled, terminated, timed
    -- out): its attempt may still run, so its slots stay held until the lease
    -- ends or its worker says it stopped (azync_limit_release_stopped)
    IF TG_OP = 'UPDATE'
       AND (NEW.state = 'cancelled' OR (NEW.state = 'dead' AND NEW.lease_token IS NULL))
       AND OLD.lease_until > coalesce(NEW.updated_at, now()) THEN
        UPDATE azync_limit_slots s SET held_until = OLD.lease_until
        WHERE s.holder = OLD.id AND s.holder_token = OLD.lease_token;
        RETURN NULL;
    END IF;
    PERFORM azync_limit_free(OLD.id, OLD.lease_token, OLD.source, OLD.kind, OLD.task_queue);
    RETURN NULL;
END
$$;

-- The attempt of p_job under p_token stopped (its worker says so): free the
-- slots it still holds when the job no longer runs under that token, or is
-- past its schedule-to-close deadline (no report of it can be accepted).
-- Returns the slots freed (0 when it holds none, or still runs).
CREATE FUNCTION azync_limit_release_stopped(p_at timestamptz, p_job uuid, p_token uuid)
RETURNS int
    LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT coalesce((
        SELECT azync_limit_free(p_job, p_token, j.source, j.kind, j.task_queue)
        FROM azync_jobs j
        WHERE j.id = p_job
          AND (j.state <> 'active' OR j.lease_token IS DISTINCT FROM p_token
               OR j.close_deadline <= p_at)
    ), 0)
$$;
