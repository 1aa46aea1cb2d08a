-- The node's RAID configuration (API 1.12): the one the hardware has (raid_config, written by
-- a RAID interface after it configures it) and the one asked for by PUT
-- /v1/nodes/{id}/states/raid (target_raid_config). JSON objects, empty when none.
ALTER TABLE nodes ADD COLUMN raid_config TEXT NOT NULL DEFAULT ('{}');
ALTER TABLE nodes ADD COLUMN target_raid_config TEXT NOT NULL DEFAULT ('{}');
