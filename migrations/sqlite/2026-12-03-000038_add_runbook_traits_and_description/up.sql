-- Runbook traits and description (API 1.112). A node may run a runbook when it has one of the
-- runbook's traits; before 1.112 the runbook's name had to be one of the node's traits, so each
-- existing runbook starts with its name as its one trait (its name was a trait name then, which
-- needs no JSON escaping). The traits are one JSON array, written whole, as a node's are.
ALTER TABLE runbooks ADD COLUMN description VARCHAR(255) NULL;
ALTER TABLE runbooks ADD COLUMN traits TEXT NOT NULL DEFAULT '[]';
UPDATE runbooks SET traits = '["' || name || '"]';
