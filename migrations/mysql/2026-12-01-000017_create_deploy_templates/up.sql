-- Deploy templates (API 1.55): named lists of deploy steps that a deploy adds when the template's
-- name is among the instance's traits. The steps are one JSON array: a template is read and
-- written whole, and the deploy reads the matching templates with one query on `name`.
CREATE TABLE deploy_templates (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    steps LONGTEXT NOT NULL,
    extra LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_deploytemplates0uuid UNIQUE (uuid),
    CONSTRAINT uniq_deploytemplates0name UNIQUE (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
