ALTER TABLE runbooks DROP COLUMN traits;
ALTER TABLE runbooks DROP COLUMN description;
