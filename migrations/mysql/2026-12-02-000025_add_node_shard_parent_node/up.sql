-- The shard a node belongs to (API 1.82), a client's grouping of nodes for the services that
-- watch them; and the node's parent (1.83), by its UUID. Both NULL when unset.
ALTER TABLE nodes ADD COLUMN shard VARCHAR(255) NULL;
ALTER TABLE nodes ADD COLUMN parent_node VARCHAR(36) NULL;
CREATE INDEX nodes_shard_idx ON nodes (shard);
CREATE INDEX nodes_parent_node_idx ON nodes (parent_node);
