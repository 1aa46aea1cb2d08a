ALTER TABLE allocations DROP COLUMN conductor_affinity;
