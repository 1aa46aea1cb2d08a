DROP TABLE firmware_components;
ALTER TABLE nodes DROP COLUMN firmware_interface;
