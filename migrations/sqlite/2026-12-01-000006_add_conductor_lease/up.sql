-- The lease on a conductor host name: the token of the one process that holds it, NULL once it
-- stopped cleanly. `updated_at` is the lease's renewal time.
ALTER TABLE conductors ADD COLUMN instance VARCHAR(64) NULL;
