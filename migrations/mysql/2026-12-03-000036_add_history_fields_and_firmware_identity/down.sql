ALTER TABLE firmware_components DROP COLUMN serial_number;
ALTER TABLE firmware_components DROP COLUMN model;
ALTER TABLE firmware_components DROP COLUMN vendor;
ALTER TABLE node_history DROP COLUMN duration_seconds;
ALTER TABLE node_history DROP COLUMN target_provision_state;
ALTER TABLE node_history DROP COLUMN state;
ALTER TABLE node_history DROP COLUMN project;
