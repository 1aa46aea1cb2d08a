-- Node history (API 1.78): the events a conductor records on a node, every failure that sets
-- its last_error among them. An entry names its node by id and goes with it (ON DELETE
-- CASCADE); a node's entries are read in (node_id, created_at) order, and the conductor keeps
-- at most [conductor]node_history_max_entries of them per node.
CREATE TABLE node_history (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    node_id INTEGER NOT NULL,
    conductor VARCHAR(255) NULL,
    event LONGTEXT NOT NULL,
    event_type VARCHAR(255) NOT NULL,
    severity VARCHAR(255) NOT NULL,
    user VARCHAR(64) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_history0uuid UNIQUE (uuid),
    INDEX history_node_id_created_at_idx (node_id, created_at),
    CONSTRAINT node_history_node_fk FOREIGN KEY (node_id) REFERENCES nodes (id)
        ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
-- Node inventory (API 1.81): the hardware inventory and the inspection's plugin data an
-- inspection stored for a node, one row per node (a later inspection replaces it), going with it.
CREATE TABLE node_inventory (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    node_id INTEGER NOT NULL,
    inventory_data LONGTEXT NOT NULL,
    plugin_data LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_nodeinventory0node_id UNIQUE (node_id),
    CONSTRAINT node_inventory_node_fk FOREIGN KEY (node_id) REFERENCES nodes (id)
        ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
