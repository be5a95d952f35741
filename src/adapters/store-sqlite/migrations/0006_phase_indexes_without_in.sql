-- The two partial indexes keyed on phase state their phase list as a chain of = joined by OR
-- instead of IN (...): SQLite evaluates an IN list of three or more constants in an index
-- predicate by building a temporary table, on every run of an UPDATE that sets phase (old
-- and new row), which was about half of committing a reconciler tick's phase changes.
-- Same rows in both indexes, same uniqueness; only the predicate's spelling changes.
DROP INDEX `allocations_one_active_per_workload`;--> statement-breakpoint
CREATE UNIQUE INDEX `allocations_one_active_per_workload` ON `allocations` (`workload_id`) WHERE "allocations"."phase" = 'SUBMITTING' OR "allocations"."phase" = 'QUEUED' OR "allocations"."phase" = 'RUNNING' OR "allocations"."phase" = 'STOPPING';--> statement-breakpoint
DROP INDEX `workloads_live`;--> statement-breakpoint
CREATE INDEX `workloads_live` ON `workloads` (`created_at`,`id`) WHERE "workloads"."phase" = 'PENDING' OR "workloads"."phase" = 'SUBMITTING' OR "workloads"."phase" = 'QUEUED' OR "workloads"."phase" = 'RUNNING' OR "workloads"."phase" = 'STOPPING';