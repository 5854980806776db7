-- What a job's status was when its current lease was granted: 'queued' when it was handed
-- over, 'running' when its lease was taken over after expiring (the holder crashed or lost
-- it). The claim is the in-flight marker of the step it is granted for, so the next holder
-- needs to know whether an earlier one may already have acted on that step.
ALTER TABLE provisioning_jobs ADD COLUMN claimed_from TEXT NOT NULL DEFAULT '';
