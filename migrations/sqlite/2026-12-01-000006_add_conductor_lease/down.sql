ALTER TABLE conductors DROP COLUMN instance;
