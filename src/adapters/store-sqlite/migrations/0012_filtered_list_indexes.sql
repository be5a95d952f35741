CREATE INDEX `workloads_kind_created` ON `workloads` (`kind`,`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `workloads_phase_created` ON `workloads` (`phase`,`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `workloads_kind_phase_created` ON `workloads` (`kind`,`phase`,`created_at`,`id`);--> statement-breakpoint
CREATE INDEX `workloads_profile_created` ON `workloads` (`profile`,`created_at`,`id`);
