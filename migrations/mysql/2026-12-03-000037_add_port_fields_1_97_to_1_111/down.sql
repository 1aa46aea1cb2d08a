ALTER TABLE portgroups DROP COLUMN dynamic_portgroup;
ALTER TABLE portgroups DROP COLUMN category;
ALTER TABLE portgroups DROP COLUMN physical_network;
ALTER TABLE ports DROP COLUMN available_for_dynamic_portgroup;
ALTER TABLE ports DROP COLUMN category;
ALTER TABLE ports DROP COLUMN vendor;
ALTER TABLE ports DROP COLUMN description;
