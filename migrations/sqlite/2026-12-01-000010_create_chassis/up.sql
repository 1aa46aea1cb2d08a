-- Chassis (API 1.1): a group of nodes. A node names its chassis by UUID (which never changes), so
-- showing a node needs no join; the foreign key refuses deleting a chassis that still has nodes.
CREATE TABLE chassis (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    uuid VARCHAR(36) NOT NULL,
    description VARCHAR(255) NULL,
    extra TEXT NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NULL,
    CONSTRAINT uniq_chassis0uuid UNIQUE (uuid)
);
ALTER TABLE nodes ADD COLUMN chassis_uuid VARCHAR(36) NULL REFERENCES chassis (uuid);
CREATE INDEX nodes_chassis_uuid_idx ON nodes (chassis_uuid);
