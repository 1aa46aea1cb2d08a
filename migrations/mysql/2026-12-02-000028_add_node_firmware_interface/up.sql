-- The node's firmware interface (API 1.86), defaulted as the release before leaves it; and the
-- firmware components a firmware interface reported for a node (Ironic's
-- `firmware_information`), one row per node and component, going with the node.
ALTER TABLE nodes ADD COLUMN firmware_interface VARCHAR(255) NOT NULL DEFAULT 'no-firmware';
CREATE TABLE firmware_components (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    node_id INTEGER NOT NULL,
    component VARCHAR(255) NOT NULL,
    initial_version VARCHAR(255) NOT NULL,
    current_version VARCHAR(255) NULL,
    last_version_flashed VARCHAR(255) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_nodecomponent0node_id0component UNIQUE (node_id, component),
    CONSTRAINT firmware_components_node_fk FOREIGN KEY (node_id) REFERENCES nodes (id)
        ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
