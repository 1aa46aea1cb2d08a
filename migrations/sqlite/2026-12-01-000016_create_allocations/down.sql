ALTER TABLE nodes DROP COLUMN allocation_uuid;
DROP TABLE allocations;
