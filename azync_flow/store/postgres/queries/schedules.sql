-- name: schedule_insert
-- $2 id, $3 spec, $4 action, $5 policy, $6 note, $7 paused, $8 cursor_at,
-- $9 next_fire_at. Returns nothing when the id exists.
INSERT INTO azync_schedules (id, spec, action, policy, note, paused, cursor_at,
                             next_fire_at, created_at, updated_at)
VALUES ($2, $3, $4, $5, $6, $7, $8, $9,
        coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: schedule_get
-- $2 id
SELECT * FROM azync_schedules WHERE id = $2 AND ($1::timestamptz IS NULL OR true)

-- name: schedule_list
-- $2 limit
SELECT * FROM azync_schedules WHERE ($1::timestamptz IS NULL OR true) ORDER BY id LIMIT $2

-- name: schedule_due
-- Unpaused schedules whose next fire has come, most overdue first. $2 limit
SELECT * FROM azync_schedules
WHERE NOT paused AND next_fire_at <= coalesce($1::timestamptz, now())
ORDER BY next_fire_at, id
LIMIT $2

-- name: schedule_with_pending_runs
-- Schedules holding a run still to start: requested (trigger, backfill) or
-- buffered behind a running one.
SELECT s.* FROM azync_schedules s
WHERE EXISTS (SELECT 1 FROM azync_schedule_runs r
              WHERE r.schedule_id = s.id AND r.outcome IN ('buffered', 'requested'))
  AND ($1::timestamptz IS NULL OR true)
ORDER BY s.id

-- name: schedule_runs_pending
-- $2 schedule_id: its requested and buffered runs, oldest nominal time first.
SELECT * FROM azync_schedule_runs
WHERE schedule_id = $2 AND outcome IN ('buffered', 'requested')
  AND ($1::timestamptz IS NULL OR true)
ORDER BY nominal_at

-- name: schedule_runs_request
-- Ask the scheduler to start these nominal times (a time already recorded is
-- left as it is). $2 schedule_id, $3 nominal_ats, $4 fire_ats, $5 run_ids,
-- $6 overlap override (NULL: the schedule's policy)
INSERT INTO azync_schedule_runs (schedule_id, nominal_at, fire_at, run_id, outcome, overlap,
                                 created_at, updated_at)
SELECT $2, n, f, r, 'requested', $6::text,
       coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now())
FROM unnest($3::timestamptz[], $4::timestamptz[], $5::uuid[]) AS u(n, f, r)
ON CONFLICT (schedule_id, nominal_at) DO NOTHING
RETURNING nominal_at

-- name: schedule_update
-- Replace spec, action and policy; the cursor moves forward to $6 (never
-- back) and the edit is recorded with the values before and after.
-- $2 id, $3 spec, $4 action, $5 policy, $6 cursor_at, $7 next_fire_at, $8 note
WITH old AS (
    SELECT spec, action, policy FROM azync_schedules WHERE id = $2
), changed AS (
    UPDATE azync_schedules
    SET spec = $3, action = $4, policy = $5, cursor_at = greatest(cursor_at, $6),
        next_fire_at = $7, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2
    RETURNING id
), logged AS (
    INSERT INTO azync_schedule_changes (schedule_id, at, verb, old_spec, new_spec,
                                        old_policy, new_policy, old_action, new_action, note)
    SELECT $2, coalesce($1::timestamptz, now()), 'update', old.spec, $3, old.policy, $5,
           old.action, $4, $8
    FROM old
)
SELECT id FROM changed

-- name: schedule_advance
-- Move the cursor forward (never back). $2 id, $3 cursor_at, $4 next_fire_at
UPDATE azync_schedules
SET cursor_at = $3, next_fire_at = $4, updated_at = coalesce($1::timestamptz, now())
WHERE id = $2 AND cursor_at <= $3
RETURNING id

-- name: schedule_set_paused
-- $2 id, $3 paused, $4 note, $5 cursor_at, $6 next_fire_at; the edit is
-- recorded (verb pause / unpause).
-- (unpausing moves the cursor to now: times passed while paused do not fire)
WITH changed AS (
    UPDATE azync_schedules
    SET paused = $3, note = $4, cursor_at = greatest(cursor_at, $5),
        next_fire_at = $6, updated_at = coalesce($1::timestamptz, now())
    WHERE id = $2
    RETURNING id
), logged AS (
    INSERT INTO azync_schedule_changes (schedule_id, at, verb, note)
    SELECT id, coalesce($1::timestamptz, now()), CASE WHEN $3 THEN 'pause' ELSE 'unpause' END, $4
    FROM changed
)
SELECT id FROM changed

-- name: schedule_delete
-- $2 id
DELETE FROM azync_schedules WHERE id = $2 AND ($1::timestamptz IS NULL OR true) RETURNING id

-- name: schedule_run_record
-- Record the outcome for one nominal time; a buffered or requested row may
-- become started, skipped or missed, any other outcome is final. A final
-- outcome written counts on the schedule (the scheduler, a single leader, is
-- its only writer).
-- $2 schedule_id, $3 nominal_at, $4 fire_at, $5 run_id, $6 outcome
WITH written AS (
    INSERT INTO azync_schedule_runs (schedule_id, nominal_at, fire_at, run_id, outcome,
                                     start_seq, created_at, updated_at)
    VALUES ($2, $3, $4, $5, $6,
            CASE WHEN $6 = 'started' THEN nextval('azync_schedule_start_seq') END,
            coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()))
    ON CONFLICT (schedule_id, nominal_at) DO UPDATE
        SET outcome = EXCLUDED.outcome, start_seq = EXCLUDED.start_seq,
            updated_at = EXCLUDED.updated_at
        WHERE azync_schedule_runs.outcome IN ('buffered', 'requested')
    RETURNING outcome
), counted AS (
    UPDATE azync_schedules
    SET started_count = started_count + (SELECT count(*) FROM written WHERE outcome = 'started'),
        skipped_count = skipped_count + (SELECT count(*) FROM written WHERE outcome = 'skipped'),
        missed_count = missed_count + (SELECT count(*) FROM written WHERE outcome = 'missed')
    WHERE id = $2 AND EXISTS (SELECT 1 FROM written WHERE outcome IN ('started', 'skipped', 'missed'))
)
SELECT outcome FROM written

