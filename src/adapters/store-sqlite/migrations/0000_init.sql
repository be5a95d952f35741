CREATE TABLE `allocations` (
	`id` text PRIMARY KEY NOT NULL,
	`workload_id` text NOT NULL,
	`epoch` integer NOT NULL,
	`token` text NOT NULL,
	`handle` text,
	`phase` text NOT NULL,
	`reason` text,
	`message` text,
	`exit_code` integer,
	`submitted_at` integer,
	`started_at` integer,
	`ended_at` integer,
	`acknowledged_at` integer,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE UNIQUE INDEX `allocations_token` ON `allocations` (`token`);--> statement-breakpoint
CREATE UNIQUE INDEX `allocations_workload_epoch` ON `allocations` (`workload_id`,`epoch`);--> statement-breakpoint
CREATE UNIQUE INDEX `allocations_one_active_per_workload` ON `allocations` (`workload_id`) WHERE "allocations"."phase" IN ('SUBMITTING','QUEUED','RUNNING','STOPPING');--> statement-breakpoint
CREATE INDEX `allocations_phase` ON `allocations` (`phase`);--> statement-breakpoint
CREATE TABLE `burned_nonces` (
	`nonce` text PRIMARY KEY NOT NULL,
	`allocation_id` text NOT NULL,
	`burned_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `conditions` (
	`workload_id` text NOT NULL,
	`type` text NOT NULL,
	`status` text NOT NULL,
	`reason` text NOT NULL,
	`message` text NOT NULL,
	`last_transition_time` integer NOT NULL,
	PRIMARY KEY(`workload_id`, `type`),
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE TABLE `events` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`workload_id` text NOT NULL,
	`allocation_id` text,
	`at` integer NOT NULL,
	`phase` text NOT NULL,
	`reason` text,
	`message` text,
	FOREIGN KEY (`workload_id`) REFERENCES `workloads`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `events_workload` ON `events` (`workload_id`,`id`);--> statement-breakpoint
CREATE TABLE `workloads` (
	`id` text PRIMARY KEY NOT NULL,
	`kind` text NOT NULL,
	`name` text NOT NULL,
	`profile` text NOT NULL,
	`spec_json` text NOT NULL,
	`spec_revision` integer DEFAULT 1 NOT NULL,
	`phase` text NOT NULL,
	`reason` text,
	`message` text,
	`desired` text DEFAULT 'RUN' NOT NULL,
	`stop_reason` text,
	`stop_message` text,
	`execution_epoch` integer DEFAULT 0 NOT NULL,
	`max_attempts` integer DEFAULT 1 NOT NULL,
	`exit_code` integer,
	`idempotency_key` text,
	`request_hash` text,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`last_active_at` integer
);
--> statement-breakpoint
CREATE UNIQUE INDEX `workloads_idempotency_key` ON `workloads` (`idempotency_key`);--> statement-breakpoint
CREATE INDEX `workloads_phase` ON `workloads` (`phase`);--> statement-breakpoint
CREATE INDEX `workloads_created` ON `workloads` (`created_at`,`id`);