-- Depth-first workflow tasks: a new execution's first pass ranks below the
-- passes of executions already in flight, and a worker whose activity slots
-- are scarce leases only those (it finishes what it started before it starts
-- more). first_pass is set on the task a start inserts and kept when later
-- scheduling merges into it (it is still the first pass).
ALTER TABLE azync_jobs ADD COLUMN first_pass boolean NOT NULL DEFAULT false;

-- The lease scan of workflow tasks: continuing passes first, then first
-- passes, each in (run_at, id) order; "no first passes" is a range of it.
DROP INDEX azync_jobs_workflow_task_due;
CREATE INDEX azync_jobs_workflow_task_due ON azync_jobs (kind, first_pass, run_at, id)
    WHERE source = 'workflow' AND task_key = '$wft' AND state IN ('pending', 'scheduled');
