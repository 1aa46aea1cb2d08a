-- Runbooks (API 1.92): named lists of clean or service steps that a manual clean runs on a node
-- whose traits include the runbook's name. As a deploy template's, the steps are one JSON array:
-- a runbook is read and written whole.
CREATE TABLE runbooks (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    steps TEXT NOT NULL,
    disable_ramdisk BOOLEAN NOT NULL DEFAULT FALSE,
    public BOOLEAN NOT NULL DEFAULT FALSE,
    owner VARCHAR(255) NULL,
    extra TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_runbooks0uuid UNIQUE (uuid),
    CONSTRAINT uniq_runbooks0name UNIQUE (name)
);
