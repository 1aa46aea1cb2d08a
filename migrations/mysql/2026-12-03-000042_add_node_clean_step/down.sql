ALTER TABLE nodes DROP COLUMN clean_step;
