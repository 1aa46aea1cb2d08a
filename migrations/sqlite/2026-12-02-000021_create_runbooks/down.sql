DROP TABLE runbooks;
