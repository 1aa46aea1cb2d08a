-- The service step a node is running (API 1.87), as `deploy_step` is for a deploy: `{}` when
-- it is not servicing.
ALTER TABLE nodes ADD COLUMN service_step TEXT NOT NULL DEFAULT ('{}');
