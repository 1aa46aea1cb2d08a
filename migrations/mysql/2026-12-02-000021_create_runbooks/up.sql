-- Runbooks (API 1.92): named lists of clean or service steps that a manual clean runs on a node
-- whose traits include the runbook's name. As a deploy template's, the steps are one JSON array:
-- a runbook is read and written whole.
CREATE TABLE runbooks (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    steps LONGTEXT NOT NULL,
    disable_ramdisk BOOLEAN NOT NULL DEFAULT FALSE,
    public BOOLEAN NOT NULL DEFAULT FALSE,
    owner VARCHAR(255) NULL,
    extra LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_runbooks0uuid UNIQUE (uuid),
    CONSTRAINT uniq_runbooks0name UNIQUE (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
