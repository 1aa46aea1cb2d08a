-- The id of the last request applied to the node (its X-OpenStack-Request-Id): a retry of it
-- is answered as applied instead of being applied again.
ALTER TABLE nodes ADD COLUMN last_request_id VARCHAR(96) NULL;
