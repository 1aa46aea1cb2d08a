ALTER TABLE nodes DROP COLUMN console_enabled;
