-- Deploy templates (API 1.55): named lists of deploy steps that a deploy adds when the template's
-- name is among the instance's traits. The steps are one JSON array: a template is read and
-- written whole, and the deploy reads the matching templates with one query on `name`.
CREATE TABLE deploy_templates (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NOT NULL,
    steps TEXT NOT NULL,
    extra TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_deploytemplates0uuid UNIQUE (uuid),
    CONSTRAINT uniq_deploytemplates0name UNIQUE (name)
);
