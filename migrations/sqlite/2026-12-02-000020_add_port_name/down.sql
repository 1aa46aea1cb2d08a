DROP INDEX uniq_ports0name;
ALTER TABLE ports DROP COLUMN name;
