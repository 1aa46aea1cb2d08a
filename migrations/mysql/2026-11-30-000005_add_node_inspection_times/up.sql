-- API 1.6: when the last inspection started and finished.
ALTER TABLE nodes ADD COLUMN inspection_started_at DATETIME(6) NULL;
ALTER TABLE nodes ADD COLUMN inspection_finished_at DATETIME(6) NULL;
