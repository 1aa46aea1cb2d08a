ALTER TABLE nodes DROP FOREIGN KEY nodes_chassis_fk;
ALTER TABLE nodes DROP INDEX nodes_chassis_uuid_idx, DROP COLUMN chassis_uuid;
DROP TABLE chassis;
