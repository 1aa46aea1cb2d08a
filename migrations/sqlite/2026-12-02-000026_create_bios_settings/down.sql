DROP TABLE bios_settings;
