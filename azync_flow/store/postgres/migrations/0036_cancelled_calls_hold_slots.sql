-- A cancelled call holds its limit slot until its attempt's lease ends.
--
-- Cancelling or terminating an execution (or a DAG run) cancels its active
-- operations in the database at once, and the slot trigger freed their
-- concurrency slots with it, while the attempts were still running on their
-- workers until they noticed: new calls were admitted next to them and the
-- limit was exceeded by the calls being cancelled. A job cancelled while
-- active now keeps its slots, marked held_until its lease's end (the
-- longest its worker may still run it unnoticed); an admission takes such a
-- slot once that time has passed, and counts it busy until then. The three
-- functions' bodies are long: only the affected expressions are replaced in
-- their current definitions.
ALTER TABLE azync_limit_slots ADD COLUMN held_until timestamptz;

DO $$
DECLARE
    f record;
    def text;
    changed text;
BEGIN
    FOR f IN SELECT * FROM (VALUES
        -- the release trigger: keep a cancelled active job's slots held
        ('azync_limit_release',
         E'BEGIN\n    FOR r IN\n        UPDATE azync_limit_slots s SET holder = NULL',
         E'BEGIN\n'
         || E'    IF TG_OP = ''UPDATE'' AND NEW.state = ''cancelled''\n'
         || E'       AND OLD.lease_until > coalesce(NEW.updated_at, now()) THEN\n'
         || E'        UPDATE azync_limit_slots s SET held_until = OLD.lease_until\n'
         || E'        WHERE s.holder = OLD.id AND s.holder_token = OLD.lease_token;\n'
         || E'        RETURN NULL;\n'
         || E'    END IF;\n'
         || E'    FOR r IN\n        UPDATE azync_limit_slots s SET holder = NULL'),
        -- admission: a held slot is free once its time has passed ...
        ('azync_limit_admit',
         E'THEN f.holder IS NULL\n',
         E'THEN (f.holder IS NULL OR f.held_until <= p_at)\n'),
        -- ... and busy until then
        ('azync_limit_admit',
         E'THEN b.holder IS NOT NULL\n',
         E'THEN b.holder IS NOT NULL AND (b.held_until IS NULL OR b.held_until > p_at)\n'),
        ('azync_limit_admit',
         E'holder_channel = CASE WHEN l.type = ''concurrency'' THEN p_channel END,\n',
         E'holder_channel = CASE WHEN l.type = ''concurrency'' THEN p_channel END,\n'
         || E'                    held_until = NULL,\n'),
        -- a call's blocked reason counts the same busy slots as its admission
        ('azync_job_limit_waits',
         E'             AND s.slot <= l.capacity\n'
         || E'             AND CASE WHEN l.type = ''concurrency'' THEN s.holder IS NOT NULL\n',
         E'             AND CASE WHEN l.type = ''concurrency''\n'
         || E'                      THEN s.holder IS NOT NULL\n'
         || E'                           AND (s.held_until IS NULL OR s.held_until > p_at)\n')
    ) AS v(fn, old, new)
    LOOP
        def := pg_get_functiondef(to_regproc(f.fn));
        changed := replace(def, f.old, f.new);
        IF changed = def THEN
            RAISE EXCEPTION '%: expression not found: %', f.fn, f.old;
        END IF;
        EXECUTE changed;
    END LOOP;
END
$$;
