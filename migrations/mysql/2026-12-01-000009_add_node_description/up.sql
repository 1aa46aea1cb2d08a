-- Free text about the node (API 1.51).
ALTER TABLE nodes ADD COLUMN description TEXT NULL;
