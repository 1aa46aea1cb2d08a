-- A node's volume connectors and targets (API 1.32): how the node reaches remote storage (an
-- initiator: IQN, WWPN, ...) and the volumes it boots from or attaches. Both name their node by
-- UUID and go with it (ON DELETE CASCADE). A connector's (type, connector ID) is unique across
-- nodes, a target's boot index within its node, as in Ironic. Every update or delete of one of
-- them also bumps its node's `version` in the same transaction (`db::children`).
CREATE TABLE volume_connectors (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    node_uuid VARCHAR(36) NOT NULL,
    connector_type VARCHAR(32) NOT NULL,
    connector_id VARCHAR(255) NOT NULL,
    extra LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_volumeconnectors0uuid UNIQUE (uuid),
    CONSTRAINT uniq_volumeconnectors0type0connector_id UNIQUE (connector_type, connector_id),
    INDEX volume_connectors_node_uuid_idx (node_uuid),
    CONSTRAINT volume_connectors_node_fk FOREIGN KEY (node_uuid) REFERENCES nodes (uuid)
        ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE volume_targets (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    node_uuid VARCHAR(36) NOT NULL,
    volume_type VARCHAR(64) NOT NULL,
    properties LONGTEXT NOT NULL,
    boot_index INTEGER NOT NULL,
    volume_id VARCHAR(36) NOT NULL,
    extra LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_volumetargets0uuid UNIQUE (uuid),
    CONSTRAINT uniq_volumetargets0node_uuid0boot_index UNIQUE (node_uuid, boot_index),
    CONSTRAINT volume_targets_node_fk FOREIGN KEY (node_uuid) REFERENCES nodes (uuid)
        ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
