-- A call past its schedule-to-start or schedule-to-close deadline is not
-- leased any more: the timeouts maintenance step ends it (ActivityTimedOut),
-- so no attempt starts in the up to one tick before it runs. The plain lease
-- (named query job_dequeue) checks both deadlines; so does the limited lease,
-- whose long body has only its row lock's condition replaced here.
DO $$
DECLARE
    def text;
    changed text;
BEGIN
    def := pg_get_functiondef(to_regproc('azync_job_lease_limited'));
    changed := replace(def,
        E'        WHERE id = c.id AND state = ''pending'' FOR UPDATE SKIP LOCKED;',
        E'        WHERE id = c.id AND state = ''pending''\n'
        || E'          AND (start_deadline IS NULL OR attempt > 0 OR start_deadline > p_at)\n'
        || E'          AND (close_deadline IS NULL OR close_deadline > p_at)\n'
        || E'        FOR UPDATE SKIP LOCKED;');
    IF changed = def THEN
        RAISE EXCEPTION 'azync_job_lease_limited: the row lock was not found';
    END IF;
    EXECUTE changed;
END
$$;
