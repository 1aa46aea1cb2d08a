-- Retirement (API 1.61): a retired node can no longer be provided, and cleaning ends it in
-- manageable instead of available.
ALTER TABLE nodes ADD COLUMN retired BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE nodes ADD COLUMN retired_reason TEXT NULL;
-- The project leasing the node (API 1.65).
ALTER TABLE nodes ADD COLUMN lessee VARCHAR(255) NULL;
CREATE INDEX nodes_lessee_idx ON nodes (lessee);
-- The instance's network configuration (API 1.66), a JSON object, empty when none.
ALTER TABLE nodes ADD COLUMN network_data TEXT NOT NULL DEFAULT '{}';
