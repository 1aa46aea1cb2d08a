DROP INDEX nodes_parent_node_idx ON nodes;
DROP INDEX nodes_shard_idx ON nodes;
ALTER TABLE nodes DROP COLUMN parent_node;
ALTER TABLE nodes DROP COLUMN shard;
