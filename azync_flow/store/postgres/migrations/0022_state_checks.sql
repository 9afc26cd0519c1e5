-- Every lifecycle column accepts only the states its machine has
-- (docs/state_machine.md): a misspelt state written by a new statement is
-- refused at once instead of leaving a row that no lease, reaper or listing
-- ever matches again. CHECK rather than enum types: a new state is a DROP and
-- ADD CONSTRAINT in the migration that uses it, where an enum value cannot be
-- used in the transaction that adds it, nor ever be removed.

-- Jobs: queue jobs, event deliveries, DAG tasks, workflow tasks and operations.
ALTER TABLE azync_jobs ADD CONSTRAINT azync_jobs_state_check CHECK (
    state IN ('pending', 'scheduled', 'active', 'succeeded', 'dead', 'paused', 'skipped',
              'blocked', 'waiting', 'cancelled', 'uncertain'));

-- Only DAG tasks wait on dependencies (blocked) or on a signal (waiting); only
-- workflow operations have an unknown outcome (uncertain).
ALTER TABLE azync_jobs ADD CONSTRAINT azync_jobs_state_source_check CHECK (
    (state NOT IN ('blocked', 'waiting') OR source = 'dag')
    AND (state <> 'uncertain' OR source = 'workflow'));

ALTER TABLE azync_workflow_executions ADD CONSTRAINT azync_workflow_executions_state_check
    CHECK (state IN ('running', 'suspended', 'succeeded', 'failed', 'cancelled', 'terminated'));

-- DAG runs (their tasks are azync_jobs rows with source = 'dag').
ALTER TABLE azync_dags ADD CONSTRAINT azync_dags_state_check
    CHECK (state IN ('running', 'suspended', 'compensating', 'paused', 'succeeded', 'failed',
                     'cancelled'));

ALTER TABLE azync_workflow_queries ADD CONSTRAINT azync_workflow_queries_state_check
    CHECK (state IN ('pending', 'claimed', 'answered', 'failed'));

ALTER TABLE azync_workflow_updates ADD CONSTRAINT azync_workflow_updates_state_check
    CHECK (state IN ('rejected', 'completed', 'failed'));

-- A nominal time of a schedule: requested or buffered until the scheduler
-- starts, skips or misses it (final).
ALTER TABLE azync_schedule_runs ADD CONSTRAINT azync_schedule_runs_outcome_check
    CHECK (outcome IN ('requested', 'buffered', 'started', 'skipped', 'missed'));
