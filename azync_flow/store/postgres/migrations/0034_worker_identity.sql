-- Lease tokens name the worker identity that took them.
--
-- A worker holds an identity (contract IdentityClaimer): a name such as
-- "<host>/0" fenced by a session advisory lock, so two live processes never
-- share it, and it survives a restart. Each of its pooled connections carries
-- the identity's 8-hex-digit prefix in the session setting azync.holder, and
-- every lease token is drawn through azync_lease_token(), which puts that
-- prefix in front of a random UUID. A worker restarted under the same
-- identity therefore knows which leases its previous incarnation held and
-- expires them at once (the named query identity_take_back) instead of
-- waiting out their lease. Tokens stay unguessable and unique (the 88 random
-- bits after the prefix); a session without the setting draws a plain random
-- token as before.

CREATE FUNCTION azync_lease_token() RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT CASE WHEN length(current_setting('azync.holder', true)) = 8
                THEN overlay(gen_random_uuid()::text
                             PLACING current_setting('azync.holder', true) FROM 1 FOR 8)::uuid
                ELSE gen_random_uuid() END
$$;

-- The two functions that draw lease tokens are redefined from their own
-- current definitions with only the token expression replaced (their bodies
-- are long; restating them here would be a second copy to keep in step).
DO $$
DECLARE
    f record;
    def text;
    changed text;
BEGIN
    FOR f IN SELECT * FROM (VALUES
        ('azync_job_lease_limited', 'tok := gen_random_uuid();', 'tok := azync_lease_token();'),
        ('azync_workflow_ops_insert', 'gen_random_uuid() AS token', 'azync_lease_token() AS token')
    ) AS v(fn, old, new)
    LOOP
        def := pg_get_functiondef(to_regproc(f.fn));
        changed := replace(def, f.old, f.new);
        IF changed = def THEN
            RAISE EXCEPTION '%: token expression % not found', f.fn, f.old;
        END IF;
        EXECUTE changed;
    END LOOP;
END
$$;
