CREATE TABLE `traffic_policies` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`name` text NOT NULL,
	`scope` text NOT NULL,
	`user_id` integer,
	`hostname` text,
	`document` text NOT NULL,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `traffic_policies_name` ON `traffic_policies` (`name`);--> statement-breakpoint
CREATE INDEX `traffic_policies_user` ON `traffic_policies` (`user_id`);