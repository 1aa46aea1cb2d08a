-- A port's name (API 1.88): optional and unique, as Ironic's `uniq_ports0name`; a port can
-- be named by it in the API.
ALTER TABLE ports ADD COLUMN name VARCHAR(255) NULL;
CREATE UNIQUE INDEX uniq_ports0name ON ports (name);
