DROP TABLE node_inventory;
DROP TABLE node_history;
