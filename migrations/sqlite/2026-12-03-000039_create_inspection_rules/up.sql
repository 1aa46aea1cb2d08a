-- Inspection rules (API 1.96): conditions checked against a node's inspection data and actions
-- run on the node when they hold, in priority order, at the end of an inspection. Conditions and
-- actions are JSON arrays read and written whole; `phase` is indexed as listings and the engine
-- filter on it (Ironic's `inspection_rule_phase_idx`).
CREATE TABLE inspection_rules (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    description VARCHAR(255) NULL,
    phase VARCHAR(16) NOT NULL DEFAULT 'main',
    priority INTEGER NOT NULL DEFAULT 0,
    sensitive BOOLEAN NOT NULL DEFAULT FALSE,
    conditions TEXT NOT NULL,
    actions TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_inspection_rules0uuid UNIQUE (uuid)
);
CREATE INDEX inspection_rule_phase_idx ON inspection_rules (phase);
