ALTER TABLE nodes DROP COLUMN last_request_id;
