DROP TABLE node_history;
