-- The same schema as migrations/mysql, in SQLite's types. JSON documents are text.
CREATE TABLE nodes (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NULL,
    driver VARCHAR(255) NOT NULL,
    deploy_interface VARCHAR(255) NOT NULL,
    power_interface VARCHAR(255) NOT NULL,
    management_interface VARCHAR(255) NOT NULL,
    resource_class VARCHAR(80) NULL,
    conductor_group VARCHAR(255) NOT NULL DEFAULT '',
    driver_info TEXT NOT NULL,
    driver_internal_info TEXT NOT NULL,
    properties TEXT NOT NULL,
    instance_info TEXT NOT NULL,
    instance_uuid VARCHAR(36) NULL,
    extra TEXT NOT NULL,
    provision_state VARCHAR(15) NOT NULL,
    target_provision_state VARCHAR(15) NULL,
    provision_updated_at TIMESTAMP NULL,
    power_state VARCHAR(15) NULL,
    target_power_state VARCHAR(15) NULL,
    maintenance BOOLEAN NOT NULL DEFAULT FALSE,
    maintenance_reason TEXT NULL,
    last_error TEXT NULL,
    reservation VARCHAR(255) NULL,
    conductor_affinity VARCHAR(255) NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    -- Bumped by every write: the optimistic check of writes that do not hold the lock.
    version BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT uniq_nodes0uuid UNIQUE (uuid),
    CONSTRAINT uniq_nodes0name UNIQUE (name),
    CONSTRAINT uniq_nodes0instance_uuid UNIQUE (instance_uuid)
);
CREATE INDEX reservation_idx ON nodes (reservation);
CREATE INDEX provision_state_idx ON nodes (provision_state);

CREATE TABLE conductors (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    hostname VARCHAR(255) NOT NULL,
    drivers TEXT NOT NULL,
    conductor_group VARCHAR(255) NOT NULL DEFAULT '',
    online BOOLEAN NOT NULL DEFAULT TRUE,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL,
    CONSTRAINT uniq_conductors0hostname UNIQUE (hostname)
);
