DROP INDEX nodes_parent_node_idx;
DROP INDEX nodes_shard_idx;
ALTER TABLE nodes DROP COLUMN parent_node;
ALTER TABLE nodes DROP COLUMN shard;
