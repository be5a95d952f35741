-- Dependencies and held workloads (issue 35): `held` is 1 from a submission with `hold`
-- until its release; `after_json` is the workloads it runs after, as JSON
-- ([{"kind":"afterok","workloadId":"..."}]), NULL for none. Both are read with the live
-- view each tick, so they live on the workload's row rather than in a table of their own.
ALTER TABLE `workloads` ADD `held` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `workloads` ADD `after_json` text;
