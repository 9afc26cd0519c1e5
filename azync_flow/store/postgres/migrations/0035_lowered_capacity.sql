-- A lowered capacity holds at once.
--
-- An admission took a free slot numbered within the limit's capacity, so after
-- a capacity was lowered (5 -> 2) the calls still holding slots above it
-- (3, 4, 5) did not count: slots 1 and 2 admitted new calls while they ran,
-- and the limit was exceeded until they drained. azync_limit_admit now also
-- requires the key's busy slots, whatever their number, to be fewer than
-- the capacity (held, for a concurrency limit; used within the period, for a
-- rate limit). Its body is long: only that condition is replaced in its
-- current definition.
DO $$
DECLARE
    def text;
    changed text;
BEGIN
    def := pg_get_functiondef(to_regproc('azync_limit_admit'));
    changed := replace(def,
        E'            IF FOUND THEN\n                UPDATE azync_limit_slots s',
        E'            IF FOUND AND (\n'
        || E'                SELECT count(*) FROM azync_limit_slots b\n'
        || E'                WHERE b.limit_name = l.name AND b.key = k\n'
        || E'                  AND CASE WHEN l.type = ''concurrency'' THEN b.holder IS NOT NULL\n'
        || E'                           ELSE b.used_at >= p_at - l.period END) < l.capacity THEN\n'
        || E'                UPDATE azync_limit_slots s');
    IF changed = def THEN
        RAISE EXCEPTION 'azync_limit_admit: the free-slot branch was not found';
    END IF;
    EXECUTE changed;
END
$$;
