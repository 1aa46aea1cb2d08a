-- The project that owns the node (API 1.50).
ALTER TABLE nodes ADD COLUMN owner VARCHAR(255) NULL;
CREATE INDEX nodes_owner_idx ON nodes (owner);
