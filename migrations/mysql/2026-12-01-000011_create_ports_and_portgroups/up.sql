-- Ports (API 1.1) and portgroups (1.23): a node's NICs and their bonds. Both name their node by
-- UUID and go with it (ON DELETE CASCADE); a port names its portgroup by UUID, and deleting a
-- portgroup leaves its ports standalone. Every write of one of them also bumps its node's
-- `version` in the same transaction, so it is ordered with the node's lock and other writes.
CREATE TABLE portgroups (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NULL,
    node_uuid VARCHAR(36) NOT NULL,
    address VARCHAR(18) NULL,
    extra LONGTEXT NOT NULL,
    internal_info LONGTEXT NOT NULL,
    standalone_ports_supported BOOLEAN NOT NULL DEFAULT TRUE,
    mode VARCHAR(255) NULL,
    properties LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_portgroups0uuid UNIQUE (uuid),
    CONSTRAINT uniq_portgroups0address UNIQUE (address),
    CONSTRAINT uniq_portgroups0name UNIQUE (name),
    INDEX portgroups_node_uuid_idx (node_uuid),
    CONSTRAINT portgroups_node_fk FOREIGN KEY (node_uuid) REFERENCES nodes (uuid) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE ports (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    address VARCHAR(18) NOT NULL,
    node_uuid VARCHAR(36) NOT NULL,
    portgroup_uuid VARCHAR(36) NULL,
    extra LONGTEXT NOT NULL,
    internal_info LONGTEXT NOT NULL,
    local_link_connection LONGTEXT NOT NULL,
    pxe_enabled BOOLEAN NOT NULL DEFAULT TRUE,
    physical_network VARCHAR(64) NULL,
    is_smartnic BOOLEAN NOT NULL DEFAULT FALSE,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_ports0uuid UNIQUE (uuid),
    CONSTRAINT uniq_ports0address UNIQUE (address),
    INDEX ports_node_uuid_idx (node_uuid),
    INDEX ports_portgroup_uuid_idx (portgroup_uuid),
    CONSTRAINT ports_node_fk FOREIGN KEY (node_uuid) REFERENCES nodes (uuid) ON DELETE CASCADE,
    CONSTRAINT ports_portgroup_fk FOREIGN KEY (portgroup_uuid) REFERENCES portgroups (uuid)
        ON DELETE SET NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
