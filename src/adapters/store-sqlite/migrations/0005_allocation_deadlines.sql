ALTER TABLE `allocations` ADD `deadline_at` integer;--> statement-breakpoint
ALTER TABLE `allocations` ADD `deadline_warned_at` integer;