CREATE TABLE `custom_hostnames` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`hostname` text NOT NULL,
	`user_id` integer NOT NULL,
	`verified` integer DEFAULT false NOT NULL,
	`token` text NOT NULL,
	`created_at` text NOT NULL,
	`verified_at` text,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `custom_hostnames_hostname` ON `custom_hostnames` (`hostname`);--> statement-breakpoint
CREATE INDEX `custom_hostnames_user` ON `custom_hostnames` (`user_id`);