-- The scheduler's own words for the admin (issue 35): `message` keeps the form a principal
-- reads (the site's placement names hidden), `message_admin` the words it
-- was made from, NULL when the two are the same (and on every row before this migration).
ALTER TABLE `workloads` ADD `message_admin` text;--> statement-breakpoint
ALTER TABLE `events` ADD `message_admin` text;
