ALTER TABLE nodes DROP COLUMN inspection_finished_at;
ALTER TABLE nodes DROP COLUMN inspection_started_at;
