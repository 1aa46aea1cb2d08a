ALTER TABLE nodes DROP COLUMN description;