-- name: schedule_run_get
-- $2 schedule_id, $3 nominal_at
SELECT * FROM azync_schedule_runs
WHERE schedule_id = $2 AND nominal_at = $3 AND ($1::timestamptz IS NULL OR true)

-- name: schedule_runs_recent
-- Newest nominal times first. $2 schedule_id, $3 limit, $4 outcomes (NULL = any)
SELECT * FROM azync_schedule_runs
WHERE schedule_id = $2 AND ($4::text[] IS NULL OR outcome = ANY ($4::text[]))
  AND ($1::timestamptz IS NULL OR true)
ORDER BY nominal_at DESC
LIMIT $3

-- name: schedule_run_last_started
-- The run started last (by start order, not nominal time). $2 schedule_id
SELECT * FROM azync_schedule_runs
WHERE schedule_id = $2 AND outcome = 'started' AND start_seq IS NOT NULL
  AND ($1::timestamptz IS NULL OR true)
ORDER BY start_seq DESC
LIMIT 1

-- name: schedule_missed_record
-- Record a range of missed nominal times once (keyed by its first time) and
-- count them on the schedule. $2 schedule_id, $3 first_nominal_at,
-- $4 last_nominal_at, $5 count, $6 count_exact, $7 reason. Returns a row
-- only when the range was new.
WITH ins AS (
    INSERT INTO azync_schedule_missed (schedule_id, first_nominal_at, last_nominal_at, count,
                                       count_exact, reason, recorded_at)
    VALUES ($2, $3, $4, $5, $6, $7, coalesce($1::timestamptz, now()))
    ON CONFLICT (schedule_id, first_nominal_at) DO NOTHING
    RETURNING count
)
UPDATE azync_schedules SET missed_count = missed_count + (SELECT count FROM ins)
WHERE id = $2 AND EXISTS (SELECT 1 FROM ins)
RETURNING id

-- name: schedule_missed_recent
-- Missed ranges, newest first. $2 schedule_id, $3 limit
SELECT * FROM azync_schedule_missed
WHERE schedule_id = $2 AND ($1::timestamptz IS NULL OR true)
ORDER BY first_nominal_at DESC
LIMIT $3

-- name: schedule_changes_recent
-- Edits (update, pause, unpause), newest first. $2 schedule_id, $3 limit
SELECT * FROM azync_schedule_changes
WHERE schedule_id = $2 AND ($1::timestamptz IS NULL OR true)
ORDER BY seq DESC
LIMIT $3
