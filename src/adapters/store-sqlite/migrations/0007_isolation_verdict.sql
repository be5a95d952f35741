CREATE TABLE `isolation_verdicts` (
	`backend` text PRIMARY KEY NOT NULL,
	`mechanism` text NOT NULL,
	`verified_at` integer NOT NULL,
	`binary` text NOT NULL,
	`nodes_json` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `allocations_handle` ON `allocations` (`handle`);
