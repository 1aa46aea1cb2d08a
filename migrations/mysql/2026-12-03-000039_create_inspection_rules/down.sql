DROP TABLE inspection_rules;
