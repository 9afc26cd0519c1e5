-- The DAG scheduler's incremental passes look only at task rows changed since
-- the previous tick; index that scan so it stays cheap as settled rows pile up.
CREATE INDEX azync_jobs_dag_recent ON azync_jobs (updated_at) WHERE dag_id IS NOT NULL;
