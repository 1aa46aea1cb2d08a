ALTER TABLE nodes DROP COLUMN target_raid_config;
ALTER TABLE nodes DROP COLUMN raid_config;
