DROP INDEX uniq_ports0name ON ports;
ALTER TABLE ports DROP COLUMN name;
