-- The instance's name (API 1.104), kept in step with `instance_info.display_name` as Nova sets
-- it, and listed by; and the hardware's health (API 1.109), as the management interface
-- reports it (OK, Warning, Critical).
ALTER TABLE nodes ADD COLUMN instance_name VARCHAR(255) NULL;
ALTER TABLE nodes ADD COLUMN health VARCHAR(32) NULL;
CREATE INDEX nodes_instance_name_idx ON nodes (instance_name);
