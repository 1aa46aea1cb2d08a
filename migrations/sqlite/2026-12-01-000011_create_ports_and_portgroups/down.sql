DROP TABLE ports;
DROP TABLE portgroups;
