-- Node history (API 1.113, 1.115): the project whose request led to an entry, the node's
-- provision state and target when it was recorded, and how long the node had been in that state.
ALTER TABLE node_history ADD COLUMN project VARCHAR(80) NULL;
ALTER TABLE node_history ADD COLUMN state VARCHAR(255) NULL;
ALTER TABLE node_history ADD COLUMN target_provision_state VARCHAR(255) NULL;
ALTER TABLE node_history ADD COLUMN duration_seconds INTEGER NULL;
-- Firmware components (API 1.114): which hardware a component's firmware belongs to.
ALTER TABLE firmware_components ADD COLUMN vendor VARCHAR(255) NULL;
ALTER TABLE firmware_components ADD COLUMN model VARCHAR(255) NULL;
ALTER TABLE firmware_components ADD COLUMN serial_number VARCHAR(255) NULL;
