-- JSON documents are stored as text and parsed by Ferrum: the same on every backend.
CREATE TABLE nodes (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NULL,
    driver VARCHAR(255) NOT NULL,
    deploy_interface VARCHAR(255) NOT NULL,
    power_interface VARCHAR(255) NOT NULL,
    management_interface VARCHAR(255) NOT NULL,
    resource_class VARCHAR(80) NULL,
    conductor_group VARCHAR(255) NOT NULL DEFAULT '',
    driver_info LONGTEXT NOT NULL,
    driver_internal_info LONGTEXT NOT NULL,
    properties LONGTEXT NOT NULL,
    instance_info LONGTEXT NOT NULL,
    instance_uuid VARCHAR(36) NULL,
    extra LONGTEXT NOT NULL,
    provision_state VARCHAR(15) NOT NULL,
    target_provision_state VARCHAR(15) NULL,
    provision_updated_at DATETIME(6) NULL,
    power_state VARCHAR(15) NULL,
    target_power_state VARCHAR(15) NULL,
    maintenance BOOLEAN NOT NULL DEFAULT FALSE,
    maintenance_reason TEXT NULL,
    last_error TEXT NULL,
    reservation VARCHAR(255) NULL,
    conductor_affinity VARCHAR(255) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    -- Bumped by every write: the optimistic check of writes that do not hold the lock.
    version BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT uniq_nodes0uuid UNIQUE (uuid),
    CONSTRAINT uniq_nodes0name UNIQUE (name),
    CONSTRAINT uniq_nodes0instance_uuid UNIQUE (instance_uuid),
    INDEX reservation_idx (reservation),
    INDEX provision_state_idx (provision_state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE conductors (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    hostname VARCHAR(255) NOT NULL,
    drivers TEXT NOT NULL,
    conductor_group VARCHAR(255) NOT NULL DEFAULT '',
    online BOOLEAN NOT NULL DEFAULT TRUE,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    CONSTRAINT uniq_conductors0hostname UNIQUE (hostname)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
