-- The backend pid of a run's control connection, which holds the job's
-- lock: a run that finds its job busy can then tell a coexist run (this
-- column matches the lock holder's pid) from any other session squatting the
-- lock, and name either (docs/batch.md, "Job busy").
ALTER TABLE coexist.runs ADD COLUMN backend_pid integer;
