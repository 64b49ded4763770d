CREATE TABLE `private_names` (
	`owner_id` integer NOT NULL,
	`name` text NOT NULL,
	`protocol` text NOT NULL,
	`shares` text DEFAULT '[]' NOT NULL,
	`local_port` integer,
	`updated_at` text NOT NULL,
	PRIMARY KEY(`owner_id`, `name`),
	FOREIGN KEY (`owner_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `users` ADD `can_share` integer DEFAULT true NOT NULL;