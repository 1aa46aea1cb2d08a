-- The host name of the conductor processing an allocation while it is `allocating` (Ironic's
-- `allocations.conductor_affinity`): its own restart resumes it, and another conductor takes it
-- over once that host's lease has run out. NULL in a row of a release before it (taken over).
ALTER TABLE allocations ADD COLUMN conductor_affinity VARCHAR(255) NULL;
