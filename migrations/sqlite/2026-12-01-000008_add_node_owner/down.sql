DROP INDEX nodes_owner_idx;
ALTER TABLE nodes DROP COLUMN owner;
