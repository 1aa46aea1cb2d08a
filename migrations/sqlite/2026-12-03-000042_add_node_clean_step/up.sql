-- The clean step a node is running (API 1.7), as `service_step` is for servicing: `{}` when
-- it is not cleaning.
ALTER TABLE nodes ADD COLUMN clean_step TEXT NOT NULL DEFAULT '{}';
