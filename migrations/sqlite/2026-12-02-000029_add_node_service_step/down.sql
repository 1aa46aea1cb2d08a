ALTER TABLE nodes DROP COLUMN service_step;
