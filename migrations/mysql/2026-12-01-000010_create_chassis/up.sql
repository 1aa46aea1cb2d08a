-- Chassis (API 1.1): a group of nodes. A node names its chassis by UUID (which never changes), so
-- showing a node needs no join; the foreign key refuses deleting a chassis that still has nodes.
CREATE TABLE chassis (
    id INTEGER NOT NULL AUTO_INCREMENT PRIMARY KEY,
    uuid VARCHAR(36) NOT NULL,
    description VARCHAR(255) NULL,
    extra LONGTEXT NOT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    CONSTRAINT uniq_chassis0uuid UNIQUE (uuid)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE nodes ADD COLUMN chassis_uuid VARCHAR(36) NULL,
    ADD INDEX nodes_chassis_uuid_idx (chassis_uuid),
    ADD CONSTRAINT nodes_chassis_fk FOREIGN KEY (chassis_uuid) REFERENCES chassis (uuid);
