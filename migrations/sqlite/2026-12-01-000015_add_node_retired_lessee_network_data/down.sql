ALTER TABLE nodes DROP COLUMN network_data;
DROP INDEX nodes_lessee_idx;
ALTER TABLE nodes DROP COLUMN lessee;
ALTER TABLE nodes DROP COLUMN retired_reason;
ALTER TABLE nodes DROP COLUMN retired;
