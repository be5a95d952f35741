CREATE TABLE `workload_changes` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`workload_id` text NOT NULL
);
--> statement-breakpoint
CREATE TRIGGER `workloads_changed_on_insert` AFTER INSERT ON `workloads` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (NEW.`id`); END;
--> statement-breakpoint
CREATE TRIGGER `workloads_changed_on_update` AFTER UPDATE ON `workloads` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (NEW.`id`); END;
--> statement-breakpoint
CREATE TRIGGER `allocations_changed_on_insert` AFTER INSERT ON `allocations` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (NEW.`workload_id`); END;
--> statement-breakpoint
CREATE TRIGGER `allocations_changed_on_update` AFTER UPDATE ON `allocations` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (NEW.`workload_id`); END;
