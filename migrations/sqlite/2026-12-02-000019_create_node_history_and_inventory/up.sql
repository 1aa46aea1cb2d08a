-- Node history (API 1.78): the events a conductor records on a node, every failure that sets
-- its last_error among them. An entry names its node by id and goes with it (ON DELETE
-- CASCADE); a node's entries are read in (node_id, created_at) order, and the conductor keeps
-- at most [conductor]node_history_max_entries of them per node.
CREATE TABLE node_history (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    node_id INTEGER NOT NULL,
    conductor VARCHAR(255) NULL,
    event TEXT NOT NULL,
    event_type VARCHAR(255) NOT NULL,
    severity VARCHAR(255) NOT NULL,
    user VARCHAR(64) NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_history0uuid UNIQUE (uuid),
    CONSTRAINT node_history_node_fk FOREIGN KEY (node_id) REFERENCES nodes (id)
        ON DELETE CASCADE
);
CREATE INDEX history_node_id_created_at_idx ON node_history (node_id, created_at);
-- Node inventory (API 1.81): the hardware inventory and the inspection's plugin data an
-- inspection stored for a node, one row per node (a later inspection replaces it), going with it.
CREATE TABLE node_inventory (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    node_id INTEGER NOT NULL,
    inventory_data TEXT NOT NULL,
    plugin_data TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_nodeinventory0node_id UNIQUE (node_id),
    CONSTRAINT node_inventory_node_fk FOREIGN KEY (node_id) REFERENCES nodes (id)
        ON DELETE CASCADE
);
