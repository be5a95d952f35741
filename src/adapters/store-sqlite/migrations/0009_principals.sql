-- Principals (issue 22): who may call the API besides the admin, with their limits; their
-- tokens, stored only as a sha256 of the secret; and the owner of every workload (NULL: the
-- admin's), with the CPUs and GPUs its profile holds, so a principal's limits are summed in
-- the transaction that inserts its next workload.
CREATE TABLE `principals` (
	`name` text PRIMARY KEY NOT NULL,
	`unix_user` text,
	`max_sessions` integer,
	`max_batch` integer,
	`max_cpus` integer,
	`max_gpus` integer,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `principals_unix_user` ON `principals` (`unix_user`);--> statement-breakpoint
CREATE TABLE `principal_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`principal` text NOT NULL,
	`secret_sha256` text NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer,
	`revoked_at` integer,
	FOREIGN KEY (`principal`) REFERENCES `principals`(`name`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `principal_tokens_principal` ON `principal_tokens` (`principal`);--> statement-breakpoint
ALTER TABLE `workloads` ADD `owner` text;--> statement-breakpoint
ALTER TABLE `workloads` ADD `cpus` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `workloads` ADD `gpus` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `workloads_owner_live` ON `workloads` (`owner`,`kind`) WHERE "workloads"."phase" = 'PENDING' OR "workloads"."phase" = 'SUBMITTING' OR "workloads"."phase" = 'QUEUED' OR "workloads"."phase" = 'RUNNING' OR "workloads"."phase" = 'STOPPING';--> statement-breakpoint
CREATE INDEX `workloads_owner_created` ON `workloads` (`owner`,`created_at`,`id`);
