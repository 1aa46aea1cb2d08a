-- The node fields of API 1.33-1.48. Traits are a JSON array on the node row (not Ironic's
-- node_traits table) so that changing them is one conditional write, like every other change.
-- TEXT defaults are expressions, in parentheses, so that MySQL 8 takes them too.
ALTER TABLE nodes ADD COLUMN storage_interface VARCHAR(255) NOT NULL DEFAULT 'noop';
ALTER TABLE nodes ADD COLUMN rescue_interface VARCHAR(255) NOT NULL DEFAULT 'no-rescue';
ALTER TABLE nodes ADD COLUMN bios_interface VARCHAR(255) NOT NULL DEFAULT 'no-bios';
ALTER TABLE nodes ADD COLUMN traits TEXT NOT NULL DEFAULT ('[]');
ALTER TABLE nodes ADD COLUMN fault VARCHAR(255) NULL;
ALTER TABLE nodes ADD COLUMN deploy_step TEXT NOT NULL DEFAULT ('{}');
ALTER TABLE nodes ADD COLUMN automated_clean BOOLEAN NULL;
ALTER TABLE nodes ADD COLUMN protected BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE nodes ADD COLUMN protected_reason TEXT NULL;
CREATE INDEX nodes_fault_idx ON nodes (fault);
