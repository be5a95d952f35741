-- Idempotency keys belong to their principal (issue 32): unique per owner, not across the
-- daemon. A key unique daemon-wide let one principal learn from a 409 whether another had
-- used a key, and squat keys another would use. NULL owner (the admin) is folded to '' so
-- the admin's keys stay unique among themselves (SQLite treats NULLs as distinct); no
-- principal is named '' (PRINCIPAL_NAME_PATTERN).
DROP INDEX `workloads_idempotency_key`;--> statement-breakpoint
CREATE UNIQUE INDEX `workloads_owner_idempotency_key` ON `workloads` (coalesce("owner", ''),`idempotency_key`);
