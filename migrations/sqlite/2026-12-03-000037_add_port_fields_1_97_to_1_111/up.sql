-- The port and portgroup fields of API 1.97-1.111, sized as Ironic's columns: a port's free-text
-- `description` (1.97), `vendor` (1.100) and `category` (1.101), and whether it may join a
-- dynamic portgroup (1.111, true by default, as Ironic's server default sets it on existing
-- ports); a portgroup's `physical_network` (1.102), `category` (1.103) and whether Ironic made
-- it dynamically (1.111, read-only in the API, false).
ALTER TABLE ports ADD COLUMN description VARCHAR(255) NULL;
ALTER TABLE ports ADD COLUMN vendor VARCHAR(32) NULL;
ALTER TABLE ports ADD COLUMN category VARCHAR(80) NULL;
ALTER TABLE ports ADD COLUMN available_for_dynamic_portgroup BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE portgroups ADD COLUMN physical_network VARCHAR(64) NULL;
ALTER TABLE portgroups ADD COLUMN category VARCHAR(80) NULL;
ALTER TABLE portgroups ADD COLUMN dynamic_portgroup BOOLEAN NOT NULL DEFAULT FALSE;
