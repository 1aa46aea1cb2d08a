DROP INDEX nodes_instance_name_idx ON nodes;
ALTER TABLE nodes DROP COLUMN health;
ALTER TABLE nodes DROP COLUMN instance_name;
