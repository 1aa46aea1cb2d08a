-- BIOS settings (API 1.40, registry fields 1.74): the settings a node's BIOS interface last
-- reported or applied, one row per node and name (Ironic's `bios_settings`), going with the
-- node. `allowable_values` is a JSON list of strings; the other registry fields are the BIOS
-- attribute registry's facts about the setting, NULL when the interface did not say.
CREATE TABLE bios_settings (
    node_id INTEGER NOT NULL,
    name VARCHAR(255) NOT NULL,
    value LONGTEXT NULL,
    attribute_type VARCHAR(255) NULL,
    allowable_values LONGTEXT NULL,
    lower_bound BIGINT NULL,
    max_length INTEGER NULL,
    min_length INTEGER NULL,
    read_only BOOLEAN NULL,
    reset_required BOOLEAN NULL,
    `unique` BOOLEAN NULL,
    upper_bound BIGINT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    PRIMARY KEY (node_id, name),
    CONSTRAINT bios_settings_node_fk FOREIGN KEY (node_id) REFERENCES nodes (id)
        ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
