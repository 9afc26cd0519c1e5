-- Execution updates are HOT. A pass rewrites next_seq, awaited_signals and
-- updated_at; updated_at led an index (state, updated_at) for the stalled
-- scan, so no pass update could be HOT and each wrote a new entry in every
-- index of the table. The scan now reads progress_at, a stored copy of
-- updated_at cut to its 10-second bin, which the passes of one burst share:
-- their updates change no indexed column. The query workflow_stalled_scan
-- cuts its cutoff to the same bin.
ALTER TABLE azync_workflow_executions
    ADD COLUMN progress_at timestamptz GENERATED ALWAYS AS (
        date_bin(interval '10 seconds', updated_at, timestamptz '2000-01-01 00:00:00+00')
    ) STORED;

DROP INDEX azync_workflow_executions_state;
CREATE INDEX azync_workflow_executions_state
    ON azync_workflow_executions (state, progress_at, id);

-- Room on each page for the new versions of its rows (HOT needs the same page).
ALTER TABLE azync_workflow_executions SET (fillfactor = 80);
