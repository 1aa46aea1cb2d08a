-- Allocations (API 1.52): a request for a node of a resource class with traits, among candidate
-- nodes, for an owner (1.60). An active allocation names its node by UUID and goes with it (ON
-- DELETE CASCADE: deleting a node deletes its allocation); the node names its allocation back
-- in allocation_uuid (Ironic keeps allocation_id), so showing a node costs no join.
CREATE TABLE allocations (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    name VARCHAR(255) NULL,
    node_uuid VARCHAR(36) NULL,
    state VARCHAR(15) NOT NULL,
    last_error TEXT NULL,
    resource_class VARCHAR(80) NULL,
    traits TEXT NOT NULL,
    candidate_nodes TEXT NOT NULL,
    extra TEXT NOT NULL,
    owner VARCHAR(255) NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_allocations0uuid UNIQUE (uuid),
    CONSTRAINT uniq_allocations0name UNIQUE (name),
    CONSTRAINT allocations_node_fk FOREIGN KEY (node_uuid) REFERENCES nodes (uuid)
        ON DELETE CASCADE
);
CREATE INDEX allocations_node_uuid_idx ON allocations (node_uuid);
ALTER TABLE nodes ADD COLUMN allocation_uuid VARCHAR(36) NULL;
