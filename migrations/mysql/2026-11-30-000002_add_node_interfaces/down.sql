ALTER TABLE nodes DROP COLUMN vendor_interface;
ALTER TABLE nodes DROP COLUMN raid_interface;
ALTER TABLE nodes DROP COLUMN network_interface;
ALTER TABLE nodes DROP COLUMN inspect_interface;
ALTER TABLE nodes DROP COLUMN console_interface;
ALTER TABLE nodes DROP COLUMN boot_interface;
