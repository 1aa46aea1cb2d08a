ALTER TABLE nodes DROP COLUMN secure_boot;
ALTER TABLE nodes DROP COLUMN boot_mode;
