DROP TABLE conductors;
DROP TABLE nodes;
