ALTER TABLE conductors DROP COLUMN hardware_interfaces;
