-- Whether the node may never be powered off (API 1.95): power-off requests are refused and the
-- flows that would power it off reboot it instead.
ALTER TABLE nodes ADD COLUMN disable_power_off BOOLEAN NOT NULL DEFAULT FALSE;
