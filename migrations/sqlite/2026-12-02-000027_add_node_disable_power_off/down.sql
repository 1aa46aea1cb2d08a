ALTER TABLE nodes DROP COLUMN disable_power_off;
