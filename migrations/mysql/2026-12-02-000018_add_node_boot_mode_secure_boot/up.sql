-- The node's boot mode (`uefi` or `bios`) and whether secure boot is on (API 1.75), as its
-- management interface last reported or set them (1.76); NULL until known.
ALTER TABLE nodes ADD COLUMN boot_mode VARCHAR(16) NULL;
ALTER TABLE nodes ADD COLUMN secure_boot BOOLEAN NULL;
