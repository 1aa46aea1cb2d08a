-- The interfaces of API 1.20/1.31 besides deploy, power and management. Ferrum's fake hardware
-- implements them as no-ops or "not supported" (no-*), which is what the defaults say.
ALTER TABLE nodes ADD COLUMN boot_interface VARCHAR(255) NOT NULL DEFAULT 'fake';
ALTER TABLE nodes ADD COLUMN console_interface VARCHAR(255) NOT NULL DEFAULT 'no-console';
ALTER TABLE nodes ADD COLUMN inspect_interface VARCHAR(255) NOT NULL DEFAULT 'no-inspect';
ALTER TABLE nodes ADD COLUMN network_interface VARCHAR(255) NOT NULL DEFAULT 'noop';
ALTER TABLE nodes ADD COLUMN raid_interface VARCHAR(255) NOT NULL DEFAULT 'no-raid';
ALTER TABLE nodes ADD COLUMN vendor_interface VARCHAR(255) NOT NULL DEFAULT 'no-vendor';
