DROP INDEX nodes_owner_idx ON nodes;
ALTER TABLE nodes DROP COLUMN owner;
