-- The change log (0003) also hears conditions and deletions, so a cache keyed by it (the
-- API's serialized workload views) never serves a condition or a row that is gone.
CREATE TRIGGER `conditions_changed_on_insert` AFTER INSERT ON `conditions` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (NEW.`workload_id`); END;
--> statement-breakpoint
CREATE TRIGGER `conditions_changed_on_update` AFTER UPDATE ON `conditions` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (NEW.`workload_id`); END;
--> statement-breakpoint
CREATE TRIGGER `conditions_changed_on_delete` AFTER DELETE ON `conditions` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (OLD.`workload_id`); END;
--> statement-breakpoint
CREATE TRIGGER `allocations_changed_on_delete` AFTER DELETE ON `allocations` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (OLD.`workload_id`); END;
--> statement-breakpoint
CREATE TRIGGER `workloads_changed_on_delete` AFTER DELETE ON `workloads` BEGIN INSERT INTO `workload_changes` (`workload_id`) VALUES (OLD.`id`); END;
