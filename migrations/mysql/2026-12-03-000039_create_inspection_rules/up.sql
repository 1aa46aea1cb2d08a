-- Inspection rules (API 1.96): conditions checked against a node's inspection data and actions
-- run on the node when they hold, in priority order, at the end of an inspection. Conditions and
-- actions are JSON arrays read and written whole; `phase` is indexed as listings and the engine
-- filter on it (Ironic's `inspection_rule_phase_idx`).
-- `sensitive` is a reserved word in MySQL and MariaDB: quoted.
CREATE TABLE inspection_rules (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    description VARCHAR(255) NULL,
    phase VARCHAR(16) NOT NULL DEFAULT 'main',
    priority INTEGER NOT NULL DEFAULT 0,
    `sensitive` BOOLEAN NOT NULL DEFAULT FALSE,
    conditions LONGTEXT NOT NULL,
    actions LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_inspection_rules0uuid UNIQUE (uuid),
    INDEX inspection_rule_phase_idx (phase)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
