-- API 1.6: when the last inspection started and finished.
ALTER TABLE nodes ADD COLUMN inspection_started_at TIMESTAMP NULL;
ALTER TABLE nodes ADD COLUMN inspection_finished_at TIMESTAMP NULL;
